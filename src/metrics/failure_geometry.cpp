// Failure geometry (failure_geometry.hpp): head-pair distances binned by the pair's sink mass.
#include "sinkscope/metrics/failure_geometry.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/sink_kl.hpp"

namespace sinkscope::metrics {

std::vector<FailureBand> failure_geometry(
    const std::vector<std::pair<std::string, const Eigen::MatrixXd*>>& matrices,
    const std::vector<double>& sink_mass, int n_bins) {
    SS_CHECK(n_bins >= 1, "failure geometry needs at least one bin, got ", n_bins);
    const auto n = static_cast<Eigen::Index>(sink_mass.size());
    std::vector<FailureBand> out;
    for (const auto& [name, d] : matrices) {
        SS_CHECK(d && d->rows() == n && d->cols() == n, "distance matrix ", name, " is not ", n,
                 " x ", n);
        std::vector<std::vector<double>> bins(static_cast<size_t>(n_bins));
        for (Eigen::Index a = 0; a < n; ++a)
            for (Eigen::Index b = a + 1; b < n; ++b) {
                const double v = (*d)(a, b);
                const double s = 0.5 * (sink_mass[size_t(a)] + sink_mass[size_t(b)]);
                if (!std::isfinite(v) || !std::isfinite(s)) continue;
                // floor(s * bins), the top edge s = 1 in the last bin
                const auto k = std::min<int64_t>(n_bins - 1, static_cast<int64_t>(s * n_bins));
                bins[size_t(std::max<int64_t>(k, 0))].push_back(v);
            }
        for (int k = 0; k < n_bins; ++k) {
            FailureBand f;
            f.matrix = name;
            f.bin_lo = double(k) / n_bins;
            f.bin_hi = double(k + 1) / n_bins;
            std::vector<double>& v = bins[size_t(k)];
            std::sort(v.begin(), v.end());  // once for the seven quantiles
            f.n_pairs = static_cast<int64_t>(v.size());
            const double nan = std::numeric_limits<double>::quiet_NaN();
            auto q = [&](double p) { return v.empty() ? nan : percentile_linear_sorted(v, p); };
            f.min = q(0), f.q05 = q(5), f.q25 = q(25), f.median = q(50), f.q75 = q(75),
            f.q95 = q(95), f.max = q(100);
            out.push_back(std::move(f));
        }
    }
    return out;
}

}  // namespace sinkscope::metrics
