// Sink geometry (reference-frame paper, section 3.3, after Gu et al., ICLR 2025): a first-token
// sink shows a small key norm and a high query-key cosine. Per head, on the queries and keys
// whose dot products are the attention scores (after any rotary embedding).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sinkscope/metrics/attention.hpp"

namespace sinkscope::metrics {

// The quantities of one head on one input, in this order (k_sink_geometry_metrics).
enum SinkGeometryMetric {
    kKeyNormSink,     // ||k_s||
    kKeyNormOthers,   // mean over the other positions j != s of ||k_j||
    kKeyNormRatio,    // ||k_s|| / that mean (< 1: the sink's key is shorter)
    kQkCosineSink,    // mean over the queries i != s that see s of cos(q_i, k_s)
    kQkCosineOthers,  // mean over the visible pairs (i, j), j != s, j != i, of cos(q_i, k_j)
    kQkCosineExcess,  // kQkCosineSink - kQkCosineOthers
    kSinkGeometryCount
};
inline constexpr std::array<const char*, kSinkGeometryCount> k_sink_geometry_metrics{
    "key_norm_sink",  "key_norm_others",  "key_norm_ratio",
    "qk_cosine_sink", "qk_cosine_others", "qk_cosine_excess"};

// One head: q, k [T, d] row-major; `shape` gives the visible keys of each query (causal, window,
// length); s the sink position. A value with nothing to average (s >= length, no query sees s,
// zero vectors only) is NaN; a zero-length query or key enters no cosine.
std::array<double, kSinkGeometryCount> sink_geometry(const double* q, const double* k, int64_t d,
                                                     const AttentionInput& shape, int64_t s);

}  // namespace sinkscope::metrics
