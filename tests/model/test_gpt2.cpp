// GPT-2 family on random weights: attention invariants, head ablation, the block recomputed from
// the stored Conv1D weights ([in, out]), config.json reading and refusals.
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

ModelConfig tiny_gpt2() {
    ModelConfig c;
    c.architecture = "gpt2";
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 4;
    c.d_model = 16;
    c.d_head = 4;
    c.d_mlp = 24;
    c.d_vocab = 40;
    c.n_ctx = 12;
    c.act = Activation::GeluTanh;
    c.tied_embeddings = true;
    c.qkv_bias = true;
    c.norm = NormKind::LayerNorm;
    c.positions = PositionKind::Learned;
    return c;
}

const std::vector<int32_t> kIds{1, 5, 9, 2, 33, 17, 4, 8};

}  // namespace

// Finite logits, rows summing to 1 over j <= i, masked entries exactly 0, scores = log p + c.
TEST(Gpt2, AttentionInvariants) {
    const ModelConfig c = tiny_gpt2();
    const MemoryWeightStore s = testutil::random_weights(c, 11);
    testutil::expect_attention_invariants(build_model(c, source_of(s)), kIds);
}

// Zero-ablating all heads of layer 1 equals zeroing its c_proj weight (bias kept).
TEST(Gpt2, ZeroAblatingLayerRemovesAttention) {
    const ModelConfig c = tiny_gpt2();
    const MemoryWeightStore s = testutil::random_weights(c, 3);
    testutil::expect_zero_ablation_removes_layer(c, s, "transformer.h.1.attn.c_proj.weight",
                                                 "transformer.h.1.attn.c_proj.bias", 1, kIds);
}

// Layer 0 recomputed in f64 from the stored Conv1D weights (y = x W + b, c_attn columns
// [q | k | v]) and the HF block definition: embed = wte[ids] + wpe[pos], q/k/v, no RoPE
// (rot_q = q), resid_mid = x + attn, resid_post = mid + c_proj(gelu_new(c_fc(ln_2(mid)))).
TEST(Gpt2, BlockMatchesConv1dDefinition) {
    const ModelConfig c = tiny_gpt2();
    const MemoryWeightStore s = testutil::random_weights(c, 5);
    const Model m = build_model(c, source_of(s));
    const ForwardResult r = m.forward(kIds, CaptureSpec::all());
    const int64_t T = static_cast<int64_t>(kIds.size()), D = c.d_model;
    auto W = [&](const std::string& n) { return stored(s, "transformer." + n).to(at::kDouble); };
    auto hook = [&](const std::string& n) { return r.captured.at(n)[0].to(at::kDouble); };
    std::vector<int64_t> wide(kIds.begin(), kIds.end());
    // Conv1D weights are [in, out]: magnitudes |x| |W| + |b| (forward_bound.hpp, f32_step_tol).
    auto abs_conv1d = [](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
        return testutil::abs_linear(x, w.t(), b);
    };
    const at::Tensor embed = W("wte.weight").index_select(0, at::tensor(wide)) +
                             W("wpe.weight").narrow(0, 0, T);  // [pos, d_model]
    // one float32 addition
    testutil::expect_close("hook_embed", hook("hook_embed"), embed,
                           testutil::f32_step_tol(1, embed));
    const at::Tensor x = hook("blocks.0.hook_resid_pre");
    const at::Tensor h = at::layer_norm(x, {D}, W("h.0.ln_1.weight"), W("h.0.ln_1.bias"), 1e-5);
    const at::Tensor qkv = at::matmul(h, W("h.0.attn.c_attn.weight")) + W("h.0.attn.c_attn.bias");
    // LayerNorm, then D terms and the bias
    const double qkv_tol = testutil::f32_step_tol(
        testutil::layer_norm_terms(D) + D + 1,
        abs_conv1d(h, W("h.0.attn.c_attn.weight"), W("h.0.attn.c_attn.bias")));
    const char* parts[] = {"q", "k", "v"};
    for (int64_t p = 0; p < 3; ++p)
        testutil::expect_close(std::string("hook_") + parts[p],
                               hook(std::string("blocks.0.attn.hook_") + parts[p]),
                               qkv.narrow(1, p * D, D).reshape({T, 4, 4}), qkv_tol);
    EXPECT_TRUE(at::equal(hook("blocks.0.attn.hook_rot_q"), hook("blocks.0.attn.hook_q")));
    const at::Tensor z = hook("blocks.0.attn.hook_z").reshape({T, D});
    const at::Tensor mid =
        x + at::matmul(z, W("h.0.attn.c_proj.weight")) + W("h.0.attn.c_proj.bias");
    // D terms of z W, the bias and the residual
    testutil::expect_close(
        "resid_mid", hook("blocks.0.hook_resid_mid"), mid,
        testutil::f32_step_tol(D + 2, x.abs() + abs_conv1d(z, W("h.0.attn.c_proj.weight"),
                                                           W("h.0.attn.c_proj.bias"))));
    // the MLP step starts from the model's own resid_mid, so only its own rounding is measured
    const at::Tensor mid32 = hook("blocks.0.hook_resid_mid");
    const at::Tensor h2 =
        at::layer_norm(mid32, {D}, W("h.0.ln_2.weight"), W("h.0.ln_2.bias"), 1e-5);
    const at::Tensor a = at::matmul(h2, W("h.0.mlp.c_fc.weight")) + W("h.0.mlp.c_fc.bias");
    const at::Tensor gelu_new =
        0.5 * a * (1 + at::tanh(std::sqrt(2.0 / M_PI) * (a + 0.044715 * a.pow(3))));
    const at::Tensor post =
        mid32 + at::matmul(gelu_new, W("h.0.mlp.c_proj.weight")) + W("h.0.mlp.c_proj.bias");
    // LayerNorm, c_fc (D terms), GELU, c_proj (d_mlp terms), bias and residual; c_fc's error
    // reaches the output through the GELU slope and |c_proj|
    const at::Tensor a_mag = abs_conv1d(h2, W("h.0.mlp.c_fc.weight"), W("h.0.mlp.c_fc.bias"));
    const at::Tensor post_mag =
        mid32.abs() + abs_conv1d(testutil::kGeluMaxSlope * a_mag, W("h.0.mlp.c_proj.weight"),
                                 W("h.0.mlp.c_proj.bias"));
    testutil::expect_close(
        "resid_post", hook("blocks.0.hook_resid_post"), post,
        testutil::f32_step_tol(
            testutil::layer_norm_terms(D) + D + testutil::kGeluTerms + c.d_mlp + 2, post_mag));
    // logits = ln_f(x) wte^T (tied): D terms
    const at::Tensor ln_f = hook("ln_final.hook_normalized");
    const at::Tensor logits = at::matmul(ln_f, W("wte.weight").t());
    testutil::expect_close("logits", r.logits[0], logits,
                           testutil::f32_step_tol(D, testutil::abs_linear(ln_f, W("wte.weight"))));
}

