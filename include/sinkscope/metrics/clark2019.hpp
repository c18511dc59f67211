// Head distances of the standard BERT head-clustering pipeline (Clark, Khandelwal, Levy &
// Manning 2019, "What does BERT look at?", their head_distances.py), for the compositional
// paper's "taxonomy instability" check (P1; docs/metrics.md "clark2019.csv"):
//   D(a, b) = sum over inputs and query rows of JS(p~_a, p~_b),  p~ = 0.001 / T + 0.999 p,
// JS in nats (not its square root) over all T key positions of the input, summed, not averaged.
// Positions a row cannot see hold 0 in both heads, so both smoothed values are 0.001 / T there
// and contribute 0: the sum runs over the visible keys only. "keep" is that pipeline as written;
// "drop" is the same on the content composition pi (the sink key removed, the rest renormalised
// to 1, smoothed over the T - 1 other positions), on the rows that see the sink and another key.
// Every query row 0 <= i < length enters (the pipeline has no --min-parts); the sink is the
// input's model-wide sink (spec 10.d).
#pragma once

#include <cstdint>

#include <Eigen/Core>

#include "sinkscope/core/serialize.hpp"
#include "sinkscope/metrics/attention.hpp"

namespace sinkscope::metrics {

inline constexpr double kClarkSmoothing = 0.001;

struct ClarkResults {
    int64_t n_layers = 0, n_heads = 0;
    Eigen::MatrixXd keep, drop;  // [n, n] symmetric, zero diagonal; head = layer * H + head
    int64_t rows_keep = 0, rows_drop = 0;
};

class ClarkAccumulator {
public:
    // `n_threads` splits the pair loops (0: all cores); the sums do not depend on it.
    ClarkAccumulator(int64_t n_layers, int64_t n_heads, int n_threads = 1);
    // One input; `sink` its model-wide sink position (outside [0, length): no drop rows).
    void add(const AttentionInput& input, int64_t sink);
    void merge(const ClarkAccumulator& other);  // same shape; its inputs after this one's
    ClarkResults finish() const;
    void save(BinaryWriter& w) const;
    void load(BinaryReader& r);

private:
    int64_t n_layers_, n_heads_;
    int n_threads_;
    Eigen::MatrixXd keep_, drop_;  // [n, n] sums over rows, lower triangle (a > b)
    int64_t rows_keep_ = 0, rows_drop_ = 0;
};

}  // namespace sinkscope::metrics
