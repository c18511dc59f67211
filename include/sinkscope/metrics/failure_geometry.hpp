// Failure geometry of classical attention metrics (P1; docs/metrics.md "failure_geometry.csv"):
// where a metric stops separating heads. For every pair of heads, its distance under a metric
// against the pair's sink mass (the mean of the two heads' mean sink mass, spec 1-2), summarised
// per sink-mass bin by the distances' quantiles: a band that shrinks towards 0 as the sink mass
// grows is a metric that can no longer tell heads apart there.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <Eigen/Core>

namespace sinkscope::metrics {

// One (metric, sink-mass bin) band.
struct FailureBand {
    std::string matrix;             // a head distance name (metrics/head.hpp kDistanceNames)
    double bin_lo = 0, bin_hi = 0;  // [lo, hi), the last bin [lo, 1]
    int64_t n_pairs = 0;
    // Quantiles of the pairs' distances (numpy's default linear interpolation); NaN when the
    // bin holds no pair.
    double min = 0, q05 = 0, q25 = 0, median = 0, q75 = 0, q95 = 0, max = 0;
};

// Every pair a < b of heads whose distance is finite (pairs a scope does not compare are NaN and
// left out) enters the bin of (sink_mass[a] + sink_mass[b]) / 2, one of `n_bins` equal bins of
// [0, 1]. Rows: `matrices` in the order given, bins ascending, every bin (empty ones with
// n_pairs 0). Heads whose sink mass is not finite (no rows) are left out.
std::vector<FailureBand> failure_geometry(
    const std::vector<std::pair<std::string, const Eigen::MatrixXd*>>& matrices,
    const std::vector<double>& sink_mass, int n_bins);

}  // namespace sinkscope::metrics
