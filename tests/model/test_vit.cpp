// ViT family on random weights: against an independent naive double-precision forward, the
// attention invariants of a bidirectional encoder, hooks, head masks, batching, config.json
// reading and input errors.
#include <cmath>
#include <random>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "forward_bound.hpp"
#include "random_weights.hpp"
#include "sinkscope/analysis/capture.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"
#include "tensor_tolerance.hpp"

using sinkscope::analysis::to_attention_input;
using namespace sinkscope;
using namespace sinkscope::model;
using testutil::MemoryWeightStore;

namespace {

// A tiny ViT: 8x8 RGB images, 4x4 patches -> 4 patches + CLS = 5 tokens, 2 layers, 4 heads.
ModelConfig tiny_vit() {
    ModelConfig c;
    c.architecture = "vit";
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 4;
    c.d_model = 16;
    c.d_head = 4;
    c.d_mlp = 24;
    c.image_size = 8;
    c.patch_size = 4;
    c.n_channels = 3;
    c.labels = {"a", "b", "c", "d", "e"};
    c.d_vocab = 5;
    c.n_ctx = 5;
    c.norm_eps = 1e-12;
    c.act = Activation::Gelu;
    c.qkv_bias = true;
    c.causal = false;
    c.norm = NormKind::LayerNorm;
    c.positions = PositionKind::Learned;
    return c;
}

WeightSource source_of(const MemoryWeightStore& s) {
    return WeightSource{&s, WeightFormat::HuggingFace, s.file};
}

// Seeded pixel_values [batch, 3, 8, 8] in [-1, 1].
at::Tensor random_pixels(int64_t batch, uint64_t seed = 3) {
    at::manual_seed(seed);
    return at::rand({batch, 3, 8, 8}) * 2.0 - 1.0;
}

// Independent reference: loops in double over the HF weights (patch dot products, LayerNorm,
// softmax, exact-erf GELU), for one image [3, 8, 8].
struct Reference {
    std::vector<double> logits;   // [n_labels]
    std::vector<double> pattern;  // [L, H, T, T]
};

Reference naive_forward(const ModelConfig& c, const MemoryWeightStore& s, const at::Tensor& img) {
    const auto& arch = find_architecture("vit");
    auto W = [&](TensorRole r, int64_t l = -1) -> const std::vector<float>& {
        return s.tensors.at(tensor_name(arch, WeightFormat::HuggingFace, r, l)).values;
    };
    const at::Tensor px = img.to(at::kDouble).contiguous();
    const double* p = px.data_ptr<double>();
    const int64_t D = c.d_model, P = c.patch_size, S = c.image_size / P, T = 1 + S * S,
                  H = c.n_heads, dh = c.d_head, F = c.d_mlp, C = c.n_channels, I = c.image_size;
    using Vec = std::vector<double>;
    auto linear = [](const std::vector<float>& w, const std::vector<float>& b, const Vec& x,
                     int64_t rows) {
        Vec y(static_cast<size_t>(rows));
        for (int64_t r = 0; r < rows; ++r) {
            double acc = b[r];
            for (size_t k = 0; k < x.size(); ++k) acc += double(w[r * x.size() + k]) * x[k];
            y[r] = acc;
        }
        return y;
    };
    auto ln = [&](const Vec& x, const std::vector<float>& w, const std::vector<float>& b) {
        double mean = 0, var = 0;
        for (double v : x) mean += v;
        mean /= double(x.size());
        for (double v : x) var += (v - mean) * (v - mean);
        var /= double(x.size());
        Vec y(x.size());
        for (size_t i = 0; i < x.size(); ++i)
            y[i] = (x[i] - mean) / std::sqrt(var + c.norm_eps) * w[i] + b[i];
        return y;
    };
    std::vector<Vec> x(static_cast<size_t>(T), Vec(static_cast<size_t>(D)));
    for (int64_t d = 0; d < D; ++d) x[0][d] = W(TensorRole::ClsToken)[d];
    for (int64_t py = 0; py < S; ++py)
        for (int64_t pxi = 0; pxi < S; ++pxi)
            for (int64_t d = 0; d < D; ++d) {
                double acc = W(TensorRole::PatchEmbedBias)[d];
                for (int64_t ch = 0; ch < C; ++ch)
                    for (int64_t u = 0; u < P; ++u)
                        for (int64_t v = 0; v < P; ++v)
                            acc +=
                                double(W(TensorRole::PatchEmbed)[((d * C + ch) * P + u) * P + v]) *
                                p[(ch * I + py * P + u) * I + pxi * P + v];
                x[1 + py * S + pxi][d] = acc;
            }
    for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < D; ++d) x[t][d] += W(TensorRole::PosEmbed)[t * D + d];
    Reference ref;
    ref.pattern.assign(static_cast<size_t>(c.n_layers * H * T * T), 0.0);
    for (int64_t l = 0; l < c.n_layers; ++l) {
        std::vector<Vec> q(T), k(T), v(T);
        for (int64_t t = 0; t < T; ++t) {
            const Vec h = ln(x[t], W(TensorRole::AttnNorm, l), W(TensorRole::AttnNormBias, l));
            q[t] = linear(W(TensorRole::AttnQ, l), W(TensorRole::AttnQBias, l), h, D);
            k[t] = linear(W(TensorRole::AttnK, l), W(TensorRole::AttnKBias, l), h, D);
            v[t] = linear(W(TensorRole::AttnV, l), W(TensorRole::AttnVBias, l), h, D);
        }
        std::vector<Vec> z(T, Vec(static_cast<size_t>(D), 0.0));
        for (int64_t hh = 0; hh < H; ++hh)
            for (int64_t i = 0; i < T; ++i) {
                Vec sc(static_cast<size_t>(T));
                for (int64_t j = 0; j < T; ++j) {
                    double dot = 0;
                    for (int64_t e = 0; e < dh; ++e) dot += q[i][hh * dh + e] * k[j][hh * dh + e];
                    sc[j] = dot / std::sqrt(double(dh));
                }
                const double mx = *std::max_element(sc.begin(), sc.end());
                double sum = 0;
                for (double& e : sc) sum += (e = std::exp(e - mx));
                for (int64_t j = 0; j < T; ++j) {
                    const double pr = sc[j] / sum;
                    ref.pattern[((l * H + hh) * T + i) * T + j] = pr;
                    for (int64_t e = 0; e < dh; ++e) z[i][hh * dh + e] += pr * v[j][hh * dh + e];
                }
            }
        for (int64_t t = 0; t < T; ++t) {
            const Vec o = linear(W(TensorRole::AttnO, l), W(TensorRole::AttnOBias, l), z[t], D);
            for (int64_t d = 0; d < D; ++d) x[t][d] += o[d];
            const Vec h2 = ln(x[t], W(TensorRole::FfnNorm, l), W(TensorRole::FfnNormBias, l));
            Vec u = linear(W(TensorRole::FfnUp, l), W(TensorRole::FfnUpBias, l), h2, F);
            for (double& g : u) g = 0.5 * g * (1.0 + std::erf(g / std::sqrt(2.0)));
            const Vec m = linear(W(TensorRole::FfnDown, l), W(TensorRole::FfnDownBias, l), u, D);
            for (int64_t d = 0; d < D; ++d) x[t][d] += m[d];
        }
    }
    const Vec cls = ln(x[0], W(TensorRole::OutputNorm), W(TensorRole::OutputNormBias));
    ref.logits = linear(W(TensorRole::Output), W(TensorRole::OutputBias), cls, c.d_vocab);
    return ref;
}