// The exact parameter count: every stored tensor once (the tied lm_head is not stored).
TEST(Gpt2, ParameterCountIsExact) {
    const ModelConfig c = tiny_gpt2();
    const MemoryWeightStore s = testutil::random_weights(c, 1);
    int64_t n = 0;
    for (const auto& [name, e] : s.tensors) n += static_cast<int64_t>(e.values.size());
    EXPECT_EQ(build_model(c, source_of(s)).n_params(), n);
}

// More tokens than learned positions is a usage error, not an out-of-range read.
TEST(Gpt2, InputLongerThanPositionsIsRefused) {
    const ModelConfig c = tiny_gpt2();
    const MemoryWeightStore s = testutil::random_weights(c, 1);
    const Model m = build_model(c, source_of(s));
    EXPECT_THROW(m.forward(std::vector<int32_t>(13, 1)), UsageError);
    EXPECT_NO_THROW(m.forward(std::vector<int32_t>(12, 1)));
}

// config.json: n_inner null -> 4 n_embd, gelu_new, tied; attention variants not implemented
// are refused with UnsupportedError naming the key.
TEST(Gpt2, ConfigJson) {
    nlohmann::json j = {{"model_type", "gpt2"}, {"n_embd", 32},
                        {"n_layer", 2},         {"n_head", 4},
                        {"n_inner", nullptr},   {"n_positions", 128},
                        {"vocab_size", 100},    {"activation_function", "gelu_new"}};
    const ModelConfig c = config_from_hf_json(j, "config.json");
    EXPECT_EQ(c.architecture, "gpt2");
    EXPECT_EQ(c.d_mlp, 128);
    EXPECT_EQ(c.d_head, 8);
    EXPECT_EQ(c.n_ctx, 128);
    EXPECT_EQ(c.act, Activation::GeluTanh);
    EXPECT_TRUE(c.tied_embeddings);
    EXPECT_EQ(c.positions, PositionKind::Learned);
    for (const char* key : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"}) {
        nlohmann::json bad = j;
        bad[key] = true;
        try {
            config_from_hf_json(bad, "config.json");
            FAIL() << key;
        } catch (const UnsupportedError& e) {
            EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
        }
    }
}

// A checkpoint saved from the base model (openai-community/gpt2: "wte.weight", "h.0.ln_1.weight"
// without "transformer.") loads like the GPT2LMHeadModel layout and gives the same logits.
TEST(Gpt2, BaseModelNamesWithoutPrefixLoad) {
    const ModelConfig c = tiny_gpt2();
    const MemoryWeightStore s = testutil::random_weights(c, 9);
    MemoryWeightStore bare;
    const std::string prefix = "transformer.";
    for (const auto& [name, e] : s.tensors) {
        ASSERT_EQ(name.rfind(prefix, 0), 0u) << name;
        bare.tensors[name.substr(prefix.size())] = e;
    }
    const ForwardResult a = build_model(c, source_of(s)).forward(kIds);
    const ForwardResult b = build_model(c, source_of(bare)).forward(kIds);
    EXPECT_TRUE(at::equal(a.logits, b.logits));
}
