// Editing hooks (hooks.hpp HookFn, issue 52) on every architecture family with random weights:
// a hook that hands back what it was given changes nothing, bit for bit; patching every hook of a
// target run from a source run reproduces the source run, bit for bit; an edit takes effect as
// its own definition says (zeroing a head's z is the zero head mask, scores set to 0 everywhere
// give uniform attention over every key, future ones included); a wrong shape names the hook;
// right-padded batches equal each sequence run alone.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "decoder_invariants.hpp"
#include "forward_bound.hpp"
#include "random_weights.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/model.hpp"
#include "tensor_tolerance.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
using testutil::MemoryWeightStore;
using testutil::source_of;

namespace {

// The tiny config of `arch` with room for 300 positions (several query blocks of attend()).
ModelConfig config_of(const ArchitectureInfo& a) {
    nlohmann::json j = testutil::tiny_config_json(a);
    j["max_position_embeddings"] = 320;
    j["n_positions"] = 320;
    return config_from_hf_json(j, std::string("tiny config.json (") + a.name + ")");
}

// `batch` sequences of `T` tokens (or the images a vision model reads); `salt` changes the ids.
ModelInput input_of(const ModelConfig& c, int64_t batch, int64_t T, int64_t salt = 0) {
    ModelInput in;
    if (c.is_vision()) {
        const int64_t n = batch * c.n_channels * c.image_size * c.image_size;
        in.pixel_values = (at::linspace(-1.0, 1.0, n) * double(1 + salt))
                              .view({batch, c.n_channels, c.image_size, c.image_size})
                              .to(at::kFloat);
        return in;
    }
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < batch * T; ++i) ids.push_back((i * 7 + 3 + 5 * salt) % c.d_vocab);
    in.ids = at::tensor(ids, at::kLong).view({batch, T});
    return in;
}

// The tokens an input of `T` ids needs to run several query blocks of attend(): past
// kQueryBlock, within the model's context.
int64_t long_length(const ModelConfig& c) {
    return c.is_vision() ? 0 : std::min<int64_t>(c.n_ctx, 300);
}

}  // namespace

TEST(EditingHooks, HandingBackACopyChangesNothingBitForBit) {
    for (const ArchitectureInfo& a : architectures()) {
        SCOPED_TRACE(a.name);
        const ModelConfig c = config_of(a);
        const MemoryWeightStore s = testutil::random_weights(c);
        const Model m = build_model(c, source_of(s));
        for (const int64_t T : {int64_t(9), long_length(c)}) {
            if (T == 0) continue;
            SCOPED_TRACE(T);
            const ModelInput in = input_of(c, 2, T);
            const ForwardResult plain = m.forward(in);
            const ForwardResult all = m.forward(in, CaptureSpec::all());
            int64_t calls = 0;
            CaptureSpec copy_back = CaptureSpec::all();
            copy_back.edit("*", [&](const at::Tensor& t, const HookSite&) {
                ++calls;
                return t.clone();
            });
            const ForwardResult edited = m.forward(in, copy_back);
            EXPECT_EQ(calls, static_cast<int64_t>(all.captured.size()));
            EXPECT_TRUE(at::equal(edited.logits, plain.logits));
            EXPECT_TRUE(at::equal(edited.logits, all.logits));
            ASSERT_EQ(edited.captured.size(), all.captured.size());
            for (const auto& [name, t] : all.captured)
                EXPECT_TRUE(at::equal(edited.captured.at(name), t)) << name;
            // Edits without capture: the scores and pattern squares are then built for the hooks
            // alone.
            CaptureSpec only_edits;
            only_edits.edit("*", [](const at::Tensor& t, const HookSite&) { return t.clone(); });
            EXPECT_TRUE(at::equal(m.forward(in, only_edits).logits, plain.logits));
        }
    }
}

