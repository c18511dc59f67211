// Llama family on random weights: every registered architecture against an independent naive
// double-precision forward, attention invariants, hooks, head masks, GGUF/llama2.c Q/K layout.
#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

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

// Independent reference: loops in double over HF-layout weights (rotate_half RoPE, HF masks).
struct Reference {
    std::vector<std::vector<double>> logits;  // [pos][d_vocab]
    std::vector<double> pattern;              // [L, H, T, T], masked = 0
};

Reference naive_forward(const ModelConfig& c, const MemoryWeightStore& s,
                        const std::vector<int32_t>& ids) {
    const auto& arch = find_architecture(c.architecture);
    auto W = [&](TensorRole r, int64_t l = -1) -> const std::vector<float>& {
        return s.tensors.at(tensor_name(arch, WeightFormat::HuggingFace, r, l)).values;
    };
    const int64_t T = static_cast<int64_t>(ids.size()), D = c.d_model, H = c.n_heads,
                  Hkv = c.n_kv_heads, dh = c.d_head, F = c.d_mlp;
    using Mat = std::vector<std::vector<double>>;
    auto matvec = [](const std::vector<float>& w, const std::vector<double>& x, int64_t rows) {
        std::vector<double> y(static_cast<size_t>(rows), 0.0);
        const size_t cols = x.size();
        for (int64_t r = 0; r < rows; ++r)
            for (size_t k = 0; k < cols; ++k) y[r] += double(w[r * cols + k]) * x[k];
        return y;
    };
    auto rms = [&](const std::vector<double>& x, const std::vector<float>& w) {
        double ss = 0;
        for (double v : x) ss += v * v;
        const double inv = 1.0 / std::sqrt(ss / double(x.size()) + c.norm_eps);
        std::vector<double> y(x.size());
        for (size_t i = 0; i < x.size(); ++i)
            y[i] = x[i] * inv * (double(w[i]) + (c.norm_add_one ? 1.0 : 0.0));
        return y;
    };
    auto act = [&](double g) {
        if (c.act == Activation::Silu) return g / (1.0 + std::exp(-g));
        return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
    };
    auto rope = [&](std::vector<double>& v, int64_t n_head, int64_t t) {
        for (int64_t h = 0; h < n_head; ++h)
            for (int64_t i = 0; i < dh / 2; ++i) {
                const double ang =
                    double(t) * std::pow(c.rope_theta, -2.0 * double(i) / double(dh));
                double& a = v[h * dh + i];
                double& b = v[h * dh + i + dh / 2];
                const double a0 = a, b0 = b;
                a = a0 * std::cos(ang) - b0 * std::sin(ang);
                b = b0 * std::cos(ang) + a0 * std::sin(ang);
            }
    };
    Reference ref;
    ref.pattern.assign(static_cast<size_t>(c.n_layers * H * T * T), 0.0);
    Mat x(T, std::vector<double>(D));
    const auto& E = W(TensorRole::TokenEmbed);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < D; ++d)
            x[t][d] = E[ids[t] * D + d] * (c.embed_scale ? std::sqrt(double(D)) : 1.0);
    for (int64_t l = 0; l < c.n_layers; ++l) {
        Mat q(T), k(T), v(T);
        for (int64_t t = 0; t < T; ++t) {
            const auto h = rms(x[t], W(TensorRole::AttnNorm, l));
            q[t] = matvec(W(TensorRole::AttnQ, l), h, H * dh);
            k[t] = matvec(W(TensorRole::AttnK, l), h, Hkv * dh);
            v[t] = matvec(W(TensorRole::AttnV, l), h, Hkv * dh);
            if (c.qkv_bias) {
                for (int64_t i = 0; i < H * dh; ++i) q[t][i] += W(TensorRole::AttnQBias, l)[i];
                for (int64_t i = 0; i < Hkv * dh; ++i) k[t][i] += W(TensorRole::AttnKBias, l)[i];
                for (int64_t i = 0; i < Hkv * dh; ++i) v[t][i] += W(TensorRole::AttnVBias, l)[i];
            }
            rope(q[t], H, t);
            rope(k[t], Hkv, t);
        }
        Mat z(T, std::vector<double>(H * dh, 0.0));
        for (int64_t h = 0; h < H; ++h) {
            const int64_t g = h / (H / Hkv);
            for (int64_t t = 0; t < T; ++t) {
                const int64_t s0 = c.window > 0 ? std::max<int64_t>(0, t - c.window + 1) : 0;
                std::vector<double> sc;
                for (int64_t s2 = s0; s2 <= t; ++s2) {
                    double dot = 0;
                    for (int64_t i = 0; i < dh; ++i) dot += q[t][h * dh + i] * k[s2][g * dh + i];
                    sc.push_back(dot / std::sqrt(double(dh)));
                }
                const double mx = *std::max_element(sc.begin(), sc.end());
                double sum = 0;
                for (double& e : sc) sum += (e = std::exp(e - mx));
                for (int64_t s2 = s0; s2 <= t; ++s2) {
                    const double p = sc[s2 - s0] / sum;
                    ref.pattern[((l * H + h) * T + t) * T + s2] = p;
                    for (int64_t i = 0; i < dh; ++i) z[t][h * dh + i] += p * v[s2][g * dh + i];
                }
            }
        }
        for (int64_t t = 0; t < T; ++t) {
            const auto o = matvec(W(TensorRole::AttnO, l), z[t], D);
            for (int64_t d = 0; d < D; ++d) x[t][d] += o[d];
            const auto h2 = rms(x[t], W(TensorRole::FfnNorm, l));
            auto g = matvec(W(TensorRole::FfnGate, l), h2, F);
            const auto u = matvec(W(TensorRole::FfnUp, l), h2, F);
            for (int64_t i = 0; i < F; ++i) g[i] = act(g[i]) * u[i];
            const auto m = matvec(W(TensorRole::FfnDown, l), g, D);
            for (int64_t d = 0; d < D; ++d) x[t][d] += m[d];
        }
    }
    const auto& Wout = c.tied_embeddings ? E : W(TensorRole::Output);
    for (int64_t t = 0; t < T; ++t)
        ref.logits.push_back(matvec(Wout, rms(x[t], W(TensorRole::OutputNorm)), c.d_vocab));
    return ref;
}

