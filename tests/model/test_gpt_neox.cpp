// GPT-NeoX family on random weights: attention invariants, head ablation, the per-head fused
// q/k/v layout, partial rotary and both residual forms recomputed from the stored weights,
// config.json reading.
#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "decoder_invariants.hpp"
#include "forward_bound.hpp"
#include "random_weights.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
using testutil::MemoryWeightStore;
using testutil::source_of;
using testutil::stored;

namespace {

ModelConfig tiny_neox(bool parallel) {
    ModelConfig c;
    c.architecture = "gpt_neox";
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 4;
    c.d_model = 32;
    c.d_head = 8;
    c.d_mlp = 24;
    c.d_vocab = 40;
    c.n_ctx = 64;
    c.rotary_dim = 4;
    c.rope_theta = 10000.0;
    c.act = Activation::Gelu;
    c.qkv_bias = true;
    c.norm = NormKind::LayerNorm;
    c.parallel_residual = parallel;
    return c;
}

const std::vector<int32_t> kIds{1, 5, 9, 2, 33, 17, 4, 8};

// MLP of layer 0 in f64 from the stored weights: 4h_to_h(gelu_erf(h_to_4h(ln2(x)))); with
// `magnitude`, the same on absolute values with h_to_4h's error passed on through the GELU slope
// (forward_bound.hpp, f32_step_tol).
at::Tensor mlp0(const MemoryWeightStore& s, const at::Tensor& x, bool magnitude = false) {
    auto W = [&](const std::string& n) {
        return stored(s, "gpt_neox.layers.0." + n).to(at::kDouble);
    };
    const at::Tensor h = at::layer_norm(x, {x.size(-1)}, W("post_attention_layernorm.weight"),
                                        W("post_attention_layernorm.bias"), 1e-5);
    if (magnitude)
        return testutil::abs_linear(
            testutil::kGeluMaxSlope *
                testutil::abs_linear(h, W("mlp.dense_h_to_4h.weight"), W("mlp.dense_h_to_4h.bias")),
            W("mlp.dense_4h_to_h.weight"), W("mlp.dense_4h_to_h.bias"));
    const at::Tensor a = at::linear(h, W("mlp.dense_h_to_4h.weight"), W("mlp.dense_h_to_4h.bias"));
    const at::Tensor g = 0.5 * a * (1 + at::erf(a / std::sqrt(2.0)));
    return at::linear(g, W("mlp.dense_4h_to_h.weight"), W("mlp.dense_4h_to_h.bias"));
}

}  // namespace

// Finite logits, rows summing to 1 over j <= i, masked entries exactly 0, scores = log p + c.
TEST(GptNeox, AttentionInvariants) {
    for (bool parallel : {true, false}) {
        const ModelConfig c = tiny_neox(parallel);
        const MemoryWeightStore s = testutil::random_weights(c, 11);
        testutil::expect_attention_invariants(build_model(c, source_of(s)), kIds);
    }
}

// Zero-ablating all heads of layer 1 equals zeroing its attention.dense weight (bias kept).
TEST(GptNeox, ZeroAblatingLayerRemovesAttention) {
    const ModelConfig c = tiny_neox(true);
    const MemoryWeightStore s = testutil::random_weights(c, 3);
    testutil::expect_zero_ablation_removes_layer(c, s, "gpt_neox.layers.1.attention.dense.weight",
                                                 "gpt_neox.layers.1.attention.dense.bias", 1, kIds);
}

