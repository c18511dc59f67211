// Float32 error bounds of a transformer forward pass, for the model tests' tolerances: how many
// rounded terms are accumulated along the path from the embeddings to a hook or the logits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>
#include "sinkscope/model/config.hpp"
#include "sinkscope/model/model.hpp"
#include "tensor_tolerance.hpp"

#include "tolerance.hpp"

namespace sinkscope::testutil {

// Terms accumulated by one block on T tokens, in the order the data flows: norm statistics
// (d_model), the Q/K/V projections (d_model), scores (d_head), the softmax normalizer (T), pattern
// x V (T), the output projection (n_heads * d_head), the second norm (d_model) and the MLP
// (d_model, then d_mlp). First-order error analysis: the rounding errors of consecutive
// accumulations add (a residual connection passes the earlier error on with gain 1), so the
// bound of the path is gamma of the summed length.
inline double block_terms(const model::ModelConfig& c, int64_t T) {
    return 4.0 * double(c.d_model) + double(c.d_head) + 2.0 * double(T) +
           double(c.n_heads * c.d_head) + double(c.d_mlp);
}

// Terms before the first block: the ViT patch embedding (a convolution over n_channels *
// patch_size^2 inputs); the BERT/RoBERTa embedding LayerNorm; token embeddings are looked up,
// not accumulated.
inline double embedding_terms(const model::ModelConfig& c) {
    if (c.is_vision()) return double(c.n_channels * c.patch_size * c.patch_size);
    return c.causal ? 0.0 : 2.0 * double(c.d_model) + 8.0;
}

// Terms of the text encoders' masked-LM head between the last block and the decoder: a dense
// layer (d_model), GELU (~10 operations) and a LayerNorm (2 d_model + 8).
inline double lm_head_terms(const model::ModelConfig& c) {
    return c.causal || c.is_vision() ? 0.0 : 3.0 * double(c.d_model) + 18.0;
}

// Terms up to and including the attention pattern of layer `layer` (0-based).
inline double pattern_terms(const model::ModelConfig& c, int64_t T, int64_t layer) {
    return embedding_terms(c) + double(layer) * block_terms(c, T) + 2.0 * double(c.d_model) +
           double(c.d_head) + double(T);
}

// Terms up to the logits: every block, the final norm and the unembedding (d_model).
inline double logit_terms(const model::ModelConfig& c, int64_t T) {
    return embedding_terms(c) + double(c.n_layers) * block_terms(c, T) + lm_head_terms(c) +
           2.0 * double(c.d_model);
}

// `sides` = how many of the two compared forwards are float32: 2 for two float32 forwards of the
// same model in different summation orders (another GEMM kernel or shape, a padded batch, a
// float32 golden), 1 against a float64 reference (its own error is 2^29 times smaller).
// `math_terms` = the elementwise math functions (rsqrt, exp, tanh / erf, cos / sin) of one block
// as rounded operations, which the counts above leave out: a function within r ulps of the exact
// value is 2r of them (one ulp is at most 2u relative). Counted once per block on the path, the
// final norm and head as one block more; 0 (not counted) unless a test says why (golden_cuda.cpp).

// Logits: sides * gamma_K(2^-24) * max|logit|, K = logit_terms.
inline double logit_tol(const model::ModelConfig& c, int64_t T, double max_abs_logit, int sides = 2,
                        double math_terms = 0) {
    const double k = logit_terms(c, T) + math_terms * double(c.n_layers + 1);
    return sides * f32_accumulation_bound(k, max_abs_logit);
}

// Attention patterns. A score error dz moves p_j by p_j (dz_j - sum_k p_k dz_k), at most
// max|dz| / 2 in absolute value; the scores are within sides * gamma_K max|score| (K = the terms up
// to the last layer's pattern). `max_abs_score` is max|score| over every layer (masked -inf
// excluded); the bound never goes below the float32 rounding of p <= 1 itself.
inline double attention_tol(const model::ModelConfig& c, int64_t T, double max_abs_score,
                            int sides = 2, double math_terms = 0) {
    const double k = pattern_terms(c, T, c.n_layers - 1) + math_terms * double(c.n_layers);
    return sides * f32_accumulation_bound(k, std::max(1.0, max_abs_score) / 2.0);
}

// Hidden states (the residual stream after `n_blocks` blocks, then a norm): sides * gamma_K *
// max|hidden|.
inline double hidden_tol(const model::ModelConfig& c, int64_t T, int64_t n_blocks,
                         double max_abs_hidden, int sides = 2, double math_terms = 0) {
    const double k = embedding_terms(c) + double(n_blocks) * block_terms(c, T) + double(c.d_model) +
                     math_terms * double(n_blocks + 1);
    return sides * f32_accumulation_bound(k, max_abs_hidden);
}

// Single steps recomputed in float64 from float32 hooks (a block's definition test): the float32
// step is within gamma_K * m of exact, where m is the same computation on absolute values (the
// sum of |terms| each output entry accumulates, Higham 3.1) and K the terms accumulated.

// |x| |w|^T + |b|: the magnitude of at::linear(x, w, b) (w [out, in]); b may be undefined.
inline at::Tensor abs_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {}) {
    at::Tensor m = at::matmul(x.abs(), w.abs().t());
    return b.defined() ? m + b.abs() : m;
}
// Magnitude of layer_norm(x) over the last dim: (|x| + |mean|) / sigma * |w| + |b|, so that the
// rounding of x - mean (relative to |x| + |mean|, not to the centred value) is counted.
inline at::Tensor layer_norm_magnitude(const at::Tensor& x_any, const at::Tensor& w,
                                       const at::Tensor& b, double eps) {
    const at::Tensor x = x_any.to(at::kDouble);
    const at::Tensor mean = x.mean(-1, true);
    const at::Tensor inv = at::rsqrt(x.var(-1, false, true) + eps);
    return (x.abs() + mean.abs()) * inv * w.to(at::kDouble).abs() + b.to(at::kDouble).abs();
}
// A LayerNorm over d entries: the mean and the variance accumulate d terms each, then about 8
// elementwise operations (subtract, square, eps, rsqrt, scale, weight, bias).
inline double layer_norm_terms(int64_t d) {
    return 2.0 * double(d) + 8.0;
}
// The tanh and erf GELUs: about 10 rounded operations, and a slope of at most 1.13, so an input
// error passes on at most 1.13 times.
inline constexpr double kGeluTerms = 10.0;
inline constexpr double kGeluMaxSlope = 1.13;
// gamma_K(2^-24) * max(magnitude): the bound of one float32 side against float64.
inline double f32_step_tol(double k, const at::Tensor& magnitude) {
    return f32_accumulation_bound(k, max_abs(magnitude));
}

