// Sink sets, sink-removal KL and sink concentration of the reference-frame analyses (spec section 8
// "Sink removal KL", "Sink concentration", 10.k; compat semantics of KL.ipynb in PAPERS.md B.5).
#pragma once

#include <array>
#include <cstddef>  // before attention.hpp, which uses size_t without it
#include <cstdint>
#include <vector>

#include "sinkscope/metrics/attention.hpp"

namespace sinkscope::metrics {

inline constexpr std::array<double, 3> k_sink_percentiles{0.8, 0.9, 0.95};
inline constexpr int64_t k_compat_kl_rows = 20;    // KL.ipynb: rows linspace(0, n-1, 20)
inline constexpr int64_t k_compat_conc_heads = 4;  // KL.ipynb: first 4 heads

// numpy.percentile(values, q) with the default linear interpolation; q in [0, 100].
double percentile_linear(std::vector<double> values, double q);
// The same on values already sorted ascending (several percentiles of one set, one sort).
double percentile_linear_sorted(const std::vector<double>& sorted, double q);

// S_t = { j : incoming_j >= percentile(incoming, 100 t) } (spec 8).
std::vector<int64_t> sink_set(const std::vector<double>& incoming, double t);

struct SinkKl {
    double kl_before = 0;      // mean_h KL_h with sinks
    double kl_after = 0;       // mean_h KL'_h without sinks
    double kl_reduction = 0;   // mean_h (KL_h - KL'_h); positive: heads agree more without sinks
    double concentration = 0;  // principled: mean mass on S_t; compat: percent, first 4 heads
    int64_t n_sinks = 0;
    int64_t rows_used = 0;
    int64_t rows_excluded = 0;  // rows with no visible non-sink key (10.k)
};

// One layer of one input at percentile t. Principled: closed rows (10.a), all heads, all rows,
// visible keys only. Compat (B.5): raw rows over all n keys, 20 rows when n > 20, the
// concentration over the first 4 heads as a percentage.
SinkKl sink_kl(const AttentionInput& in, int64_t layer, double t, bool compat);
// The same for several percentiles at once, sharing the rows, their logarithms and the KL with
// sinks (what the reference-frame accumulator calls).
// kl_before covers the rows that also give kl_after (those with a visible key outside S_t:
// kl_reduction is then a paired difference over one row set), or, with `all_rows`, every row
// the layer has (spec 8 read literally, "KL_h = mean over rows"; kl_reduction then compares
// means over two row sets). Principled only; compat (B.5) keeps its own rows.
std::vector<SinkKl> sink_kl_all(const AttentionInput& in, int64_t layer,
                                const std::vector<double>& percentiles, bool compat,
                                bool all_rows = false);

// Direct sink mass: mean of A[h, i, s] over heads and over the rows that see s (10.k);
// NaN when no row sees s.
double direct_sink_mass(const AttentionInput& in, int64_t layer, int64_t sink);

}  // namespace sinkscope::metrics
