// StoredRows (metrics/stored_rows.hpp): rows widened to fp64 where they are read.
#include "sinkscope/metrics/stored_rows.hpp"

#include <algorithm>
#include <utility>

#include "sinkscope/core/error.hpp"

namespace sinkscope::metrics {

StoredRows::StoredRows(Precision precision, int64_t n_layers, int64_t n_heads, int64_t n_tokens,
                       std::vector<const void*> pattern, std::vector<const void*> scores,
                       std::shared_ptr<const void> owner)
    : precision_(precision),
      n_layers_(n_layers),
      n_heads_(n_heads),
      n_tokens_(n_tokens),
      // As LazyAttention: every head's current row stays valid while the next row starts (the
      // head metrics read row i of every head before row i + 1).
      n_slots_(std::max<int64_t>(64, 2 * n_layers * n_heads)),
      pattern_(std::move(pattern)),
      scores_(std::move(scores)),
      owner_(std::move(owner)) {
    SS_CHECK(n_layers > 0 && n_heads > 0 && n_tokens > 0, "StoredRows of shape [", n_layers, ", ",
             n_heads, ", ", n_tokens, ", ", n_tokens, "]");
    SS_CHECK(static_cast<int64_t>(pattern_.size()) == n_layers, "StoredRows: ", pattern_.size(),
             " pattern layers for ", n_layers);
    SS_CHECK(scores_.empty() || static_cast<int64_t>(scores_.size()) == n_layers,
             "StoredRows: ", scores_.size(), " score layers for ", n_layers);
}

void StoredRows::widen_rows(const void* layer, int64_t h, int64_t i0, int64_t i1,
                            double* out) const {
    const auto first = static_cast<size_t>((h * n_tokens_ + i0) * n_tokens_);
    const auto count = static_cast<size_t>((i1 - i0) * n_tokens_);
    if (precision_ == Precision::F32) {
        const float* in = static_cast<const float*>(layer) + first;
        for (size_t k = 0; k < count; ++k) out[k] = static_cast<double>(in[k]);  // exact
    } else {
        std::copy_n(static_cast<const double*>(layer) + first, count, out);
    }
}

const double* StoredRows::widen(const std::vector<const void*>& layers, std::vector<double>& ring,
                                int64_t& next, int64_t l, int64_t h, int64_t i) const {
    SS_CHECK(l >= 0 && l < n_layers_ && h >= 0 && h < n_heads_ && i >= 0 && i < n_tokens_,
             "StoredRows: row (", l, ", ", h, ", ", i, ") outside [", n_layers_, ", ", n_heads_,
             ", ", n_tokens_, "]");
    if (ring.empty()) ring.resize(static_cast<size_t>(n_slots_ * n_tokens_));
    double* out = ring.data() + next * n_tokens_;
    next = (next + 1) % n_slots_;
    widen_rows(layers[static_cast<size_t>(l)], h, i, i + 1, out);
    return out;
}

const double* StoredRows::row(int64_t l, int64_t h, int64_t i) const {
    return widen(pattern_, pattern_ring_, next_pattern_, l, h, i);
}

const double* StoredRows::score_row(int64_t l, int64_t h, int64_t i) const {
    SS_CHECK(has_scores(), "StoredRows: no scores");
    return widen(scores_, score_ring_, next_score_, l, h, i);
}

void StoredRows::copy_rows(int64_t l, int64_t h, int64_t i0, int64_t i1, double* out) const {
    SS_CHECK(
        l >= 0 && l < n_layers_ && h >= 0 && h < n_heads_ && 0 <= i0 && i0 <= i1 && i1 <= n_tokens_,
        "StoredRows: rows [", i0, ", ", i1, ") of (", l, ", ", h, ") outside [", n_layers_, ", ",
        n_heads_, ", ", n_tokens_, "]");
    widen_rows(pattern_[static_cast<size_t>(l)], h, i0, i1, out);
}

}  // namespace sinkscope::metrics
