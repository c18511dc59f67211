// Sink_eps (metrics/sink_eps.hpp).
#include "sinkscope/metrics/sink_eps.hpp"

#include <limits>

namespace sinkscope::metrics {

double sink_eps_alpha(const double* A, int64_t n, int64_t k) {
    if (k < 0 || k >= n) return std::numeric_limits<double>::quiet_NaN();
    double sum = 0;
    for (int64_t t = k; t < n; ++t) sum += A[t * n + k];
    return sum / static_cast<double>(n - k);
}

double sink_eps_share(const std::vector<double>& alpha, double eps) {
    if (alpha.empty()) return std::numeric_limits<double>::quiet_NaN();
    int64_t above = 0;
    for (double a : alpha) above += a > eps ? 1 : 0;
    return static_cast<double>(above) / static_cast<double>(alpha.size());
}

}  // namespace sinkscope::metrics
