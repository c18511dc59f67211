// Gemma-2 and Phi-3 against an independent float64 reference: tests/model/tiny_decoder_ref.py
// writes a tiny seeded random checkpoint (HF directory, and a GGUF twin with llama.cpp's names and
// keys) and the transformers forward of it in float64 NumPy, in the zoo golden layout; these tests
// load the checkpoint and compare logits, attention, scores and hidden states.
#include <cmath>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "forward_bound.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"
#include "testing.hpp"
#include "tiny_reference.hpp"
#include "zoo_golden.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;
using namespace sinkscope::testutil;

namespace {

// Tolerances of the float32 forward against the float64 reference: one float32 side
// (forward_bound.hpp with sides = 1; the reference's own error is 2^29 times smaller). Beyond
// block_terms, a Gemma-2 block accumulates two more RMSNorms (post-attention, post-feedforward:
// d_model terms each, ~8 operations) and the score soft-cap (divide, tanh, multiply); the final
// soft-cap adds 3 roundings to the logits. tanh has slope <= 1, so an error before a cap passes
// on at most unchanged, and it scales with the magnitude BEFORE the cap: cap * atanh(max / cap)
// recovered from the reference's capped maximum.
ZooTolerances reference_tolerances(const model::ModelConfig& c, const fs::path& input_dir) {
    const at::Tensor scores = zoo_tensor(input_dir / "attn_scores.npy");  // [L, H, T, T]
    const int64_t T = scores.size(-1), L = c.n_layers;
    const bool sandwich = c.architecture == "gemma2";
    const double extra_block = sandwich ? 2.0 * (double(c.d_model) + 8.0) + 3.0 : 0.0;
    const double cap_terms = c.final_softcap > 0 ? 3.0 : 0.0;
    auto uncapped = [](double capped_max, double cap) {
        return cap > 0 ? cap * std::atanh(std::min(capped_max / cap, 1.0 - 1e-12)) : capped_max;
    };
    const double max_score = uncapped(max_abs(scores), c.attn_softcap);
    const double max_logit =
        uncapped(max_abs(zoo_tensor(input_dir / "logits.npy")), c.final_softcap);
    const double k_pattern =
        pattern_terms(c, T, L - 1) + double(L - 1) * extra_block + (c.attn_softcap > 0 ? 3.0 : 0.0);
    ZooTolerances t;
    t.logits =
        f32_accumulation_bound(logit_terms(c, T) + double(L) * extra_block + cap_terms, max_logit);
    t.attention = f32_accumulation_bound(k_pattern, std::max(1.0, max_score) / 2.0);
    t.scores = f32_accumulation_bound(k_pattern, max_score);
    t.hidden = f32_accumulation_bound(
        embedding_terms(c) + double(L) * (block_terms(c, T) + extra_block) + double(c.d_model),
        max_abs(zoo_tensor(input_dir / "hidden_states.npy")));
    return t;
}

// check_zoo_input's comparisons with reference_tolerances.
void check_reference_input(const model::Model& m, const fs::path& dir) {
    SCOPED_TRACE(dir.string());
    const model::ModelConfig& c = m.config();
    const std::vector<int32_t> ids = zoo_ids(dir);
    std::vector<int64_t> wide(ids.begin(), ids.end());
    model::ModelInput input;
    input.ids = at::tensor(wide, at::TensorOptions().dtype(at::kLong)).view({1, -1});
    const model::ForwardResult r = m.forward(input, model::CaptureSpec::all());
    const ZooTolerances tol = reference_tolerances(c, dir);
    const at::Tensor logits = zoo_tensor(dir / "logits.npy");
    expect_close("logits", r.logits.reshape(logits.sizes()), logits, tol.logits);
    std::vector<at::Tensor> pattern, scores, hidden;
    for (int64_t l = 0; l < c.n_layers; ++l) {
        pattern.push_back(r.captured.at(model::hook_name(model::HookPoint::Pattern, l))[0]);
        scores.push_back(r.captured.at(model::hook_name(model::HookPoint::AttnScores, l))[0]);
        hidden.push_back(r.captured.at(model::hook_name(model::HookPoint::ResidPre, l))[0]);
    }
    hidden.push_back(r.captured.at(model::hook_name(model::HookPoint::FinalNorm))[0]);
    // Masked entries (causal and window) are -inf on both sides: a wrong window fails here.
    expect_close("attentions", at::stack(pattern), zoo_tensor(dir / "attentions.npy"),
                 tol.attention);
    expect_close("attn_scores", at::stack(scores), zoo_tensor(dir / "attn_scores.npy"), tol.scores);
    expect_close("hidden_states", at::stack(hidden), zoo_tensor(dir / "hidden_states.npy"),
                 tol.hidden);
}

void check_all_inputs(const model::Model& m, const fs::path& model_dir) {
    const auto inputs = zoo_inputs(model_dir);
    ASSERT_FALSE(inputs.empty());
    for (const auto& in : inputs) check_reference_input(m, in);
}

}  // namespace

