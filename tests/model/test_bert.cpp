// BERT / RoBERTa family on random weights: an independent naive double-precision forward,
// bidirectional attention invariants, padding masks, head ablation, hooks, config and input errors.
#include <algorithm>
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

// A tiny encoder config of architecture `arch` ("bert" or "roberta"); RoBERTa's padding_idx is 1
// so its positions start at 2. hidden_act gelu_new, so that RoBERTa's exact-GELU head differs.
ModelConfig tiny_encoder(const std::string& arch) {
    ModelConfig c;
    c.architecture = arch;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 4;
    c.d_model = 16;
    c.d_head = 4;
    c.d_mlp = 24;
    c.d_vocab = 40;
    c.n_ctx = 20;
    c.norm_eps = 1e-5;
    c.act = Activation::GeluTanh;
    c.tied_embeddings = true;
    c.qkv_bias = true;
    c.causal = false;
    c.norm = NormKind::LayerNorm;
    c.positions = PositionKind::Learned;
    c.n_token_types = arch == "bert" ? 2 : 1;
    c.pos_offset = arch == "bert" ? 0 : 2;
    return c;
}

constexpr int64_t kRobertaPad = 1;

WeightSource source_of(const MemoryWeightStore& s) {
    return WeightSource{&s, WeightFormat::HuggingFace, s.file};
}

struct Reference {
    std::vector<std::vector<double>> logits;  // [pos][d_vocab]
    std::vector<double> pattern;              // [L, H, T, T]
};

// Independent reference: loops in double over the HF weights (modeling_bert.py / modeling_roberta
// .py): LayerNorm(word + type + position), post-LN blocks, MLM head with the tied decoder.
Reference naive_forward(const ModelConfig& c, const MemoryWeightStore& s,
                        const std::vector<int32_t>& ids, const std::vector<int32_t>& types) {
    const auto& arch = find_architecture(c.architecture);
    const bool roberta = c.pos_offset > 0;
    auto W = [&](TensorRole r, int64_t l = -1) -> const std::vector<float>& {
        return s.tensors.at(tensor_name(arch, WeightFormat::HuggingFace, r, l)).values;
    };
    const int64_t T = static_cast<int64_t>(ids.size()), D = c.d_model, H = c.n_heads, dh = c.d_head;
    using Vec = std::vector<double>;
    auto affine = [](const std::vector<float>& w, const std::vector<float>& b, const Vec& x) {
        Vec y(b.begin(), b.end());
        for (size_t r = 0; r < y.size(); ++r)
            for (size_t k = 0; k < x.size(); ++k) y[r] += double(w[r * x.size() + k]) * x[k];
        return y;
    };
    auto ln = [&](const Vec& x, TensorRole wr, TensorRole br, int64_t l) {
        double mean = 0, var = 0;
        for (double v : x) mean += v / double(x.size());
        for (double v : x) var += (v - mean) * (v - mean) / double(x.size());
        Vec y(x.size());
        for (size_t i = 0; i < x.size(); ++i)
            y[i] = (x[i] - mean) / std::sqrt(var + c.norm_eps) * W(wr, l)[i] + W(br, l)[i];
        return y;
    };
    auto act = [](double g, bool exact) {
        if (exact) return 0.5 * g * (1.0 + std::erf(g / std::sqrt(2.0)));
        return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
    };
    const bool body_exact = c.act == Activation::Gelu;
    std::vector<Vec> x(T, Vec(D));
    int64_t n_real = 0;
    for (int64_t t = 0; t < T; ++t) {
        // RoBERTa: padding_idx + 1 + number of non-pad tokens so far; BERT: t.
        const int64_t pos =
            roberta ? (ids[t] == kRobertaPad ? kRobertaPad : kRobertaPad + ++n_real) : t;
        for (int64_t d = 0; d < D; ++d)
            x[t][d] = double(W(TensorRole::TokenEmbed)[ids[t] * D + d]) +
                      W(TensorRole::TypeEmbed)[types[t] * D + d] +
                      W(TensorRole::PosEmbed)[pos * D + d];
        x[t] = ln(x[t], TensorRole::EmbedNorm, TensorRole::EmbedNormBias, -1);
    }
    Reference ref;
    ref.pattern.assign(static_cast<size_t>(c.n_layers * H * T * T), 0.0);
    for (int64_t l = 0; l < c.n_layers; ++l) {
        std::vector<Vec> q(T), k(T), v(T), z(T, Vec(H * dh, 0.0));
        for (int64_t t = 0; t < T; ++t) {
            q[t] = affine(W(TensorRole::AttnQ, l), W(TensorRole::AttnQBias, l), x[t]);
            k[t] = affine(W(TensorRole::AttnK, l), W(TensorRole::AttnKBias, l), x[t]);
            v[t] = affine(W(TensorRole::AttnV, l), W(TensorRole::AttnVBias, l), x[t]);
        }
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < T; ++i) {
                Vec sc(T);
                for (int64_t j = 0; j < T; ++j) {
                    double dot = 0;
                    for (int64_t e = 0; e < dh; ++e) dot += q[i][h * dh + e] * k[j][h * dh + e];
                    sc[j] = dot / std::sqrt(double(dh));
                }
                const double mx = *std::max_element(sc.begin(), sc.end());
                double sum = 0;
                for (double& e : sc) sum += (e = std::exp(e - mx));
                for (int64_t j = 0; j < T; ++j) {
                    const double p = sc[j] / sum;
                    ref.pattern[((l * H + h) * T + i) * T + j] = p;
                    for (int64_t e = 0; e < dh; ++e) z[i][h * dh + e] += p * v[j][h * dh + e];
                }
            }
        for (int64_t t = 0; t < T; ++t) {
            const Vec o = affine(W(TensorRole::AttnO, l), W(TensorRole::AttnOBias, l), z[t]);
            for (int64_t d = 0; d < D; ++d) x[t][d] += o[d];
            x[t] = ln(x[t], TensorRole::AttnNorm, TensorRole::AttnNormBias, l);
            Vec u = affine(W(TensorRole::FfnUp, l), W(TensorRole::FfnUpBias, l), x[t]);
            for (double& e : u) e = act(e, body_exact);
            const Vec m = affine(W(TensorRole::FfnDown, l), W(TensorRole::FfnDownBias, l), u);
            for (int64_t d = 0; d < D; ++d) x[t][d] += m[d];
            x[t] = ln(x[t], TensorRole::FfnNorm, TensorRole::FfnNormBias, l);
        }
    }
    for (int64_t t = 0; t < T; ++t) {
        Vec h = affine(W(TensorRole::HeadDense), W(TensorRole::HeadDenseBias), x[t]);
        for (double& e : h) e = act(e, roberta || body_exact);  // RobertaLMHead: exact gelu
        h = ln(h, TensorRole::HeadNorm, TensorRole::HeadNormBias, -1);
        ref.logits.push_back(affine(W(TensorRole::TokenEmbed), W(TensorRole::OutputBias), h));
    }
    return ref;
}