ModelInput pixels_input(const at::Tensor& px) {
    ModelInput in;
    in.pixel_values = px;
    return in;
}

}  // namespace

// Logits [1, n_labels] and every layer's attention equal an independent double-precision loop
// implementation of HF's ViTForImageClassification.
TEST(Vit, MatchesNaiveReference) {
    const ModelConfig c = tiny_vit();
    const MemoryWeightStore s = testutil::random_weights(c, 5);
    const Model m = build_model(c, source_of(s));
    const at::Tensor px = random_pixels(1);
    const ForwardResult r = m.forward(pixels_input(px), CaptureSpec::attention());
    const Reference ref = naive_forward(c, s, px[0]);
    ASSERT_EQ(r.logits.sizes(), at::IntArrayRef({1, c.d_vocab}));
    const auto in = to_attention_input(r, c, {});
    ASSERT_EQ(in.n_tokens, 5);
    // float32 forward vs float64 reference: one float32 side (forward_bound.hpp)
    const double logit_tol = testutil::logit_tol(c, in.n_tokens, testutil::max_abs(r.logits), 1);
    for (int64_t k = 0; k < c.d_vocab; ++k)
        EXPECT_WITHIN(r.logits[0][k].item<double>(), ref.logits[size_t(k)], logit_tol) << k;
    double worst = 0;
    for (size_t i = 0; i < ref.pattern.size(); ++i)
        worst = std::max(worst, std::abs(in.pattern[i] - ref.pattern[i]));
    EXPECT_ERROR_WITHIN(worst,
                        testutil::attention_tol(c, in.n_tokens, testutil::max_abs_scores(r, c), 1))
        << "max |pattern diff|";
}