WeightSource source_of(const MemoryWeightStore& s, WeightFormat f = WeightFormat::HuggingFace) {
    return WeightSource{&s, f, s.file};
}

const std::vector<int32_t> kIds{1, 5, 9, 2, 33, 17, 4, 8};

// Every registered architecture of the Llama family (other families have their own test files).
std::vector<std::string> arch_names() {
    std::vector<std::string> out;
    for (const auto& a : architectures())
        if (a.forward == ForwardFamily::Llama) out.push_back(a.name);
    return out;
}

class EveryArchitecture : public ::testing::TestWithParam<std::string> {};

}  // namespace

// Logits and attention of every Llama-family architecture equal an independent double-precision
// loop implementation of the HF definition (RoPE, GQA, bias, norms, activation, window).
TEST_P(EveryArchitecture, MatchesNaiveReference) {
    const ModelConfig c = testutil::tiny_config(GetParam());
    const MemoryWeightStore s = testutil::random_weights(c);
    const Model m = build_model(c, source_of(s));
    const ForwardResult r = m.forward(kIds, CaptureSpec::attention());
    const Reference ref = naive_forward(c, s, kIds);
    const int64_t T = static_cast<int64_t>(kIds.size());
    ASSERT_EQ(r.logits.sizes(), at::IntArrayRef({1, T, c.d_vocab}));
    double worst = 0;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t v = 0; v < c.d_vocab; ++v)
            worst = std::max(worst, std::abs(r.logits[0][t][v].item<double>() - ref.logits[t][v]));
    // float32 forward vs float64 reference: one float32 side (forward_bound.hpp)
    EXPECT_ERROR_WITHIN(worst, testutil::logit_tol(c, T, testutil::max_abs(r.logits), 1))
        << "max |logit diff|";
    const auto in = to_attention_input(r, c, kIds);
    double worst_p = 0;
    for (size_t i = 0; i < in.pattern.size(); ++i)
        worst_p = std::max(worst_p, std::abs(in.pattern[i] - ref.pattern[i]));
    EXPECT_ERROR_WITHIN(worst_p, testutil::attention_tol(c, T, testutil::max_abs_scores(r, c), 1))
        << "max |pattern diff|";
}

