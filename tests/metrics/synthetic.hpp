// Seeded synthetic attention for the metrics tests: logits with a boosted sink key, softmax over
// the visible keys computed here (independently of the library).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "sinkscope/metrics/attention.hpp"

namespace sinkscope::testutil {

inline std::vector<double> softmax(const std::vector<double>& z) {
    double m = -INFINITY;
    for (double v : z) m = std::max(m, v);
    std::vector<double> p(z.size());
    double s = 0;
    for (size_t j = 0; j < z.size(); ++j) s += (p[j] = std::exp(z[j] - m));
    for (auto& v : p) v /= s;
    return p;
}

inline std::vector<double> random_logits(std::mt19937_64& rng, int64_t d, double scale = 1.0) {
    std::normal_distribution<double> g(0.0, scale);
    std::vector<double> z(static_cast<size_t>(d));
    for (auto& v : z) v = g(rng);
    return z;
}

// [L, H, T, T] scores (masked = -inf) and pattern = softmax over visible keys; key `sink` gets a
// head-dependent boost so heads differ in sink mass.
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
    x.pattern.assign(total, 0.0);
    x.scores.assign(total, -INFINITY);
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

}  // namespace sinkscope::testutil
