// Redundancy-based head pruning (spec/METRICS.md section 5): which heads to remove, given a
// head-by-head distance matrix from the calibration set (metrics/head.hpp, model scope).
//
// Redundancy of a surviving head h is its distance to the nearest other surviving head,
// min_{h' != h} D(h, h'). The most redundant head (smallest redundancy: another head already
// does nearly what it does) is removed first, then redundancy is recomputed among the survivors
// (greedy). Ties go to the lower head index, which is the (layer, head) order of HeadResults
// (index = layer * n_heads + head). The order for a larger sparsity extends the order for a
// smaller one, so one greedy pass serves every sparsity.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Core>

namespace sinkscope::metrics {

// The channels of spec 5 (and their drop twins): the name `prune --channels` takes and the head
// distance matrix (metrics/head.hpp) whose redundancy it prunes by. `prune` evaluates them,
// `compare` judges one classical channel against dA_perp (spec 7).
struct PruneChannel {
    const char* name;
    const char* matrix;
};
inline constexpr std::array<PruneChannel, 8> kPruneChannels = {
    {{"js", "js_keep"},
     {"dA_perp", "dA_perp"},
     {"dA", "dA"},
     {"cosine", "cosine_keep"},
     {"euclidean", "euclidean_keep"},
     {"js_drop", "js_drop"},
     {"cosine_drop", "cosine_drop"},
     {"euclidean_drop", "euclidean_drop"}}};
// The channel named `name`, or null.
const PruneChannel* find_prune_channel(const std::string& name);
// The channel names, comma-separated, in kPruneChannels' order, leaving out `except` (for
// messages listing the choices).
std::string prune_channel_names(const std::string& except = "");

struct PruneStep {
    int64_t head = 0;         // index into the matrix (layer * n_heads + head)
    double redundancy = 0.0;  // its distance to the nearest surviving head when it was removed
};

// The first `n_remove` heads of the greedy order under `distance` ([n, n]). Only the lower
// triangle is read (D(i, j) for i > j), so a matrix that is symmetric up to rounding gives one
// order. A NaN entry (the two heads never shared a usable row) is not a neighbour; a head
// without any finite neighbour among the survivors has redundancy +inf, so it is removed only
// after every head that has one.
// Throws UsageError when n_remove is not in [0, n].
std::vector<PruneStep> greedy_prune_order(const Eigen::MatrixXd& distance, int64_t n_remove);

// Number of heads a sparsity removes: round(sparsity * n_heads), halves rounded up. Throws
// UsageError naming the value when sparsity is not in (0, 1) or when the count is 0 or n_heads
// (a sparsity that prunes nothing or everything).
int64_t heads_to_prune(double sparsity, int64_t n_heads);

// The random baseline: k distinct heads of n drawn uniformly with `seed` (core/random.hpp, the
// same on every platform), in increasing order.
std::vector<int64_t> random_prune(int64_t n_heads, int64_t k, uint64_t seed);

}  // namespace sinkscope::metrics
