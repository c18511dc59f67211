// `train --attention-function` and `--no-bos` (api/train.hpp): the switches are recorded in
// train_config.json, run.json and every checkpoint's config.json / tokenizer files, and every
// loader reads them back: load_model builds the trained attention function, and the tokenizer
// written beside a model trained without BOS prepends none by default (analyze's BOS policy
// "default"), while --bos always still finds the token. A run without the switches writes what it
// wrote before they existed (no new key, no tokenizer_config.json).
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sinkscope/api/train.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/tokenizer/byte_bpe_trainer.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;

namespace {

api::TrainOptions options(const fs::path& text, const fs::path& out) {
    api::TrainOptions o;
    o.preset = "tiny";
    o.text = text.string();
    o.out = out.string();
    o.steps = 4;
    o.checkpoint_every = 2;
    o.threads = 1;
    o.progress = "never";
    return o;
}

nlohmann::json json_at(const fs::path& p) {
    return nlohmann::json::parse(read_file(p));
}

}  // namespace

TEST(TrainSwitches, SigmoidWithoutBosIsRecordedAndReadBack) {
    testutil::ScratchDir tmp;
    const fs::path text = testutil::write_training_corpus(tmp.path());
    api::TrainOptions o = options(text, tmp / "sig");
    o.attention_function = "sigmoid";
    o.no_bos = true;
    std::ostringstream log;
    api::run_train(o, log);
    const fs::path out = tmp / "sig";
    EXPECT_NE(log.str().find("(attention sigmoid, no BOS)"), std::string::npos) << log.str();

    const nlohmann::json tc = json_at(out / "train_config.json");
    EXPECT_EQ(tc.at("attention"), "sigmoid");
    EXPECT_EQ(tc.at("bos"), false);
    const nlohmann::json rec = json_at(out / "run.json");
    EXPECT_EQ(rec.at("train").at("attention"), "sigmoid");
    EXPECT_EQ(rec.at("train").at("bos"), false);
    // Packed without BOS: seq_len (32) corpus tokens per sequence.
    EXPECT_EQ(rec.at("train").at("sequences").get<int64_t>(),
              rec.at("train").at("corpus_tokens").get<int64_t>() / 32);
    for (const fs::path dir : {out, out / "checkpoints" / "step_000002"}) {
        SCOPED_TRACE(dir.string());
        EXPECT_EQ(json_at(dir / "config.json").at("sinkscope_attention"), "sigmoid");
        ASSERT_TRUE(fs::exists(dir / "tokenizer_config.json"));
        const model::Model m = model::load_model(dir);
        EXPECT_EQ(m.config().attention, model::AttentionFunction::Sigmoid);
        ASSERT_NE(m.tokenizer(), nullptr);
        EXPECT_FALSE(m.tokenizer()->adds_bos_by_default());
        EXPECT_EQ(m.tokenizer()->bos_id(), tokenizer::kByteBpeBosId);
        const std::vector<int32_t> plain =
            m.encode("Once upon a time", tokenizer::BosPolicy::Never);
        EXPECT_EQ(m.encode("Once upon a time", tokenizer::BosPolicy::ModelDefault), plain);
        const std::vector<int32_t> with =
            m.encode("Once upon a time", tokenizer::BosPolicy::Always);
        ASSERT_EQ(with.size(), plain.size() + 1);
        EXPECT_EQ(with[0], tokenizer::kByteBpeBosId);
    }
    for (const nlohmann::json& cp : json_at(out / "manifest.json").at("checkpoints")) {
        const double s = cp.at("sink_eps").get<double>();
        EXPECT_TRUE(s >= 0 && s <= 1) << s;
    }
}

TEST(TrainSwitches, DefaultRunWritesNoSwitchAndKeepsBos) {
    testutil::ScratchDir tmp;
    const fs::path text = testutil::write_training_corpus(tmp.path());
    std::ostringstream log;
    api::run_train(options(text, tmp / "soft"), log);
    const fs::path out = tmp / "soft";
    const nlohmann::json tc = json_at(out / "train_config.json");
    EXPECT_FALSE(tc.contains("attention"));
    EXPECT_FALSE(tc.contains("bos"));
    EXPECT_FALSE(json_at(out / "config.json").contains("sinkscope_attention"));
    EXPECT_FALSE(fs::exists(out / "tokenizer_config.json"));
    const nlohmann::json rec = json_at(out / "run.json");
    EXPECT_EQ(rec.at("train").at("bos"), true);
    // BOS and 31 corpus tokens per sequence.
    EXPECT_EQ(rec.at("train").at("sequences").get<int64_t>(),
              rec.at("train").at("corpus_tokens").get<int64_t>() / 31);
    const model::Model m = model::load_model(out);
    EXPECT_EQ(m.config().attention, model::AttentionFunction::Softmax);
    EXPECT_TRUE(m.tokenizer()->adds_bos_by_default());
    EXPECT_EQ(m.encode("Once", tokenizer::BosPolicy::ModelDefault).front(),
              tokenizer::kByteBpeBosId);
}

TEST(TrainSwitches, UnknownAttentionIsAUsageError) {
    testutil::ScratchDir tmp;
    api::TrainOptions o = options(testutil::write_training_corpus(tmp.path()), tmp / "x");
    o.attention_function = "relu";
    std::ostringstream log;
    try {
        api::run_train(o, log);
        ADD_FAILURE() << "no error";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("'relu'"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(tmp / "x"));
}