TEST(EditingHooks, PatchingEveryHookFromASourceReproducesTheSource) {
    for (const ArchitectureInfo& a : architectures()) {
        SCOPED_TRACE(a.name);
        const ModelConfig c = config_of(a);
        const MemoryWeightStore s = testutil::random_weights(c);
        const Model m = build_model(c, source_of(s));
        const int64_t T = c.is_vision() ? 0 : 11;
        const ModelInput source = input_of(c, 1, T, 1), target = input_of(c, 1, T, 2);
        const ForwardResult src = m.forward(source, CaptureSpec::all());
        const ForwardResult tgt = m.forward(target);
        CaptureSpec patch;
        patch.edit("*", [&](const at::Tensor&, const HookSite& site) {
            return src.captured.at(site.name);
        });
        const ForwardResult patched = m.forward(target, patch);
        EXPECT_TRUE(at::equal(patched.logits, src.logits));
        testutil::expect_differs("target vs source logits", tgt.logits, src.logits, 1e-6);
    }
}

TEST(EditingHooks, ZeroingAHeadsZIsTheZeroHeadMask) {
    for (const char* arch : {"llama", "gpt2", "bert"}) {
        SCOPED_TRACE(arch);
        const ModelConfig c = config_of(find_architecture(arch));
        const MemoryWeightStore s = testutil::random_weights(c);
        const Model m = build_model(c, source_of(s));
        const ModelInput in = input_of(c, 1, 10);
        HeadMask mask(HeadMask::Kind::Zero, c.n_layers, c.n_heads);
        mask.ablate(1, 2);
        CaptureSpec zero;
        zero.edit(hook_name(HookPoint::Z, 1), [](const at::Tensor& z, const HookSite& site) {
            EXPECT_EQ(site.layer, 1);
            EXPECT_EQ(site.point, HookPoint::Z);
            at::Tensor out = z.clone();
            out.select(2, 2).zero_();  // [batch, pos, n_heads, d_head]
            return out;
        });
        const ForwardResult hooked = m.forward(in, zero), masked = m.forward(in, {}, &mask);
        EXPECT_TRUE(at::equal(hooked.logits, masked.logits));
        testutil::expect_differs("ablated vs plain", hooked.logits, m.forward(in).logits, 1e-6);
    }
}

TEST(EditingHooks, ScoresSetEverywhereAreSeenBeyondTheCausalMask) {
    // Scores of layer 0 all 0: every query weighs every key 1/T, future ones too, so z of layer
    // 0 is the mean of v over all positions for every query (hook_v read from the same run).
    const ModelConfig c = config_of(find_architecture("llama"));
    const MemoryWeightStore s = testutil::random_weights(c);
    RuntimeOptions rt;
    rt.dtype = ComputeDType::Float64;
    const Model m = build_model(c, source_of(s), rt);
    for (const int64_t T : {int64_t(10), long_length(c)}) {
        SCOPED_TRACE(T);
        const ModelInput in = input_of(c, 1, T);
        CaptureSpec spec({hook_name(HookPoint::V, 0), hook_name(HookPoint::Z, 0),
                          hook_name(HookPoint::Pattern, 0)});
        spec.edit(hook_name(HookPoint::AttnScores, 0),
                  [](const at::Tensor& t, const HookSite&) { return at::zeros_like(t); });
        const ForwardResult r = m.forward(in, spec);
        const at::Tensor p = r.captured.at(hook_name(HookPoint::Pattern, 0));
        EXPECT_EQ(testutil::max_abs_diff(p, at::full_like(p, 1.0 / double(T))), 0.0)
            << "softmax of T equal scores";
        const int64_t group = c.n_heads / c.n_kv_heads;
        const at::Tensor v = r.captured
                                 .at(hook_name(HookPoint::V, 0))  // [1, T, n_kv, d_head]
                                 .repeat_interleave(group, 2);
        const at::Tensor expected = v.mean(1, true).expand({1, T, c.n_heads, c.d_head});
        // T products p v (p = 1/T) summed, against a mean: gamma_{T+1}(2^-53) max|v|
        testutil::expect_close("z vs mean v", r.captured.at(hook_name(HookPoint::Z, 0)), expected,
                               2.0 * double(T + 1) * testutil::kU64 * testutil::max_abs(v));
    }
}