at::Tensor row_of(const std::vector<int32_t>& v) {
    std::vector<int64_t> wide(v.begin(), v.end());
    return at::tensor(wide, at::TensorOptions().dtype(at::kLong)).view({1, -1});
}

const std::vector<int32_t> kIds{5, 9, 2, 33, 17, 4, 8, 3};
const std::vector<int32_t> kTypes{0, 0, 0, 0, 1, 1, 1, 1};

class Encoders : public ::testing::TestWithParam<std::string> {};

}  // namespace

// Logits and attention of BERT (token types 0/1, positions 0..T-1) and RoBERTa (positions from
// padding_idx + 1, exact-GELU head) equal the independent double-precision loop implementation.
TEST_P(Encoders, MatchesNaiveReference) {
    const ModelConfig c = tiny_encoder(GetParam());
    const MemoryWeightStore s = testutil::random_weights(c);
    const Model m = build_model(c, source_of(s));
    const std::vector<int32_t> types = c.n_token_types > 1 ? kTypes : std::vector<int32_t>(8, 0);
    ModelInput in;
    in.ids = row_of(kIds);
    in.token_type_ids = row_of(types);
    const ForwardResult r = m.forward(in, CaptureSpec::attention());
    const Reference ref = naive_forward(c, s, kIds, types);
    const int64_t T = static_cast<int64_t>(kIds.size());
    ASSERT_EQ(r.logits.sizes(), at::IntArrayRef({1, T, c.d_vocab}));
    double worst = 0;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t v = 0; v < c.d_vocab; ++v)
            worst = std::max(worst, std::abs(r.logits[0][t][v].item<double>() - ref.logits[t][v]));
    // float32 forward vs float64 reference: one float32 side (forward_bound.hpp)
    EXPECT_ERROR_WITHIN(worst, testutil::logit_tol(c, T, testutil::max_abs(r.logits), 1))
        << "max |logit diff|";
    const auto att = to_attention_input(r, c, kIds);
    double worst_p = 0;
    for (size_t i = 0; i < att.pattern.size(); ++i)
        worst_p = std::max(worst_p, std::abs(att.pattern[i] - ref.pattern[i]));
    EXPECT_ERROR_WITHIN(worst_p, testutil::attention_tol(c, T, testutil::max_abs_scores(r, c), 1))
        << "max |pattern diff|";
}

