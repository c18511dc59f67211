// Attention rows of one long input recomputed on demand from the captured rotated queries and
// keys (hook_rot_q / hook_rot_k), so `analyze` never holds the [L, H, T, T] tensor: memory is
// O(L T d_model) for q and k plus a bounded cache of row blocks (DESIGN.md data flow).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "sinkscope/metrics/attention.hpp"
#include "sinkscope/model/model.hpp"

namespace sinkscope::analysis {

class LazyAttention final : public metrics::RowSource {
public:
    // Takes hook_rot_q / hook_rot_k of every analysed layer (`layers`, capture.hpp; empty: all)
    // out of `result` (batch element 0). Rows are computed as the forward computes them: scores =
    // q.k / sqrt(d_head), masked = -inf, softmax in f32; handed out in f64.
    LazyAttention(model::ForwardResult& result, const model::ModelConfig& config,
                  const std::vector<int64_t>& layers = {});

    const double* row(int64_t l, int64_t h, int64_t i) const override;
    const double* score_row(int64_t l, int64_t h, int64_t i) const override;
    bool has_scores() const override { return true; }
    int64_t stable_rows() const override { return n_slots_ * kRowsPerBlock; }
    // Thread-safe, bypasses the cache: one matrix product per kBulkRows rows.
    void copy_rows(int64_t l, int64_t h, int64_t i0, int64_t i1, double* out) const override;
    void drop_cache() const override;

    // An AttentionInput served by this source (masking and window from the config).
    metrics::AttentionInput input(const std::vector<int32_t>& token_ids) const;
    int64_t n_computed_blocks() const { return n_computed_; }

    static constexpr int64_t kRowsPerBlock = 8;
    static constexpr int64_t kBulkRows = 256;

private:
    struct Slot {
        int64_t key = -1;             // (l * n_heads + h) * n_blocks + block, -1 = empty
        std::vector<double> pattern;  // [kRowsPerBlock, T]
        std::vector<double> scores;   // [kRowsPerBlock, T]
    };
    const Slot& fetch(int64_t l, int64_t h, int64_t i) const;
    // Rows [i0, i0 + n) of head (l, h): probabilities into pattern and (when not null) scores,
    // [n, T] each.
    void compute(int64_t l, int64_t h, int64_t i0, int64_t n, double* pattern,
                 double* scores) const;

    model::ModelConfig config_;
    std::vector<int64_t> layers_;  // the model layer of each analysed layer
    int64_t n_tokens_ = 0, n_blocks_ = 0, n_slots_ = 0;
    double scale_ = 1;
    std::vector<at::Tensor> q_;  // [L] of [T, n_heads, d_head] f32 on the model's device
    std::vector<at::Tensor> k_;  // [L] of [T, n_kv_heads, d_head] f32
    mutable std::vector<Slot> slots_;
    mutable std::vector<int32_t> slot_of_;  // [L * H * n_blocks] -> slot or -1
    mutable int64_t next_ = 0;              // FIFO eviction
    mutable int64_t n_computed_ = 0;
};

}  // namespace sinkscope::analysis
