// Pipeline stages (model.hpp LayerRange, analyze --split layers): a forward split into stages
// of consecutive blocks, each starting from the residual stream the one before handed out,
// computes what one whole forward computes, bit for bit, for every architecture family; bad
// ranges and a missing or malformed stream are refused.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "decoder_invariants.hpp"
#include "random_weights.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/model.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
using testutil::MemoryWeightStore;
using testutil::source_of;

namespace {

// The tiny config of `arch` with `n_layers` blocks (room for 3 stages).
ModelConfig config_of(const ArchitectureInfo& a, int64_t n_layers) {
    nlohmann::json j = testutil::tiny_config_json(a);
    j["num_hidden_layers"] = n_layers;
    j["n_layer"] = n_layers;
    return config_from_hf_json(j, std::string("tiny config.json (") + a.name + ")");
}

// An input of 9 tokens (or the one image a vision model reads), batch of 2.
ModelInput input_of(const ModelConfig& c) {
    ModelInput in;
    if (c.is_vision()) {
        in.pixel_values = at::linspace(-1.0, 1.0, 2 * c.n_channels * c.image_size * c.image_size)
                              .view({2, c.n_channels, c.image_size, c.image_size})
                              .to(at::kFloat);
        return in;
    }
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < 18; ++i) ids.push_back((i * 7 + 3) % c.d_vocab);
    in.ids = at::tensor(ids, at::kLong).view({2, 9});
    return in;
}

// Runs blocks [begin, end) from `residual`.
ForwardResult stage(const Model& m, ModelInput in, int64_t begin, int64_t end,
                    const at::Tensor& residual) {
    in.stage.begin = begin;
    in.stage.end = end;
    in.stage.residual = residual;
    return m.forward(in, CaptureSpec::all());
}

}  // namespace

TEST(LayerStages, StagesComposeToTheWholeForwardBitForBit) {
    for (const ArchitectureInfo& a : architectures()) {
        for (const ComputeDType dtype : {ComputeDType::Float32, ComputeDType::BFloat16}) {
            SCOPED_TRACE(a.name + std::string(" ") + compute_dtype_name(dtype));
            const ModelConfig c = config_of(a, 5);
            const MemoryWeightStore s = testutil::random_weights(c);
            RuntimeOptions rt;
            rt.dtype = dtype;
            const Model m = build_model(c, source_of(s), rt);
            const ModelInput in = input_of(c);
            const ForwardResult whole = m.forward(in, CaptureSpec::all());
            EXPECT_FALSE(whole.residual.defined());
            // Three stages: [0, 2), [2, 3), [3, 5).
            const ForwardResult s0 = stage(m, in, 0, 2, {});
            ASSERT_TRUE(s0.residual.defined());
            EXPECT_FALSE(s0.logits.defined());
            const ForwardResult s1 = stage(m, in, 2, 3, s0.residual);
            const ForwardResult s2 = stage(m, in, 3, -1, s1.residual);
            EXPECT_FALSE(s2.residual.defined());
            ASSERT_TRUE(whole.logits.defined());
            EXPECT_TRUE(at::equal(s2.logits, whole.logits));
            // Every hook of the whole forward is captured by exactly one stage, with its bits.
            size_t n_staged = 0;
            for (const ForwardResult* r : {&s0, &s1, &s2}) {
                n_staged += r->captured.size();
                for (const auto& [name, t] : r->captured) {
                    ASSERT_TRUE(whole.captured.count(name)) << name;
                    EXPECT_TRUE(at::equal(t, whole.captured.at(name))) << name;
                }
            }
            EXPECT_EQ(n_staged, whole.captured.size());
            EXPECT_TRUE(s1.captured.count(hook_name(HookPoint::Pattern, 2)));
            EXPECT_FALSE(s1.captured.count(hook_name(HookPoint::Pattern, 1)));
            EXPECT_FALSE(s1.captured.count(hook_name(HookPoint::Pattern, 3)));
        }
    }
}

TEST(LayerStages, BadRangesAndStreamsAreRefused) {
    const ModelConfig c = config_of(find_architecture("llama"), 4);
    const MemoryWeightStore s = testutil::random_weights(c);
    const Model m = build_model(c, source_of(s));
    const ModelInput in = input_of(c);
    const at::Tensor good = stage(m, in, 0, 2, {}).residual;
    EXPECT_THROW(stage(m, in, 2, 2, good), UsageError);                   // empty
    EXPECT_THROW(stage(m, in, 3, 2, good), UsageError);                   // reversed
    EXPECT_THROW(stage(m, in, 0, 5, {}), UsageError);                     // past the last block
    EXPECT_THROW(stage(m, in, -1, 2, {}), UsageError);                    // before the first
    EXPECT_THROW(stage(m, in, 2, -1, {}), UsageError);                    // no stream handed in
    EXPECT_THROW(stage(m, in, 2, -1, good.narrow(1, 0, 8)), UsageError);  // other length
    EXPECT_THROW(stage(m, in, 2, -1, good.to(at::kDouble)), UsageError);  // other dtype
    try {
        stage(m, in, 2, -1, {});
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("residual stream entering it"), std::string::npos)
            << e.what();
    }
    // A valid split still gives the whole forward's logits.
    EXPECT_TRUE(at::equal(stage(m, in, 2, -1, good).logits, m.forward(in).logits));
}
