// One input's attention as the metrics see it: fp64 probabilities (and optionally pre-softmax
// scores) for every layer and head, with the visibility rule of spec section 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace sinkscope::metrics {

enum class Masking {
    Causal,         // row i sees keys j <= i (and j > i - window when window > 0)
    Bidirectional,  // row i sees keys j < length
};

// Rows computed on demand instead of stored (long inputs: `sinkscope analyze` recomputes them
// from the captured rotated queries and keys). A returned row stays valid until
// `stable_rows()` other distinct rows have been requested; not thread-safe.
class RowSource {
public:
    virtual ~RowSource() = default;
    virtual const double* row(int64_t l, int64_t h, int64_t i) const = 0;        // [n_tokens]
    virtual const double* score_row(int64_t l, int64_t h, int64_t i) const = 0;  // [n_tokens]
    virtual bool has_scores() const = 0;
    virtual int64_t stable_rows() const = 0;
};

// Attention of one input. Owned, row-major [n_layers, n_heads, n_tokens, n_tokens] fp64, or
// served row by row by `source` (then `pattern` and `scores` are empty).
// Entries outside a row's visible keys are ignored (they are absent parts, spec section 0),
// whatever value they hold.
struct AttentionInput {
    int64_t n_layers = 0;
    int64_t n_heads = 0;
    int64_t n_tokens = 0;   // T: allocated width of every row
    int64_t length = 0;     // tokens that are real (<= n_tokens; < for padded encoder batches)
    Masking masking = Masking::Causal;
    int64_t window = 0;     // sliding window (0 = none), causal only
    std::vector<double> pattern;  // A, [L, H, T, T]
    std::vector<double> scores;   // Z, same shape, or empty when not available
    std::vector<int64_t> token_ids;  // [T] when known (bos sink policy, token strings), else empty
    const RowSource* source = nullptr;  // not owned; set: rows come from it

    bool has_scores() const { return source ? source->has_scores() : !scores.empty(); }
    // True when the rows are stored: [L, H, T, T] pattern (and scores when present).
    bool stored() const { return source == nullptr; }
    size_t offset(int64_t l, int64_t h, int64_t i) const {
        return static_cast<size_t>(((l * n_heads + h) * n_tokens + i) * n_tokens);
    }
    const double* row(int64_t l, int64_t h, int64_t i) const {
        return source ? source->row(l, h, i) : pattern.data() + offset(l, h, i);
    }
    const double* score_row(int64_t l, int64_t h, int64_t i) const {
        return source ? source->score_row(l, h, i) : scores.data() + offset(l, h, i);
    }
    // Visible keys of row i are [key_begin(i), key_end(i)).
    int64_t key_begin(int64_t i) const {
        return masking == Masking::Causal && window > 0 && i - window + 1 > 0 ? i - window + 1 : 0;
    }
    int64_t key_end(int64_t i) const { return masking == Masking::Causal ? i + 1 : length; }
    int64_t n_visible(int64_t i) const { return key_end(i) - key_begin(i); }
};

}  // namespace sinkscope::metrics