// Pattern rows sum to 1 over visible keys, masked entries are exactly 0, logits are finite, and
// hook_attn_scores equals log(pattern) up to a per-row constant on visible keys.
TEST_P(EveryArchitecture, AttentionInvariants) {
    const ModelConfig c = testutil::tiny_config(GetParam());
    const MemoryWeightStore s = testutil::random_weights(c, 11);
    const Model m = build_model(c, source_of(s));
    const ForwardResult r = m.forward(kIds, CaptureSpec::attention());
    EXPECT_TRUE(at::isfinite(r.logits).all().item<bool>());
    const auto in = to_attention_input(r, c, kIds);
    ASSERT_TRUE(in.has_scores());
    EXPECT_EQ(in.window, c.window);
    for (int64_t l = 0; l < c.n_layers; ++l)
        for (int64_t h = 0; h < c.n_heads; ++h)
            for (int64_t i = 0; i < in.n_tokens; ++i) {
                const double* p = in.row(l, h, i);
                const double* z = in.score_row(l, h, i);
                for (int64_t j = 0; j < in.n_tokens; ++j) {
                    const bool visible = j >= in.key_begin(i) && j < in.key_end(i);
                    if (!visible) {
                        EXPECT_EQ(p[j], 0.0) << l << "," << h << "," << i << "," << j;
                        EXPECT_TRUE(std::isinf(z[j]) && z[j] < 0);
                    }
                }
                testutil::expect_softmax_row(p, z, in.key_begin(i), in.key_end(i),
                                             testutil::row_name(l, h, i));
            }
}

// Zero-ablating every head of a layer equals removing that layer's attention contribution:
// exactly the same logits as the model with that layer's output projection set to 0, and
// resid_mid equals resid_pre exactly.
TEST_P(EveryArchitecture, ZeroAblatingLayerRemovesAttention) {
    const ModelConfig c = testutil::tiny_config(GetParam());
    const MemoryWeightStore s = testutil::random_weights(c, 3);
    MemoryWeightStore cut = s;
    const auto& arch = find_architecture(c.architecture);
    for (auto& v :
         cut.tensors.at(tensor_name(arch, WeightFormat::HuggingFace, TensorRole::AttnO, 1)).values)
        v = 0.0f;
    const Model m = build_model(c, source_of(s));
    const Model m_cut = build_model(c, source_of(cut));
    HeadMask mask(HeadMask::Kind::Zero, c.n_layers, c.n_heads);
    mask.ablate_layer(1);
    const ForwardResult r = m.forward(kIds, CaptureSpec({"blocks.1.hook_resid_*"}), &mask);
    const ForwardResult r_cut = m_cut.forward(kIds);
    const ForwardResult r_full = m.forward(kIds);
    EXPECT_TRUE(at::equal(r.captured.at(hook_name(HookPoint::ResidMid, 1)),
                          r.captured.at(hook_name(HookPoint::ResidPre, 1))));
    // Exact: the ablated z and the zero weight both make the projection exactly 0, and everything
    // after it is the same code on the same shapes and values.
    EXPECT_TRUE(at::equal(r.logits, r_cut.logits));
    // the ablation did something: far above the float32 noise of two forwards
    const int64_t T = static_cast<int64_t>(kIds.size());
    testutil::expect_differs("logits ablated vs full", r.logits, r_full.logits,
                             testutil::logit_tol(c, T, testutil::max_abs(r_full.logits)));
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryArchitecture, ::testing::ValuesIn(arch_names()));