// Bidirectional attention: every key is visible (no -inf score, no zero forced), rows sum to 1,
// hook_attn_scores equals log(pattern) up to a per-row constant, and logits are finite.
TEST(Vit, AttentionInvariants) {
    const ModelConfig c = tiny_vit();
    const MemoryWeightStore s = testutil::random_weights(c, 11);
    const Model m = build_model(c, source_of(s));
    const ForwardResult r = m.forward(pixels_input(random_pixels(1, 9)), CaptureSpec::attention());
    EXPECT_TRUE(at::isfinite(r.logits).all().item<bool>());
    const auto in = to_attention_input(r, c, {});
    ASSERT_TRUE(in.has_scores());
    EXPECT_EQ(in.masking, metrics::Masking::Bidirectional);
    for (int64_t l = 0; l < c.n_layers; ++l)
        for (int64_t h = 0; h < c.n_heads; ++h)
            for (int64_t i = 0; i < in.n_tokens; ++i) {
                ASSERT_EQ(in.key_begin(i), 0);
                ASSERT_EQ(in.key_end(i), in.n_tokens);
                const double* p = in.row(l, h, i);
                const double* z = in.score_row(l, h, i);
                for (int64_t j = 0; j < in.n_tokens; ++j) EXPECT_TRUE(std::isfinite(z[j]));
                testutil::expect_softmax_row(p, z, 0, in.n_tokens, testutil::row_name(l, h, i));
            }
}

// Zero-ablating every head of a layer removes that layer's attention contribution: the same
// logits as the model with that layer's attention.output.dense weight set to 0 (its bias stays,
// as z = 0 still passes through the bias), and resid_mid = resid_pre + bias.
TEST(Vit, ZeroAblatingLayerRemovesAttention) {
    const ModelConfig c = tiny_vit();
    const MemoryWeightStore s = testutil::random_weights(c, 3);
    MemoryWeightStore cut = s;
    const auto& arch = find_architecture("vit");
    for (auto& v :
         cut.tensors.at(tensor_name(arch, WeightFormat::HuggingFace, TensorRole::AttnO, 1)).values)
        v = 0.0f;
    const Model m = build_model(c, source_of(s));
    const Model m_cut = build_model(c, source_of(cut));
    HeadMask mask(HeadMask::Kind::Zero, c.n_layers, c.n_heads);
    mask.ablate_layer(1);
    const ModelInput in = pixels_input(random_pixels(2));
    const ForwardResult r = m.forward(in, CaptureSpec({"blocks.1.hook_resid_*"}), &mask);
    const ForwardResult r_cut = m_cut.forward(in);
    const ForwardResult r_full = m.forward(in);
    const auto& bias =
        s.tensors.at(tensor_name(arch, WeightFormat::HuggingFace, TensorRole::AttnOBias, 1));
    const at::Tensor b = at::tensor(bias.values);
    const at::Tensor pre = r.captured.at(hook_name(HookPoint::ResidPre, 1));
    // one float32 addition on each side
    testutil::expect_close("resid_mid vs resid_pre + bias",
                           r.captured.at(hook_name(HookPoint::ResidMid, 1)), pre + b,
                           2 * testutil::f32_step_tol(1, pre.abs() + b.abs()));
    // Exact: the ablated z and the zero weight both make the projection exactly 0 + bias, and
    // everything after it is the same code on the same shapes and values.
    EXPECT_TRUE(at::equal(r.logits, r_cut.logits));
    // the ablation did something: far above the float32 noise of two forwards
    testutil::expect_differs("logits ablated vs full", r.logits, r_full.logits,
                             testutil::logit_tol(c, 5, testutil::max_abs(r_full.logits)));
}