// Gemma-2 from an HF directory: soft-capped scores (|raw score| exceeds the cap somewhere: the
// script asserts it), final logit soft-cap, sandwich norms, (1 + w) norms, sqrt(d_model)
// embedding scale, explicit head_dim (16 != 32 / 4), GQA, tied embeddings, window 5 on the even
// layers of a 12-token input.
TEST(Gemma2Reference, HfDirectoryMatchesTransformersSemantics) {
    ScratchDir tmp;
    SINKSCOPE_REFERENCE("gemma2", tmp.path());
    const model::Model m = model::load_model(tmp / "model");
    const model::ModelConfig& c = m.config();
    EXPECT_EQ(c.architecture, "gemma2");
    EXPECT_EQ(c.d_head, 16);
    EXPECT_EQ(c.window, 5);
    EXPECT_EQ(c.window_layers, (std::vector<int64_t>{0, 2}));
    EXPECT_EQ(c.attn_softcap, 5.0);
    EXPECT_EQ(c.final_softcap, 3.0);
    EXPECT_EQ(c.score_scale(), 0.25);  // query_pre_attn_scalar 16
    EXPECT_TRUE(c.tied_embeddings);
    check_all_inputs(m, tmp / "model");
}

// config.json layer_types decides the local layers (here 1 and 2, not the even ones), and
// query_pre_attn_scalar (20) differs from head_dim.
TEST(Gemma2Reference, LayerTypesAndQueryScalar) {
    ScratchDir tmp;
    SINKSCOPE_REFERENCE("gemma2_layer_types", tmp.path());
    const model::Model m = model::load_model(tmp / "model");
    EXPECT_EQ(m.config().window_layers, (std::vector<int64_t>{1, 2}));
    EXPECT_DOUBLE_EQ(m.config().score_scale(), 1.0 / std::sqrt(20.0));
    check_all_inputs(m, tmp / "model");
}

// The GGUF twin (llama.cpp gemma2 names, norms stored as 1 + w, gemma2.* soft-cap and window
// keys) computes the same function as the HF directory.
TEST(Gemma2Reference, GgufTwinMatches) {
    ScratchDir tmp;
    SINKSCOPE_REFERENCE("gemma2", tmp.path());
    const model::Model m = model::load_model(tmp / "model.gguf");
    const model::ModelConfig& c = m.config();
    EXPECT_EQ(c.architecture, "gemma2");
    EXPECT_EQ(c.window_layers, (std::vector<int64_t>{0, 2}));
    EXPECT_EQ(c.attn_softcap, 5.0);
    EXPECT_EQ(c.final_softcap, 3.0);
    check_all_inputs(m, tmp / "model");
}

// Phi-3 with longrope: "long" (12 tokens > original context 8) uses the long factors, "short"
// (6 tokens) the short ones; attention factor sqrt(1 + ln 4 / ln 8) (factor = 32 / 8); partial
// rotary 0.75 (6 of 8 dims); fused qkv_proj and gate_up_proj; window 10 on every layer.
TEST(Phi3Reference, HfDirectoryWithLongRope) {
    ScratchDir tmp;
    SINKSCOPE_REFERENCE("phi3", tmp.path());
    const model::Model m = model::load_model(tmp / "model");
    const model::ModelConfig& c = m.config();
    EXPECT_EQ(c.architecture, "phi3");
    EXPECT_EQ(c.rotary_dim, 6);
    EXPECT_EQ(c.window, 10);
    EXPECT_TRUE(c.window_layers.empty());
    EXPECT_EQ(c.rope_scaling.kind, model::RopeScalingKind::LongRope);
    EXPECT_EQ(c.rope_scaling.original_n_ctx, 8);
    EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 4.0);
    EXPECT_NEAR(c.rope_scaling.attention_factor, std::sqrt(1.0 + std::log(4.0) / std::log(8.0)),
                1e-15);
    check_all_inputs(m, tmp / "model");
}

// GGUF phi3: attn_qkv, fused ffn_up, rope_factors_short / _long tensors and phi3.rope.scaling.*
// keys give the same function.
TEST(Phi3Reference, GgufTwinMatches) {
    ScratchDir tmp;
    SINKSCOPE_REFERENCE("phi3", tmp.path());
    const model::Model m = model::load_model(tmp / "model.gguf");
    const model::ModelConfig& c = m.config();
    EXPECT_EQ(c.architecture, "phi3");
    EXPECT_EQ(c.rotary_dim, 6);
    EXPECT_EQ(c.rope_scaling.kind, model::RopeScalingKind::LongRope);
    EXPECT_EQ(c.rope_scaling.long_factor, (std::vector<float>{1.7f, 3.5f, 6.0f}));
    check_all_inputs(m, tmp / "model");
}