// Only the hooks the capture spec selects are kept; GQA hooks keep n_kv_heads; shapes follow
// hooks.hpp.
TEST(LlamaHooks, CaptureKeepsOnlySelectedHooksWithTheirShapes) {
    const ModelConfig c = testutil::tiny_config("llama");
    const MemoryWeightStore s = testutil::random_weights(c);
    const Model m = build_model(c, source_of(s));
    const ForwardResult r = m.forward(kIds, CaptureSpec({"blocks.0.attn.hook_?", "hook_embed"}));
    std::vector<std::string> got;
    for (const auto& [k, v] : r.captured) got.push_back(k);
    EXPECT_EQ(got, (std::vector<std::string>{"blocks.0.attn.hook_k", "blocks.0.attn.hook_q",
                                             "blocks.0.attn.hook_v", "blocks.0.attn.hook_z",
                                             "hook_embed"}));
    const int64_t T = static_cast<int64_t>(kIds.size());
    EXPECT_EQ(r.captured.at("blocks.0.attn.hook_q").sizes(),
              at::IntArrayRef({1, T, c.n_heads, c.d_head}));
    EXPECT_EQ(r.captured.at("blocks.0.attn.hook_k").sizes(),
              at::IntArrayRef({1, T, c.n_kv_heads, c.d_head}));
    EXPECT_EQ(r.captured.at("hook_embed").sizes(), at::IntArrayRef({1, T, c.d_model}));
    const ForwardResult all = m.forward(kIds, CaptureSpec::all());
    EXPECT_EQ(all.captured.size(), list_hooks(c).size());
}

// Mean ablation writes the given mean into hook_z of exactly the ablated head.
TEST(LlamaHooks, MeanAblationReplacesZ) {
    const ModelConfig c = testutil::tiny_config("llama");
    const MemoryWeightStore s = testutil::random_weights(c);
    const Model m = build_model(c, source_of(s));
    HeadMask mask(HeadMask::Kind::Mean, c.n_layers, c.n_heads);
    mask.z_mean = compute_mean_z(m, {kIds, {3, 4, 5}});
    mask.ablate(0, 2);
    const auto spec = CaptureSpec({hook_glob(HookPoint::Z)});
    const ForwardResult r = m.forward(kIds, spec, &mask);
    const ForwardResult plain = m.forward(kIds, spec);
    const at::Tensor z = r.captured.at(hook_name(HookPoint::Z, 0))[0];  // [pos, H, d_head]
    const at::Tensor z0 = plain.captured.at(hook_name(HookPoint::Z, 0))[0];
    for (int64_t t = 0; t < z.size(0); ++t) EXPECT_TRUE(at::equal(z[t][2], mask.z_mean[0][2]));
    EXPECT_TRUE(at::equal(z.select(1, 1), z0.select(1, 1)));
    // mean of z over the reference inputs, computed independently from plain forwards
    const at::Tensor zb =
        m.forward(std::vector<int32_t>{3, 4, 5}, spec).captured.at(hook_name(HookPoint::Z, 1))[0];
    const at::Tensor za = plain.captured.at(hook_name(HookPoint::Z, 1))[0];
    const double n = double(kIds.size() + 3);
    const at::Tensor mean = (za.sum(0) + zb.sum(0)) / n;
    // a float32 sum of n terms here, float64 (then stored as float32) there: gamma_(n+2) max|z|
    testutil::expect_close("z_mean", mask.z_mean[1], mean,
                           testutil::f32_accumulation_bound(
                               n + 2, std::max(testutil::max_abs(za), testutil::max_abs(zb))));
}