// Every hook of list_hooks is captured with the shapes of hooks.hpp (T = 1 + patches), rot_q = q.
TEST(Vit, HooksAndShapes) {
    const ModelConfig c = tiny_vit();
    const MemoryWeightStore s = testutil::random_weights(c, 5);
    const Model m = build_model(c, source_of(s));
    const ForwardResult r = m.forward(pixels_input(random_pixels(1)), CaptureSpec::all());
    EXPECT_EQ(r.captured.size(), list_hooks(c).size());
    EXPECT_EQ(r.captured.at("hook_embed").sizes(), at::IntArrayRef({1, 5, 16}));
    EXPECT_EQ(r.captured.at("blocks.1.attn.hook_pattern").sizes(), at::IntArrayRef({1, 4, 5, 5}));
    EXPECT_EQ(r.captured.at("blocks.0.attn.hook_k").sizes(), at::IntArrayRef({1, 5, 4, 4}));
    EXPECT_EQ(r.captured.at("ln_final.hook_normalized").sizes(), at::IntArrayRef({1, 5, 16}));
    EXPECT_TRUE(at::equal(r.captured.at("blocks.0.attn.hook_rot_q"),
                          r.captured.at("blocks.0.attn.hook_q")));
    EXPECT_EQ(m.n_params(), static_cast<int64_t>([&] {
                  size_t n = 0;
                  for (const auto& [k, e] : s.tensors) n += e.values.size();
                  return n;
              }()));
}

// A batch of two images gives each image's own result (no cross-talk between batch rows).
TEST(Vit, BatchRowsAreIndependent) {
    const ModelConfig c = tiny_vit();
    const MemoryWeightStore s = testutil::random_weights(c, 5);
    const Model m = build_model(c, source_of(s));
    const at::Tensor px = random_pixels(2, 17);
    const ForwardResult both = m.forward(pixels_input(px));
    // a batch of 2 runs other GEMM shapes: two float32 evaluations (T = 5 tokens)
    for (int64_t b = 0; b < 2; ++b) {
        const at::Tensor alone = m.forward(pixels_input(px.narrow(0, b, 1))).logits[0];
        testutil::expect_close("image " + std::to_string(b) + " batched vs alone", both.logits[b],
                               alone, testutil::logit_tol(c, 5, testutil::max_abs(alone)));
    }
}

// Token ids, a wrong image size and a wrong channel count are refused with a UsageError.
TEST(Vit, InputErrors) {
    const ModelConfig c = tiny_vit();
    const MemoryWeightStore s = testutil::random_weights(c, 5);
    const Model m = build_model(c, source_of(s));
    EXPECT_THROW(m.forward(std::vector<int32_t>{1, 2}), UsageError);
    EXPECT_THROW(m.forward(pixels_input(at::zeros({1, 3, 16, 16}))), UsageError);
    EXPECT_THROW(m.forward(pixels_input(at::zeros({1, 1, 8, 8}))), UsageError);
}

// A weight whose shape disagrees with the config is one InputError naming the tensor.
TEST(Vit, ShapeMismatchNamesTensor) {
    const ModelConfig c = tiny_vit();
    MemoryWeightStore s = testutil::random_weights(c, 5);
    const std::string name = "vit.embeddings.position_embeddings";
    s.tensors.at(name).shape = {1, 4, 16};
    s.tensors.at(name).values.resize(64);
    try {
        build_model(c, source_of(s));
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
}

// config.json: id2label gives the labels (d_vocab = their number), T = 1 + (image/patch)^2,
// bidirectional, exact GELU; malformed id2label keys are an InputError naming the file.
TEST(VitConfig, ReadsHfConfig) {
    nlohmann::json j = {{"model_type", "vit"},
                        {"image_size", 32},
                        {"patch_size", 8},
                        {"num_channels", 3},
                        {"hidden_size", 64},
                        {"num_hidden_layers", 3},
                        {"num_attention_heads", 4},
                        {"intermediate_size", 128},
                        {"layer_norm_eps", 1e-12},
                        {"hidden_act", "gelu"},
                        {"id2label", {{"1", "dog"}, {"0", "cat"}}}};
    const ModelConfig c = config_from_hf_json(j, "config.json");
    EXPECT_EQ(c.architecture, "vit");
    EXPECT_EQ(c.labels, (std::vector<std::string>{"cat", "dog"}));
    EXPECT_EQ(c.d_vocab, 2);
    EXPECT_EQ(c.n_ctx, 17);
    EXPECT_EQ(c.d_head, 16);
    EXPECT_FALSE(c.causal);
    EXPECT_TRUE(c.is_vision());
    EXPECT_EQ(c.act, Activation::Gelu);
    j["id2label"] = {{"0", "cat"}, {"2", "dog"}};
    EXPECT_THROW(config_from_hf_json(j, "config.json"), InputError);
    j["id2label"] = {{"0", "cat"}};
    j["patch_size"] = 7;
    EXPECT_THROW(config_from_hf_json(j, "config.json"), InputError);
}