// query_key_value rows are per head [q_h; k_h; v_h] (row h*3*d_head + p*d_head + i); RoPE
// rotates only the first rotary_dim dims of each head with rotate_half (dim i pairs with
// i + rotary_dim/2, angle t * theta^(-2i/rotary_dim)); the other dims pass through.
TEST(GptNeox, FusedQkvLayoutAndPartialRotary) {
    const ModelConfig c = tiny_neox(true);
    const MemoryWeightStore s = testutil::random_weights(c, 5);
    const Model m = build_model(c, source_of(s));
    const ForwardResult r = m.forward(kIds, CaptureSpec::all());
    const int64_t T = static_cast<int64_t>(kIds.size()), D = c.d_model, dh = c.d_head;
    auto hook = [&](const std::string& n) { return r.captured.at(n)[0].to(at::kDouble); };
    const auto pre = "gpt_neox.layers.0.";
    const at::Tensor h =
        at::layer_norm(hook("blocks.0.hook_resid_pre"), {D},
                       stored(s, std::string(pre) + "input_layernorm.weight").to(at::kDouble),
                       stored(s, std::string(pre) + "input_layernorm.bias").to(at::kDouble), 1e-5);
    const at::Tensor w = stored(s, std::string(pre) + "attention.query_key_value.weight");
    const at::Tensor b = stored(s, std::string(pre) + "attention.query_key_value.bias");
    const char* parts[] = {"q", "k", "v"};
    for (int64_t p = 0; p < 3; ++p) {
        const at::Tensor got = hook(std::string("blocks.0.attn.hook_") + parts[p]);  // [T, H, dh]
        for (int64_t head = 0; head < c.n_heads; ++head) {
            const int64_t row = head * 3 * dh + p * dh;
            const at::Tensor wr = w.narrow(0, row, dh).to(at::kDouble),
                             br = b.narrow(0, row, dh).to(at::kDouble);
            // LayerNorm, then D terms and the bias
            testutil::expect_close(
                std::string("hook_") + parts[p] + " head " + std::to_string(head),
                got.select(1, head), at::linear(h, wr, br),
                testutil::f32_step_tol(testutil::layer_norm_terms(D) + D + 1,
                                       testutil::abs_linear(h, wr, br)));
        }
    }
    const at::Tensor q = hook("blocks.0.attn.hook_q"), rq = hook("blocks.0.attn.hook_rot_q");
    const int64_t rot = c.rotary_dim, half = rot / 2;
    EXPECT_TRUE(at::equal(rq.narrow(2, rot, dh - rot), q.narrow(2, rot, dh - rot)));
    double worst = 0;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t head = 0; head < c.n_heads; ++head)
            for (int64_t i = 0; i < half; ++i) {
                const double ang = t * std::pow(c.rope_theta, -2.0 * i / rot);
                const double a = q[t][head][i].item<double>(),
                             bb = q[t][head][i + half].item<double>();
                worst = std::max(worst, std::abs(rq[t][head][i].item<double>() -
                                                 (a * std::cos(ang) - bb * std::sin(ang))));
                worst = std::max(worst, std::abs(rq[t][head][i + half].item<double>() -
                                                 (bb * std::cos(ang) + a * std::sin(ang))));
            }
    // The angle t * theta^(-2i/rot) in float32 (relative 2u, so absolute <= 2u T), cos/sin (1 ulp),
    // two products and a sum: (2T + 6) u * (|a| + |b|), |a| + |b| <= 2 max|q|.
    EXPECT_ERROR_WITHIN(worst, testutil::f32_step_tol(2.0 * T + 6, 2 * q));
}

// Parallel residual: resid_post = resid_mid + mlp(ln2(resid_pre)) (resid_mid = x + attn);
// sequential (use_parallel_residual=false): resid_post = resid_mid + mlp(ln2(resid_mid)).
TEST(GptNeox, ParallelAndSequentialResidual) {
    for (bool parallel : {true, false}) {
        const ModelConfig c = tiny_neox(parallel);
        const MemoryWeightStore s = testutil::random_weights(c, 7);
        const ForwardResult r =
            build_model(c, source_of(s)).forward(kIds, CaptureSpec({"blocks.0.hook_resid_*"}));
        auto hook = [&](const std::string& n) { return r.captured.at(n)[0].to(at::kDouble); };
        const at::Tensor pre = hook("blocks.0.hook_resid_pre"),
                         mid = hook("blocks.0.hook_resid_mid");
        const at::Tensor want = mid + mlp0(s, parallel ? pre : mid);
        // LayerNorm, h_to_4h (D terms), GELU, 4h_to_h (d_mlp terms), bias and residual
        testutil::expect_close(
            parallel ? "resid_post (parallel)" : "resid_post (sequential)",
            hook("blocks.0.hook_resid_post"), want,
            testutil::f32_step_tol(testutil::layer_norm_terms(c.d_model) + c.d_model +
                                       testutil::kGeluTerms + c.d_mlp + 2,
                                   mid.abs() + mlp0(s, parallel ? pre : mid, true)));
    }
}

// The exact parameter count: every stored tensor once (embed_out untied).
TEST(GptNeox, ParameterCountIsExact) {
    const ModelConfig c = tiny_neox(true);
    const MemoryWeightStore s = testutil::random_weights(c, 1);
    int64_t n = 0;
    for (const auto& [name, e] : s.tensors) n += static_cast<int64_t>(e.values.size());
    EXPECT_EQ(build_model(c, source_of(s)).n_params(), n);
}

// config.json: rotary_pct -> rotary_dim = int(d_head * pct), rotary_emb_base, parallel residual
// by default, exact gelu, untied; rope_scaling read on the rotary dims, unknown types refused.
TEST(GptNeox, ConfigJson) {
    nlohmann::json j = {
        {"model_type", "gpt_neox"}, {"hidden_size", 64},        {"num_hidden_layers", 2},
        {"num_attention_heads", 4}, {"intermediate_size", 256}, {"vocab_size", 100},
        {"rotary_pct", 0.25},       {"rotary_emb_base", 500},   {"hidden_act", "gelu"}};
    const ModelConfig c = config_from_hf_json(j, "config.json");
    EXPECT_EQ(c.architecture, "gpt_neox");
    EXPECT_EQ(c.rotary_dim, 4);
    EXPECT_EQ(c.rope_theta, 500.0);
    EXPECT_TRUE(c.parallel_residual);
    EXPECT_FALSE(c.tied_embeddings);
    EXPECT_EQ(c.act, Activation::Gelu);
    j["use_parallel_residual"] = false;
    EXPECT_FALSE(config_from_hf_json(j, "config.json").parallel_residual);
    j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
    EXPECT_EQ(config_from_hf_json(j, "config.json").rope_scaling.kind, RopeScalingKind::Linear);
    j["rope_scaling"] = {{"type", "ntk-by-parts"}, {"factor", 2.0}};
    EXPECT_THROW(config_from_hf_json(j, "config.json"), UnsupportedError);
}
