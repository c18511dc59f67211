// Seeded synthetic attention for the tests and benchmarks (header-only, no gtest): softmax rows
// with a sink key, whole [L, H, T, T] attention inputs, and random head-distance matrices. The
// softmax is computed here, independently of the library under test.
//
// Streams are std::mt19937_64 with std::normal_distribution / std::uniform_real_distribution, as
// every generator these replace used: a given seed gives the same data as before on the same
// standard library (the distributions are not specified bit for bit across libraries, so tests
// derive their expectations from the data, never from recorded values).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <Eigen/Dense>

#include "sinkscope/metrics/attention.hpp"

namespace sinkscope::testutil {

// softmax(z) with the maximum subtracted first.
inline std::vector<double> softmax(const std::vector<double>& z) {
    double m = -INFINITY;
    for (double v : z) m = std::max(m, v);
    std::vector<double> p(z.size());
    double s = 0;
    for (size_t j = 0; j < z.size(); ++j) s += (p[j] = std::exp(z[j] - m));
    for (auto& v : p) v /= s;
    return p;
}

// d logits ~ N(0, scale^2).
inline std::vector<double> random_logits(std::mt19937_64& rng, int64_t d, double scale = 1.0) {
    std::normal_distribution<double> g(0.0, scale);
    std::vector<double> z(static_cast<size_t>(d));
    for (auto& v : z) v = g(rng);
    return z;
}

// Logit shape of one sink row: z_j = scale * N(0, 1) + sink_boost [j == 0] + diag_boost [j is
// the last key] (the query's own position in a causal row).
struct SinkRow {
    double scale = 1.0;
    double sink_boost = 2.0;
    double diag_boost = 0.0;
};

// Writes one row p_j = exp(z_j) / sum_k exp(z_k) over `n_keys` keys to row[0 .. n_keys), drawing
// the N(0, 1) variates from `normal()` in key order. No maximum is subtracted: with the few-unit
// logits used here exp cannot overflow, and the rounding is that of the generators this replaces.
template <typename Normal>
void sink_softmax_row(Normal&& normal, const SinkRow& shape, int64_t n_keys, double* row) {
    double sum = 0;
    for (int64_t j = 0; j < n_keys; ++j)
        sum += (row[j] = std::exp(shape.scale * normal() + (j == 0) * shape.sink_boost +
                                  (j == n_keys - 1) * shape.diag_boost));
    for (int64_t j = 0; j < n_keys; ++j) row[j] /= sum;
}

// Causal [L, H, T, T] attention (pattern only), every row i a sink_softmax_row over keys 0..i,
// rows in (layer, head, query) order from one stream seeded by `seed`.
inline metrics::AttentionInput causal_sink_attention(int64_t n_layers, int64_t n_heads,
                                                     int64_t n_tokens, const SinkRow& shape,
                                                     uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal;
    auto draw = [&] { return normal(rng); };
    metrics::AttentionInput in;
    in.n_layers = n_layers;
    in.n_heads = n_heads;
    in.n_tokens = in.length = n_tokens;
    in.masking = metrics::Masking::Causal;
    // [layer, head, query_pos, key_pos]; row q sums to 1 over key_pos <= q
    in.pattern.assign(static_cast<size_t>(n_layers * n_heads * n_tokens * n_tokens), 0.0);
    for (int64_t l = 0; l < n_layers; ++l)
        for (int64_t h = 0; h < n_heads; ++h)
            for (int64_t i = 0; i < n_tokens; ++i)
                sink_softmax_row(draw, shape, i + 1, in.pattern.data() + in.offset(l, h, i));
    return in;
}

// [L, H, T, T] scores (masked = -inf) and pattern = softmax over the visible keys of each row
// (causal, bidirectional or a causal window); key `sink` gets a head-dependent boost ~ U(0.5, 4)
// and each head a temperature ~ U(0.25, 2), so heads differ in sink mass. Scores are dropped
// unless `with_scores`.
inline metrics::AttentionInput random_input(uint64_t seed, int64_t n_layers, int64_t n_heads,
                                            int64_t n_tokens, metrics::Masking masking,
                                            bool with_scores, int64_t sink = 0,
                                            int64_t window = 0) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> g(0.0, 1.0);
    std::uniform_real_distribution<double> u(0.5, 4.0);
    metrics::AttentionInput x;
    x.n_layers = n_layers;
    x.n_heads = n_heads;
    x.n_tokens = n_tokens;
    x.length = n_tokens;
    x.masking = masking;
    x.window = window;
    const size_t total = size_t(n_layers * n_heads * n_tokens * n_tokens);
    x.pattern.assign(total, 0.0);       // [layer, head, query_pos, key_pos]
    x.scores.assign(total, -INFINITY);  // same; -inf where masked
    for (int64_t l = 0; l < n_layers; ++l)
        for (int64_t h = 0; h < n_heads; ++h) {
            const double boost = u(rng), temp = u(rng) / 2;
            for (int64_t i = 0; i < n_tokens; ++i) {
                const int64_t kb = x.key_begin(i), ke = x.key_end(i);
                std::vector<double> z;
                for (int64_t j = kb; j < ke; ++j)
                    z.push_back(g(rng) * temp + (j == sink ? boost : 0));
                std::vector<double> p = softmax(z);
                for (int64_t j = kb; j < ke; ++j) {
                    x.scores[x.offset(l, h, i) + j] = z[j - kb];
                    x.pattern[x.offset(l, h, i) + j] = p[j - kb];
                }
            }
        }
    if (!with_scores) x.scores.clear();
    return x;
}

// n x n symmetric matrix with zero diagonal and off-diagonal entries ~ U(lo, hi), drawn row by
// row over the upper triangle (i < j), like a head distance matrix [head, head].
inline Eigen::MatrixXd random_distance_matrix(int n, std::mt19937_64& rng, double lo, double hi) {
    std::uniform_real_distribution<double> u(lo, hi);
    Eigen::MatrixXd d = Eigen::MatrixXd::Zero(n, n);  // [head, head]
    for (int i = 0; i < n; ++i)
        for (int j = i + 1; j < n; ++j) d(i, j) = d(j, i) = u(rng);
    return d;
}

}  // namespace sinkscope::testutil