// GGUF (llama.cpp convert_hf_to_gguf permute) and llama2.c store Q/K rows interleaved; loading
// them gives the same hooks and logits as the HF layout.
TEST(LlamaLayout, InterleavedQkRowsGiveSameAttention) {
    const ModelConfig c = testutil::tiny_config("llama");
    const MemoryWeightStore hf = testutil::random_weights(c);
    const auto& arch = find_architecture("llama");
    for (WeightFormat f : {WeightFormat::Gguf, WeightFormat::Llama2c}) {
        MemoryWeightStore other;
        for (int r = 0; r < kNumTensorRoles; ++r)
            for (int64_t l = -1; l < c.n_layers; ++l) {
                const auto role = static_cast<TensorRole>(r);
                const std::string hn = tensor_name(arch, WeightFormat::HuggingFace, role, l);
                if (!hf.tensors.count(hn) || (l >= 0) != (hn.find(".0.") != std::string::npos ||
                                                          hn.find(".1.") != std::string::npos))
                    continue;
                auto e = hf.tensors.at(hn);
                if (role == TensorRole::AttnQ || role == TensorRole::AttnK) {
                    // llama.cpp permute: row h*dh + 2i + t <- HF row h*dh + t*dh/2 + i
                    const int64_t dh = c.d_head, D = c.d_model, n = e.shape[0] / dh;
                    auto src = e.values;
                    for (int64_t h = 0; h < n; ++h)
                        for (int64_t i = 0; i < dh / 2; ++i)
                            for (int64_t t = 0; t < 2; ++t)
                                std::copy_n(&src[(h * dh + t * dh / 2 + i) * D], D,
                                            &e.values[(h * dh + 2 * i + t) * D]);
                }
                other.tensors[tensor_name(arch, f, role, l)] = e;
            }
        const Model a = build_model(c, source_of(hf));
        const Model b = build_model(c, source_of(other, f));
        const ForwardResult ra = a.forward(kIds, CaptureSpec::all());
        const ForwardResult rb = b.forward(kIds, CaptureSpec::all());
        // Permuted weight rows: the same dot products, but a GEMM may sum an entry in another order
        // at another position of its tile, so two float32 evaluations; every hook lies on a path
        // no longer than the logits'.
        const int64_t T = static_cast<int64_t>(kIds.size());
        const std::string fmt = weight_format_name(f);
        testutil::expect_close(fmt + " logits", ra.logits, rb.logits,
                               testutil::logit_tol(c, T, testutil::max_abs(ra.logits)));
        for (const auto& [name, t] : ra.captured)
            testutil::expect_close(fmt + " " + name, t, rb.captured.at(name),
                                   testutil::f32_two_evaluations_bound(testutil::logit_terms(c, T),
                                                                       testutil::max_abs(t)));
    }
}

