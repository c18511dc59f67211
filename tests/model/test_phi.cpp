// Phi family on random weights: attention invariants, head ablation, the shared-LayerNorm
// parallel block and the lm_head bias recomputed from the stored weights, config.json reading.
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

// GQA 4 query / 2 kv heads (PhiConfig has num_key_value_heads), 4 of 10 head dims rotated.
ModelConfig tiny_phi() {
    ModelConfig c;
    c.architecture = "phi";
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.d_model = 40;
    c.d_head = 10;
    c.d_mlp = 24;
    c.d_vocab = 40;
    c.n_ctx = 64;
    c.rotary_dim = 4;
    c.rope_theta = 10000.0;
    c.act = Activation::GeluTanh;
    c.qkv_bias = true;
    c.norm = NormKind::LayerNorm;
    c.parallel_residual = true;
    return c;
}

const std::vector<int32_t> kIds{1, 5, 9, 2, 33, 17, 4, 8};

}  // namespace

// Finite logits, rows summing to 1 over j <= i, masked entries exactly 0, scores = log p + c.
TEST(Phi, AttentionInvariants) {
    const ModelConfig c = tiny_phi();
    const MemoryWeightStore s = testutil::random_weights(c, 11);
    testutil::expect_attention_invariants(build_model(c, source_of(s)), kIds);
}

// Zero-ablating all heads of layer 1 equals zeroing its self_attn.dense weight (bias kept).
TEST(Phi, ZeroAblatingLayerRemovesAttention) {
    const ModelConfig c = tiny_phi();
    const MemoryWeightStore s = testutil::random_weights(c, 3);
    testutil::expect_zero_ablation_removes_layer(c, s, "model.layers.1.self_attn.dense.weight",
                                                 "model.layers.1.self_attn.dense.bias", 1, kIds);
}

// One LayerNorm feeds both branches: q = q_proj(ln(x)) and resid_post = resid_mid +
// fc2(gelu_new(fc1(ln(resid_pre)))); dims beyond rotary_dim are not rotated; GQA keeps
// n_kv_heads in hook_k; logits = final_layernorm(x) W^T + lm_head.bias.
TEST(Phi, SharedLayerNormBlockAndLmHeadBias) {
    const ModelConfig c = tiny_phi();
    const MemoryWeightStore s = testutil::random_weights(c, 5);
    const ForwardResult r = build_model(c, source_of(s)).forward(kIds, CaptureSpec::all());
    const int64_t T = static_cast<int64_t>(kIds.size()), D = c.d_model;
    auto W = [&](const std::string& n) { return stored(s, n).to(at::kDouble); };
    auto hook = [&](const std::string& n) { return r.captured.at(n)[0].to(at::kDouble); };
    const std::string L = "model.layers.0.";
    const at::Tensor ln =
        at::layer_norm(hook("blocks.0.hook_resid_pre"), {D}, W(L + "input_layernorm.weight"),
                       W(L + "input_layernorm.bias"), 1e-5);
    const at::Tensor q =
        at::linear(ln, W(L + "self_attn.q_proj.weight"), W(L + "self_attn.q_proj.bias"));
    // LayerNorm, then D terms and the bias (forward_bound.hpp, f32_step_tol)
    testutil::expect_close(
        "hook_q", hook("blocks.0.attn.hook_q"), q.view({T, 4, 10}),
        testutil::f32_step_tol(testutil::layer_norm_terms(D) + D + 1,
                               testutil::abs_linear(ln, W(L + "self_attn.q_proj.weight"),
                                                    W(L + "self_attn.q_proj.bias"))));
    EXPECT_EQ(hook("blocks.0.attn.hook_k").sizes(), at::IntArrayRef({T, 2, 10}));
    const at::Tensor rq = hook("blocks.0.attn.hook_rot_q"), q_hook = hook("blocks.0.attn.hook_q");
    EXPECT_TRUE(at::equal(rq.narrow(2, 4, 6), q_hook.narrow(2, 4, 6)));
    // rotated (t > 0): the change is far above the float32 rounding of a rotation
    testutil::expect_differs("rotary dims of rot_q vs q", rq.narrow(2, 0, 4),
                             q_hook.narrow(2, 0, 4), testutil::f32_step_tol(4, q_hook));
    const at::Tensor a = at::linear(ln, W(L + "mlp.fc1.weight"), W(L + "mlp.fc1.bias"));
    const at::Tensor g =
        0.5 * a * (1 + at::tanh(std::sqrt(2.0 / M_PI) * (a + 0.044715 * a.pow(3))));
    const at::Tensor post = hook("blocks.0.hook_resid_mid") +
                            at::linear(g, W(L + "mlp.fc2.weight"), W(L + "mlp.fc2.bias"));
    // LayerNorm, fc1 (D terms), GELU, fc2 (d_mlp terms), bias and residual; fc1's error reaches
    // the output through the GELU slope and |fc2|
    const at::Tensor a_mag =
        testutil::abs_linear(ln, W(L + "mlp.fc1.weight"), W(L + "mlp.fc1.bias"));
    const at::Tensor post_mag =
        hook("blocks.0.hook_resid_mid").abs() +
        testutil::abs_linear(testutil::kGeluMaxSlope * a_mag, W(L + "mlp.fc2.weight"),
                             W(L + "mlp.fc2.bias"));
    testutil::expect_close(
        "resid_post", hook("blocks.0.hook_resid_post"), post,
        testutil::f32_step_tol(
            testutil::layer_norm_terms(D) + D + testutil::kGeluTerms + c.d_mlp + 2, post_mag));
    // D terms and the bias
    const at::Tensor ln_f = hook("ln_final.hook_normalized");
    const at::Tensor logits = at::linear(ln_f, W("lm_head.weight"), W("lm_head.bias"));
    testutil::expect_close(
        "logits", r.logits[0], logits,
        testutil::f32_step_tol(D + 1,
                               testutil::abs_linear(ln_f, W("lm_head.weight"), W("lm_head.bias"))));
}

// The exact parameter count: every stored tensor once.
TEST(Phi, ParameterCountIsExact) {
    const ModelConfig c = tiny_phi();
    const MemoryWeightStore s = testutil::random_weights(c, 1);
    int64_t n = 0;
    for (const auto& [name, e] : s.tensors) n += static_cast<int64_t>(e.values.size());
    EXPECT_EQ(build_model(c, source_of(s)).n_params(), n);
}

// config.json: partial_rotary_factor -> rotary_dim = int(d_head * factor), gelu_new, untied;
// qk_layernorm=true is refused naming the key.
TEST(Phi, ConfigJson) {
    nlohmann::json j = {{"model_type", "phi"},          {"hidden_size", 80},
                        {"num_hidden_layers", 2},       {"num_attention_heads", 4},
                        {"intermediate_size", 320},     {"vocab_size", 100},
                        {"partial_rotary_factor", 0.4}, {"hidden_act", "gelu_new"}};
    const ModelConfig c = config_from_hf_json(j, "config.json");
    EXPECT_EQ(c.architecture, "phi");
    EXPECT_EQ(c.rotary_dim, 8);
    EXPECT_EQ(c.n_kv_heads, 4);
    EXPECT_EQ(c.act, Activation::GeluTanh);
    EXPECT_FALSE(c.tied_embeddings);
    j["qk_layernorm"] = true;
    try {
        config_from_hf_json(j, "config.json");
        FAIL() << "qk_layernorm accepted";
    } catch (const UnsupportedError& e) {
        EXPECT_NE(std::string(e.what()).find("qk_layernorm"), std::string::npos) << e.what();
    }
}