// Bidirectional attention: every key is visible, rows sum to 1 over all keys, no entry is masked,
// hook_attn_scores = log(pattern) + a per-row constant, logits are finite, and the metrics see
// Masking::Bidirectional (spec section 0: the sink policy default then resolves to argmax).
TEST_P(Encoders, AttentionInvariants) {
    const ModelConfig c = tiny_encoder(GetParam());
    const MemoryWeightStore s = testutil::random_weights(c, 11);
    const Model m = build_model(c, source_of(s));
    const ForwardResult r = m.forward(kIds, CaptureSpec::attention());
    EXPECT_TRUE(at::isfinite(r.logits).all().item<bool>());
    const auto in = to_attention_input(r, c, kIds);
    ASSERT_TRUE(in.has_scores());
    EXPECT_EQ(in.masking, metrics::Masking::Bidirectional);
    for (int64_t l = 0; l < c.n_layers; ++l)
        for (int64_t h = 0; h < c.n_heads; ++h)
            for (int64_t i = 0; i < in.n_tokens; ++i) {
                EXPECT_EQ(in.key_begin(i), 0);
                EXPECT_EQ(in.key_end(i), in.n_tokens);
                const double* p = in.row(l, h, i);
                const double* z = in.score_row(l, h, i);
                for (int64_t j = 0; j < in.n_tokens; ++j) {
                    EXPECT_TRUE(std::isfinite(z[j])) << l << "," << h << "," << i << "," << j;
                    EXPECT_GT(p[j], 0.0);
                }
                testutil::expect_softmax_row(p, z, 0, in.n_tokens, testutil::row_name(l, h, i));
            }
}

// Zero-ablating every head of a layer removes exactly that layer's attention contribution W_O z:
// the logits equal those of the model whose attention.output.dense weight is 0 (its bias stays,
// as with HF head_mask = 0), and resid_mid = LayerNorm(resid_pre + b_O).
TEST_P(Encoders, ZeroAblatingLayerRemovesAttention) {
    const ModelConfig c = tiny_encoder(GetParam());
    const MemoryWeightStore s = testutil::random_weights(c, 3);
    const auto& arch = find_architecture(c.architecture);
    auto name = [&](TensorRole r) { return tensor_name(arch, WeightFormat::HuggingFace, r, 1); };
    MemoryWeightStore cut = s;
    for (auto& v : cut.tensors.at(name(TensorRole::AttnO)).values) v = 0.0f;
    const Model m = build_model(c, source_of(s));
    const Model m_cut = build_model(c, source_of(cut));
    HeadMask mask(HeadMask::Kind::Zero, c.n_layers, c.n_heads);
    mask.ablate_layer(1);
    const ForwardResult r = m.forward(kIds, CaptureSpec({"blocks.1.hook_resid_*"}), &mask);
    const ForwardResult r_cut = m_cut.forward(kIds);
    const ForwardResult r_full = m.forward(kIds);
    // Exact: the ablated z and the zero weight both make the projection exactly 0 + bias, and
    // everything after it is the same code on the same shapes and values.
    EXPECT_TRUE(at::equal(r.logits, r_cut.logits));
    // the ablation did something: far above the float32 noise of two forwards
    const int64_t T = static_cast<int64_t>(kIds.size());
    testutil::expect_differs("logits ablated vs full", r.logits, r_full.logits,
                             testutil::logit_tol(c, T, testutil::max_abs(r_full.logits)));
    auto vec = [&](TensorRole role) {
        const auto& v = s.tensors.at(name(role)).values;
        return at::tensor(std::vector<float>(v.begin(), v.end()));
    };
    const at::Tensor pre = r.captured.at(hook_name(HookPoint::ResidPre, 1));  // [1, pos, d_model]
    const at::Tensor expected =
        at::layer_norm(pre + vec(TensorRole::AttnOBias), {c.d_model}, vec(TensorRole::AttnNorm),
                       vec(TensorRole::AttnNormBias), c.norm_eps);
    // the bias add, then two float32 LayerNorms (the model's and this one)
    testutil::expect_close(
        "resid_mid", r.captured.at(hook_name(HookPoint::ResidMid, 1)), expected,
        2 * testutil::f32_step_tol(testutil::layer_norm_terms(c.d_model) + 1,
                                   testutil::layer_norm_magnitude(
                                       pre + vec(TensorRole::AttnOBias), vec(TensorRole::AttnNorm),
                                       vec(TensorRole::AttnNormBias), c.norm_eps)));
}

