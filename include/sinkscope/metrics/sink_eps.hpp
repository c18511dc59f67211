// Sink_eps (spec/METRICS.md 8.q; Gu et al., ICLR 2025, "When attention sink emerges in language
// models"): the share of heads whose mean attention to key k exceeds eps.
#pragma once

#include <cstdint>
#include <vector>

namespace sinkscope::metrics {

// alpha(k) of one head on one input: mean of A[t, k] over the queries t >= k that see k (causal
// rows; `A` is n x n row-major). NaN when k >= n.
double sink_eps_alpha(const double* A, int64_t n, int64_t k);
// Share of the entries of `alpha` (one per head, already averaged over inputs) above eps; NaN
// for an empty list.
double sink_eps_share(const std::vector<double>& alpha, double eps);

}  // namespace sinkscope::metrics