// max|score| over every layer's hook_attn_scores in `r` (masked -inf entries excluded).
inline double max_abs_scores(const model::ForwardResult& r, const model::ModelConfig& c) {
    double m = 0;
    for (int64_t l = 0; l < c.n_layers; ++l)
        m = std::max(m, max_abs(r.captured.at(model::hook_name(model::HookPoint::AttnScores, l))));
    return m;
}

// "layer l head h query i", for failure messages.
inline std::string row_name(int64_t l, int64_t h, int64_t i) {
    return "layer " + std::to_string(l) + " head " + std::to_string(h) + " query " +
           std::to_string(i);
}

// A float32 softmax row (pattern p, pre-softmax scores z, converted to double) on its visible
// keys [begin, end): sum_j p_j = 1 within the entry bound f32_softmax_rel_bound (each p_j is
// within it relatively), and z_j - log p_j is one constant (the row's log-normalizer) within
// twice that bound (it is compared with the same quantity of key `begin`).
inline void expect_softmax_row(const double* p, const double* z, int64_t begin, int64_t end,
                               const std::string& where) {
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t j = begin; j < end; ++j) {
        lo = std::min(lo, z[j]);
        hi = std::max(hi, z[j]);
    }
    const double rel = f32_softmax_rel_bound(double(end - begin), hi - lo);
    const double offset = z[begin] - std::log(p[begin]);
    double sum = 0, worst = 0;
    for (int64_t j = begin; j < end; ++j) {
        sum += p[j];
        worst = std::max(worst, std::abs(z[j] - std::log(p[j]) - offset));
    }
    EXPECT_WITHIN(sum, 1.0, rel) << where;
    EXPECT_ERROR_WITHIN(worst, 2 * rel) << where << ": max |z_j - log p_j - offset|";
}

}  // namespace sinkscope::testutil