// A weight whose shape disagrees with the config is one error naming the file and the tensor.
TEST(LlamaErrors, ShapeMismatchNamesFileAndTensor) {
    const ModelConfig c = testutil::tiny_config("llama");
    MemoryWeightStore s = testutil::random_weights(c);
    const std::string name = "model.layers.1.self_attn.k_proj.weight";
    s.tensors.at(name).shape = {4, 16};
    s.tensors.at(name).values.resize(64);
    try {
        build_model(c, source_of(s));
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("memory.safetensors"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
        const std::string expected =
            "[" + std::to_string(c.n_kv_heads * c.d_head) + ", " + std::to_string(c.d_model) + "]";
        EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
}

// A missing tensor is an InputError naming it (not a crash), also for untied HF lm_head.
TEST(LlamaErrors, MissingTensorIsInputError) {
    ModelConfig c = testutil::tiny_config("llama");
    MemoryWeightStore s = testutil::random_weights(c);
    s.tensors.erase("lm_head.weight");
    EXPECT_THROW(build_model(c, source_of(s)), InputError);
}

// An integer tensor where a weight belongs is one InputError naming the file and the tensor.
TEST(LlamaErrors, IntegerDtypeWeightNamesTensor) {
    struct IntStore : MemoryWeightStore {
        io::TensorView get(const std::string& name) const override {
            io::TensorView v = MemoryWeightStore::get(name);
            if (name == "model.norm.weight") v.dtype = io::WeightDType::I32;
            return v;
        }
    };
    const ModelConfig c = testutil::tiny_config("llama");
    IntStore s;
    static_cast<MemoryWeightStore&>(s) = testutil::random_weights(c);
    try {
        build_model(c, source_of(s));
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("memory.safetensors: tensor model.norm.weight"),
                  std::string::npos)
            << e.what();
    }
}

// Token ids outside the vocabulary are refused before any indexing.
TEST(LlamaErrors, TokenOutOfVocabulary) {
    const ModelConfig c = testutil::tiny_config("llama");
    const MemoryWeightStore s = testutil::random_weights(c);
    const Model m = build_model(c, source_of(s));
    EXPECT_THROW(m.forward(std::vector<int32_t>{1, 40}), UsageError);
}

// bfloat16 compute stays close to float32 (the dtype option really changes the compute type).
TEST(LlamaDtype, Bfloat16CloseToFloat32) {
    const ModelConfig c = testutil::tiny_config("qwen2");
    const MemoryWeightStore s = testutil::random_weights(c);
    const Model m32 = build_model(c, source_of(s));
    const Model m16 =
        build_model(c, source_of(s), RuntimeOptions{DeviceKind::Cpu, ComputeDType::BFloat16});
    const auto spec = CaptureSpec({hook_glob(HookPoint::Pattern)});
    const ForwardResult a = m32.forward(kIds, spec);
    const ForwardResult b = m16.forward(kIds, spec);
    EXPECT_EQ(b.captured.at(hook_name(HookPoint::Pattern, 0)).scalar_type(), at::kBFloat16);
    EXPECT_EQ(b.logits.scalar_type(), at::kFloat);
    // bfloat16 rounds every stored activation to 8 bits (relative 2^-8, products accumulate in
    // float32): about 14 rounded stages per block plus embedding, final norm and logits, each
    // relative to the logits' magnitude.
    const double stages = 14.0 * double(c.n_layers) + 3.0;
    testutil::expect_close("bf16 vs f32 logits", b.logits, a.logits,
                           stages * testutil::kUBf16 * testutil::max_abs(a.logits));
    EXPECT_FALSE(at::equal(a.logits, b.logits));
}

// Greedy generation appends the argmax of the last position, step by step.
TEST(LlamaGenerate, GreedyIsArgmaxOfEachStep) {
    const ModelConfig c = testutil::tiny_config("llama");
    const MemoryWeightStore s = testutil::random_weights(c);
    const Model m = build_model(c, source_of(s));
    const auto out = generate_greedy(m, {1, 5}, 4);
    ASSERT_EQ(out.size(), 6u);
    for (size_t n = 2; n < out.size(); ++n) {
        const std::vector<int32_t> prefix(out.begin(), out.begin() + n);
        EXPECT_EQ(m.forward(prefix).logits[0][-1].argmax().item<int64_t>(), out[n]);
    }
}

// Perplexity is exp of the token-weighted mean NLL: a two-token sample's NLL is -log softmax.
TEST(LlamaPerplexity, TwoTokenSample) {
    const ModelConfig c = testutil::tiny_config("llama");
    const MemoryWeightStore s = testutil::random_weights(c);
    const Model m = build_model(c, source_of(s));
    const auto r = compute_perplexity(m, {{1, 7}, {2, 3, 4}});
    const Reference ref = naive_forward(c, s, {1, 7});
    double lse = 0;
    for (double v : ref.logits[0]) lse += std::exp(v);
    const double nll0 = std::log(lse) - ref.logits[0][7];
    // nll = logsumexp(logits) - logit: moves by at most 2 max|logit error| (float32 forward vs
    // the float64 reference), plus the float32 log-softmax over d_vocab terms.
    double max_logit = 0;
    for (double v : ref.logits[0]) max_logit = std::max(max_logit, std::abs(v));
    const double nll_tol =
        2 * testutil::logit_tol(c, 2, max_logit, 1) +
        testutil::f32_accumulation_bound(double(c.d_vocab) + 4, max_logit + std::log(c.d_vocab));
    EXPECT_WITHIN(r.sample_nll[0], nll0, nll_tol);
    EXPECT_EQ(r.n_tokens, 3);
    // the token-weighted mean (float64) carries a third of sample 0's error
    EXPECT_WITHIN(r.mean_nll, (nll0 + 2 * r.sample_nll[1]) / 3, nll_tol / 3 + testutil::kFewOps);
    // float64 exp: 1 ulp, plus the rounding of the mean it exponentiates
    EXPECT_REL_WITHIN(r.perplexity, std::exp(r.mean_nll), (r.mean_nll + 2) * testutil::kU64);
}