// A right-padded batch of two sequences of different lengths gives, for the real tokens, the same
// pattern, scores and logits as each sequence alone (up to float32 summation order); padded keys
// get pattern exactly 0 and scores -inf. The pad id is [PAD] = 0 for BERT and padding_idx = 1 for
// RoBERTa (its padded tokens then take position padding_idx, as HF
// create_position_ids_from_input_ids).
TEST_P(Encoders, PaddedBatchEqualsSingleSequences) {
    const ModelConfig c = tiny_encoder(GetParam());
    const MemoryWeightStore s = testutil::random_weights(c, 5);
    const Model m = build_model(c, source_of(s));
    const int32_t pad = c.pos_offset > 0 ? kRobertaPad : 0;
    const std::vector<int32_t> a = kIds, b{7, 12, 30, 6, 2};
    const int64_t T = static_cast<int64_t>(a.size()), Tb = static_cast<int64_t>(b.size());
    std::vector<int32_t> b_padded = b, mask_b(static_cast<size_t>(T), 0);
    b_padded.resize(static_cast<size_t>(T), pad);
    std::fill_n(mask_b.begin(), Tb, 1);
    ModelInput batch;
    batch.ids = at::cat({row_of(a), row_of(b_padded)});  // [2, T]
    batch.attention_mask = at::cat({at::ones({1, T}, at::kLong), row_of(mask_b)});
    const ForwardResult rb = m.forward(batch, CaptureSpec::attention());
    const ForwardResult ra1 = m.forward(a, CaptureSpec::attention());
    const ForwardResult rb1 = m.forward(b, CaptureSpec::attention());
    // The batch runs other GEMM shapes: two float32 evaluations of each sequence
    // (forward_bound.hpp).
    testutil::expect_close("logits a batched vs alone", rb.logits[0], ra1.logits[0],
                           testutil::logit_tol(c, T, testutil::max_abs(ra1.logits)));
    testutil::expect_close("logits b padded vs alone", rb.logits[1].narrow(0, 0, Tb), rb1.logits[0],
                           testutil::logit_tol(c, Tb, testutil::max_abs(rb1.logits)));
    const double att_tol_a = testutil::attention_tol(c, T, testutil::max_abs_scores(ra1, c));
    const double att_tol_b = testutil::attention_tol(c, Tb, testutil::max_abs_scores(rb1, c));
    for (int64_t l = 0; l < c.n_layers; ++l) {
        const at::Tensor p = rb.captured.at(hook_name(HookPoint::Pattern, l));  // [2, H, T, T]
        const at::Tensor z = rb.captured.at(hook_name(HookPoint::AttnScores, l));
        testutil::expect_close("pattern a batched vs alone, layer " + std::to_string(l), p[0],
                               ra1.captured.at(hook_name(HookPoint::Pattern, l))[0], att_tol_a);
        const at::Tensor real = p[1].narrow(1, 0, Tb).narrow(2, 0, Tb);  // [H, Tb, Tb]
        testutil::expect_close("pattern b padded vs alone, layer " + std::to_string(l), real,
                               rb1.captured.at(hook_name(HookPoint::Pattern, l))[0], att_tol_b);
        // every query row, padded queries included, puts exactly 0 on padded keys
        const at::Tensor padded_keys = p[1].narrow(2, Tb, T - Tb);
        EXPECT_TRUE(at::equal(padded_keys, at::zeros_like(padded_keys))) << "layer " << l;
        EXPECT_TRUE(z[1].narrow(2, Tb, T - Tb).isneginf().all().item<bool>());
        EXPECT_TRUE(at::isfinite(z[1].narrow(2, 0, Tb)).all().item<bool>());
    }
}

INSTANTIATE_TEST_SUITE_P(Registry, Encoders, ::testing::Values("bert", "roberta"));