TEST(EditingHooks, AWrongShapeNamesTheHook) {
    const ModelConfig c = config_of(find_architecture("llama"));
    const MemoryWeightStore s = testutil::random_weights(c);
    const Model m = build_model(c, source_of(s));
    CaptureSpec bad;
    bad.edit("blocks.1.hook_resid_mid",
             [](const at::Tensor& t, const HookSite&) { return t.narrow(1, 0, 2); });
    try {
        m.forward(input_of(c, 1, 6), bad);
        ADD_FAILURE() << "no error";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("blocks.1.hook_resid_mid"), std::string::npos)
            << e.what();
    }
    // No hook matching: nothing called, nothing changed.
    CaptureSpec none;
    none.edit("blocks.9.*", [](const at::Tensor&, const HookSite&) -> at::Tensor {
        throw std::logic_error("called");
    });
    const ModelInput in = input_of(c, 1, 6);
    EXPECT_TRUE(at::equal(m.forward(in, none).logits, m.forward(in).logits));
}

TEST(EditingHooks, RightPaddedBatchesEqualEachSequenceAlone) {
    for (const ArchitectureInfo& a : architectures()) {
        const ModelConfig c = config_of(a);
        if (!c.causal || c.is_vision()) continue;
        SCOPED_TRACE(a.name);
        const MemoryWeightStore s = testutil::random_weights(c);
        const Model m = build_model(c, source_of(s));
        const std::vector<int64_t> lengths{12, 7, 3};
        const int64_t T = 12;
        const ModelInput full = input_of(c, 3, T);
        ModelInput padded = full;
        padded.attention_mask = at::zeros({3, T}, at::kLong);
        for (int64_t b = 0; b < 3; ++b) padded.attention_mask[b].narrow(0, 0, lengths[b]).fill_(1);
        const ForwardResult batch = m.forward(padded, CaptureSpec::attention());
        for (int64_t b = 0; b < 3; ++b) {
            const int64_t n = lengths[b];
            ModelInput alone;
            alone.ids = full.ids.narrow(0, b, 1).narrow(1, 0, n);
            const ForwardResult one = m.forward(alone, CaptureSpec::attention());
            // Two float32 forwards in other GEMM shapes (sides = 2, forward_bound.hpp).
            testutil::expect_close("logits of sequence " + std::to_string(b),
                                   batch.logits.narrow(0, b, 1).narrow(1, 0, n), one.logits,
                                   testutil::logit_tol(c, n, testutil::max_abs(one.logits)));
            const at::Tensor p = batch.captured.at(hook_name(HookPoint::Pattern, 1));
            testutil::expect_close(
                "pattern of sequence " + std::to_string(b),
                p.narrow(0, b, 1).narrow(2, 0, n).narrow(3, 0, n),
                one.captured.at(hook_name(HookPoint::Pattern, 1)),
                testutil::attention_tol(
                    c, n,
                    testutil::max_abs(
                        one.captured.at(hook_name(HookPoint::AttnScores, 1))
                            .masked_fill(
                                one.captured.at(hook_name(HookPoint::AttnScores, 1)).isinf(), 0))));
        }
        // Left padding, a row of pads only, or a mask of another shape: refused.
        ModelInput left = full;
        left.attention_mask = at::ones({3, T}, at::kLong);
        left.attention_mask[1][0] = 0;
        EXPECT_THROW(m.forward(left), UsageError);
        ModelInput empty_row = full;
        empty_row.attention_mask = at::ones({3, T}, at::kLong);
        empty_row.attention_mask[2].zero_();
        EXPECT_THROW(m.forward(empty_row), UsageError);
        ModelInput wrong = full;
        wrong.attention_mask = at::ones({3, T - 1}, at::kLong);
        EXPECT_THROW(m.forward(wrong), UsageError);
    }
}
