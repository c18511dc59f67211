// model/train.hpp: a checkpoint written by the trainer, read back by load_model (the loader every
// command uses), is the trained model: the same logits bit for bit (the same f32 weights through
// the same family code). Also the schedule's fixed points and the config file checks.
#include <cmath>
#include <filesystem>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/train.hpp"
#include "testing.hpp"
#include "trained_checkpoint.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
namespace fs = std::filesystem;

namespace {

at::Tensor random_ids(int64_t batch, int64_t n, int64_t vocab, uint64_t seed) {
    at::manual_seed(seed);
    return at::randint(0, vocab, {batch, n}, at::TensorOptions().dtype(at::kLong));
}

}  // namespace

class TrainCheckpoint : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainCheckpoint, LoadsBackToTheSameLogits) {
    const TrainConfig c = train_preset(GetParam());
    const nlohmann::json hf = hf_config_json(c, 257, 256);
    Trainer t(c, hf, 7);
    for (int s = 0; s < 3; ++s) t.step(random_ids(c.batch, c.seq_len, 257, 100 + s));
    ASSERT_EQ(t.steps_done(), 3);
    testutil::ScratchDir tmp;
    const Model loaded = testutil::save_and_load(t, hf, tmp.path());
    EXPECT_EQ(loaded.config().architecture, c.architecture);
    EXPECT_EQ(loaded.n_params(), t.model().n_params());
    const at::Tensor ids = random_ids(2, c.seq_len, 257, 5);
    const at::Tensor a = t.model().forward(ids).logits, b = loaded.forward(ids).logits;
    EXPECT_TRUE(at::equal(a, b)) << (a - b).abs().max().item<double>();
    // The weights changed: a freshly initialised model gives other logits.
    Trainer fresh(c, hf, 7);
    EXPECT_FALSE(at::equal(fresh.model().forward(ids).logits, b));
}

INSTANTIATE_TEST_SUITE_P(Presets, TrainCheckpoint, ::testing::Values("tiny", "tiny-gpt2"));

// Warm-up: lr (s + 1) / warmup; then the cosine from lr at step `warmup` to min_lr at the last.
TEST(TrainSchedule, FixedPoints) {
    TrainConfig c = train_preset("tiny");
    c.steps = 105;
    c.warmup = 5;
    c.lr = 1e-2;
    c.min_lr = 1e-3;
    const nlohmann::json hf = hf_config_json(c, 257, 256);
    const Trainer t(c, hf, 1);
    EXPECT_DOUBLE_EQ(t.learning_rate(0), 1e-2 / 5);
    EXPECT_DOUBLE_EQ(t.learning_rate(4), 1e-2);
    EXPECT_DOUBLE_EQ(t.learning_rate(5), 1e-2);
    // Step 54 is 49 of the 99 cosine steps.
    EXPECT_NEAR(t.learning_rate(54), 1e-3 + 0.5 * 9e-3 * (1 + std::cos(M_PI * 49 / 99.0)), 1e-15);
    EXPECT_DOUBLE_EQ(t.learning_rate(104), 1e-3);
}

TEST(TrainConfigFile, RejectsUnknownKeysAndBadValues) {
    EXPECT_THROW(train_config_from_json({{"d_modle", 8}}, "c.json"), InputError);
    EXPECT_THROW(train_config_from_json({{"d_model", "8"}}, "c.json"), InputError);
    EXPECT_THROW(train_config_from_json({{"d_model", 10}, {"n_heads", 4}}, "c.json"), InputError);
    EXPECT_THROW(train_config_from_json({{"architecture", "bert"}}, "c.json"), InputError);
    EXPECT_THROW(train_preset("nope"), UsageError);
    const TrainConfig c = train_config_from_json({{"d_model", 48}, {"lr", 0.01}}, "c.json");
    EXPECT_EQ(c.d_model, 48);
    EXPECT_EQ(c.lr, 0.01);
    // Round trip through the JSON form.
    const TrainConfig p = train_preset("default");
    EXPECT_EQ(train_config_json(train_config_from_json(train_config_json(p), "x")),
              train_config_json(p));
}