// Encoders expose every hook of hooks.hpp except ln_final (post-LN: no final norm); hook_embed is
// the embedding sum before the embedding LayerNorm and blocks.0.hook_resid_pre is after it;
// hook_rot_q/k equal hook_q/k (no RoPE).
TEST(BertHooks, EveryHookWithEmbeddingLayerNormBetweenEmbedAndResidPre) {
    const ModelConfig c = tiny_encoder("bert");
    const MemoryWeightStore s = testutil::random_weights(c);
    const Model m = build_model(c, source_of(s));
    const ForwardResult r = m.forward(kIds, CaptureSpec::all());
    EXPECT_EQ(r.captured.size(), list_hooks(c).size());
    EXPECT_EQ(r.captured.count(hook_name(HookPoint::FinalNorm)), 0u);
    auto vec = [&](const char* n) {
        const auto& v = s.tensors.at(n).values;
        return at::tensor(std::vector<float>(v.begin(), v.end()));
    };
    const at::Tensor ln = at::layer_norm(r.captured.at("hook_embed"), {c.d_model},
                                         vec("bert.embeddings.LayerNorm.weight"),
                                         vec("bert.embeddings.LayerNorm.bias"), c.norm_eps);
    // two float32 LayerNorms (the model's and this one)
    testutil::expect_close(
        "resid_pre vs LayerNorm(embed)", ln, r.captured.at("blocks.0.hook_resid_pre"),
        2 * testutil::f32_step_tol(
                testutil::layer_norm_terms(c.d_model),
                testutil::layer_norm_magnitude(r.captured.at("hook_embed"),
                                               vec("bert.embeddings.LayerNorm.weight"),
                                               vec("bert.embeddings.LayerNorm.bias"), c.norm_eps)));
    testutil::expect_differs("hook_embed vs resid_pre", r.captured.at("hook_embed"),
                             r.captured.at("blocks.0.hook_resid_pre"),
                             testutil::f32_step_tol(testutil::layer_norm_terms(c.d_model), ln));
    EXPECT_TRUE(at::equal(r.captured.at("blocks.1.attn.hook_rot_q"),
                          r.captured.at("blocks.1.attn.hook_q")));
    EXPECT_TRUE(at::equal(r.captured.at("blocks.1.attn.hook_rot_k"),
                          r.captured.at("blocks.1.attn.hook_k")));
    EXPECT_EQ(r.captured.at("blocks.0.attn.hook_k").sizes(), at::IntArrayRef({1, 8, 4, 4}));
}

// Token type ids change the output (segment embedding is used) and default to 0 when undefined.
TEST(BertInput, TokenTypesDefaultToZeroAndMatter) {
    const ModelConfig c = tiny_encoder("bert");
    const MemoryWeightStore s = testutil::random_weights(c);
    const Model m = build_model(c, source_of(s));
    ModelInput zeros, ones;
    zeros.ids = ones.ids = row_of(kIds);
    zeros.token_type_ids = at::zeros({1, 8}, at::kLong);
    ones.token_type_ids = at::ones({1, 8}, at::kLong);
    // exact: undefined type ids are zeros, the same code on the same shapes and values
    EXPECT_TRUE(at::equal(m.forward(kIds).logits, m.forward(zeros).logits));
    // far above the float32 noise of two forwards
    const at::Tensor l1 = m.forward(ones).logits, l0 = m.forward(zeros).logits;
    testutil::expect_differs("logits of types 1 vs 0", l1, l0,
                             testutil::logit_tol(c, 8, testutil::max_abs(l0)));
}

// The parameter count is every stored tensor once (the tied decoder is not counted again).
TEST(BertParams, CountsEveryStoredTensorOnce) {
    for (const char* arch : {"bert", "roberta"}) {
        const ModelConfig c = tiny_encoder(arch);
        const MemoryWeightStore s = testutil::random_weights(c);
        int64_t stored = 0;
        for (const auto& [n, e] : s.tensors) stored += static_cast<int64_t>(e.values.size());
        EXPECT_EQ(build_model(c, source_of(s)).n_params(), stored) << arch;
    }
}

