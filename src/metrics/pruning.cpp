// Greedy redundancy pruning (spec/METRICS.md section 5). Each survivor keeps its nearest
// surviving neighbour; a removal only re-scans the heads whose neighbour it was, so the order of
// k removals from n heads costs O(n^2) to start plus O(n) per removal and re-scan, instead of
// O(k n^2) for recomputing every redundancy at every step.
#include "sinkscope/metrics/pruning.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/random.hpp"

namespace sinkscope::metrics {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// D(i, j) from the lower triangle; NaN (no common rows) reads as +inf: not a neighbour.
double pair_distance(const Eigen::MatrixXd& d, int64_t i, int64_t j) {
    const double v = i > j ? d(i, j) : d(j, i);
    return std::isnan(v) ? kInf : v;
}

}  // namespace

const PruneChannel* find_prune_channel(const std::string& name) {
    for (const PruneChannel& c : kPruneChannels)
        if (name == c.name) return &c;
    return nullptr;
}

std::string prune_channel_names(const std::string& except) {
    std::string out;
    for (const PruneChannel& c : kPruneChannels)
        if (c.name != except) out += (out.empty() ? "" : ", ") + std::string(c.name);
    return out;
}

std::vector<PruneStep> greedy_prune_order(const Eigen::MatrixXd& distance, int64_t n_remove) {
    const int64_t n = distance.rows();
    SS_CHECK(distance.cols() == n, "greedy_prune_order: distance matrix is ", n, " x ",
             distance.cols());
    if (n_remove < 0 || n_remove > n)
        throw UsageError("cannot prune " + std::to_string(n_remove) + " of " + std::to_string(n) +
                         " heads");
    std::vector<bool> alive(size_t(n), true);
    std::vector<double> nearest(size_t(n), kInf);   // redundancy of each survivor
    std::vector<int64_t> neighbour(size_t(n), -1);  // the survivor it is nearest to (-1: none)
    auto rescan = [&](int64_t h) {
        nearest[size_t(h)] = kInf;
        neighbour[size_t(h)] = -1;
        for (int64_t o = 0; o < n; ++o) {
            if (o == h || !alive[size_t(o)]) continue;
            const double v = pair_distance(distance, h, o);
            if (v < nearest[size_t(h)]) {
                nearest[size_t(h)] = v;
                neighbour[size_t(h)] = o;
            }
        }
    };
    for (int64_t h = 0; h < n; ++h) rescan(h);

    std::vector<PruneStep> order;
    order.reserve(size_t(n_remove));
    for (int64_t step = 0; step < n_remove; ++step) {
        // Smallest redundancy; strict < keeps the lowest index among equal values.
        int64_t pick = -1;
        for (int64_t h = 0; h < n; ++h)
            if (alive[size_t(h)] && (pick < 0 || nearest[size_t(h)] < nearest[size_t(pick)]))
                pick = h;
        order.push_back({pick, nearest[size_t(pick)]});
        alive[size_t(pick)] = false;
        for (int64_t h = 0; h < n; ++h)
            if (alive[size_t(h)] && neighbour[size_t(h)] == pick) rescan(h);
    }
    return order;
}

int64_t heads_to_prune(double sparsity, int64_t n_heads) {
    if (!(sparsity > 0.0 && sparsity < 1.0))
        throw UsageError("sparsity " + format_number(sparsity) +
                         " is not a fraction strictly between 0 and 1");
    const auto k = static_cast<int64_t>(std::floor(sparsity * double(n_heads) + 0.5));
    if (k < 1 || k >= n_heads)
        throw UsageError("sparsity " + format_number(sparsity) + " of " + std::to_string(n_heads) +
                         " heads prunes " + std::to_string(k) +
                         " heads; it must prune at least 1 and leave at least 1");
    return k;
}

std::vector<int64_t> random_prune(int64_t n_heads, int64_t k, uint64_t seed) {
    if (k < 0 || k > n_heads)
        throw UsageError("cannot prune " + std::to_string(k) + " of " + std::to_string(n_heads) +
                         " heads");
    std::vector<int64_t> out;
    for (size_t i : sample_indices(size_t(n_heads), size_t(k), seed)) out.push_back(int64_t(i));
    return out;
}

}  // namespace sinkscope::metrics
