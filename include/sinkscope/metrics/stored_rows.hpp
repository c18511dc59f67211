// Attention held in the precision it was captured or saved in (fp32 or fp64), read by the
// analyses row by row in fp64 (issue 19): `analyze` keeps the forward's fp32 squares instead of a
// fp64 copy (604 MB of fresh pages at T = 512 on a 12 x 12-head model, whose zero-filling by the
// kernel was 13% of the run's CPU time), and `metrics` reads an fp32 or fp64 .npy where it is
// mapped instead of copying each input. fp32 -> fp64 is exact, so every row an analysis sees is
// the one the copy held, bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sinkscope/metrics/attention.hpp"

namespace sinkscope::metrics {

class StoredRows final : public RowSource {
public:
    enum class Precision { F32, F64 };

    // pattern[l] (and scores[l], or none) point at layer l's [n_heads, n_tokens, n_tokens]
    // values of `precision` in C order; they stay valid as long as `owner` is held (this object
    // holds it).
    StoredRows(Precision precision, int64_t n_layers, int64_t n_heads, int64_t n_tokens,
               std::vector<const void*> pattern, std::vector<const void*> scores,
               std::shared_ptr<const void> owner);

    // The row widened into a ring of stable_rows() row buffers (one ring for probabilities, one
    // for scores): valid until stable_rows() further rows of its kind have been requested.
    const double* row(int64_t l, int64_t h, int64_t i) const override;
    const double* score_row(int64_t l, int64_t h, int64_t i) const override;
    bool has_scores() const override { return !scores_.empty(); }
    int64_t stable_rows() const override { return n_slots_; }
    void copy_rows(int64_t l, int64_t h, int64_t i0, int64_t i1, double* out) const override;
    bool holds_all_rows() const override { return true; }

private:
    const double* widen(const std::vector<const void*>& layers, std::vector<double>& ring,
                        int64_t& next, int64_t l, int64_t h, int64_t i) const;
    void widen_rows(const void* layer, int64_t h, int64_t i0, int64_t i1, double* out) const;

    Precision precision_;
    int64_t n_layers_, n_heads_, n_tokens_, n_slots_;
    std::vector<const void*> pattern_, scores_;
    std::shared_ptr<const void> owner_;
    mutable std::vector<double> pattern_ring_, score_ring_;  // [n_slots, n_tokens] each
    mutable int64_t next_pattern_ = 0, next_score_ = 0;
};

}  // namespace sinkscope::metrics