// Bad inputs are typed errors: a token type outside type_vocab_size and a sequence longer than
// the position table are usage errors; an all-padding row is refused (it would be NaN).
TEST(BertErrors, BadInputsAreUsageErrors) {
    const ModelConfig c = tiny_encoder("roberta");
    const MemoryWeightStore s = testutil::random_weights(c);
    const Model m = build_model(c, source_of(s));
    ModelInput in;
    in.ids = row_of(kIds);
    in.token_type_ids = at::ones({1, 8}, at::kLong);  // RoBERTa: type_vocab_size 1
    EXPECT_THROW(m.forward(in), UsageError);
    EXPECT_NO_THROW(m.forward(std::vector<int32_t>(20, 5)));  // n_ctx = 20 positions after offset
    EXPECT_THROW(m.forward(std::vector<int32_t>(21, 5)), UsageError);
    ModelInput empty_row;
    empty_row.ids = row_of(kIds);
    empty_row.attention_mask = at::zeros({1, 8}, at::kLong);
    EXPECT_THROW(m.forward(empty_row), UsageError);
}

// A missing tensor is an InputError naming it; the untied decoder is required only when untied.
TEST(BertErrors, MissingTensorNamesIt) {
    ModelConfig c = tiny_encoder("bert");
    MemoryWeightStore s = testutil::random_weights(c);
    s.tensors.erase("bert.encoder.layer.1.output.LayerNorm.bias");
    try {
        build_model(c, source_of(s));
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("bert.encoder.layer.1.output.LayerNorm.bias"),
                  std::string::npos)
            << e.what();
    }
    c.tied_embeddings = false;
    MemoryWeightStore untied = testutil::random_weights(c);
    ASSERT_EQ(untied.tensors.erase("cls.predictions.decoder.weight"), 1u);
    EXPECT_THROW(build_model(c, source_of(untied)), InputError);
}

// config.json: BERT positions start at 0, RoBERTa's at pad_token_id + 1 (n_ctx = the rest of the
// table); xlm-roberta is the roberta row; relative position embeddings are refused.
TEST(BertConfig, ReadsEncoderConfigJson) {
    nlohmann::json j = {{"model_type", "bert"},           {"hidden_size", 48},
                        {"num_hidden_layers", 2},         {"num_attention_heads", 4},
                        {"intermediate_size", 192},       {"vocab_size", 100},
                        {"max_position_embeddings", 512}, {"hidden_act", "gelu"},
                        {"type_vocab_size", 2},           {"pad_token_id", 0}};
    const ModelConfig b = config_from_hf_json(j, "config.json");
    EXPECT_EQ(b.architecture, "bert");
    EXPECT_FALSE(b.causal);
    EXPECT_EQ(b.d_head, 12);
    EXPECT_EQ(b.pos_offset, 0);
    EXPECT_EQ(b.n_ctx, 512);
    EXPECT_EQ(b.n_token_types, 2);
    EXPECT_EQ(b.norm_eps, 1e-12);
    EXPECT_EQ(b.act, Activation::Gelu);
    j["model_type"] = "xlm-roberta";
    j["max_position_embeddings"] = 514;
    j["pad_token_id"] = 1;
    const ModelConfig r = config_from_hf_json(j, "config.json");
    EXPECT_EQ(r.architecture, "roberta");
    EXPECT_EQ(r.pos_offset, 2);
    EXPECT_EQ(r.n_ctx, 512);
    j["position_embedding_type"] = "relative_key";
    EXPECT_THROW(config_from_hf_json(j, "config.json"), UnsupportedError);
}

// LayerNorm parameters stored under the legacy TF names gamma / beta (bert-base-uncased) load as
// weight / bias: same logits as the modern names.
TEST(BertLayout, LegacyLayerNormGammaBeta) {
    const ModelConfig c = tiny_encoder("bert");
    const MemoryWeightStore s = testutil::random_weights(c);
    MemoryWeightStore legacy;
    int n_renamed = 0;
    for (const auto& [n, e] : s.tensors) {
        std::string k = n;
        if (k.find("LayerNorm.weight") != std::string::npos)
            k.replace(k.rfind("weight"), 6, "gamma"), ++n_renamed;
        else if (k.find("LayerNorm.bias") != std::string::npos)
            k.replace(k.rfind("bias"), 4, "beta"), ++n_renamed;
        legacy.tensors[k] = e;
    }
    EXPECT_EQ(n_renamed, 2 * (2 + 2 * static_cast<int>(c.n_layers)));  // embed, head, 2 per layer
    const Model a = build_model(c, source_of(s));
    const Model b = build_model(c, source_of(legacy));
    EXPECT_TRUE(at::equal(a.forward(kIds).logits, b.forward(kIds).logits));
    EXPECT_EQ(a.n_params(), b.n_params());
}
