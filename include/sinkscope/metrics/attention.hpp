// One input's attention as the metrics see it: fp64 probabilities (and optionally pre-softmax
// scores) for every layer and head, with the visibility rule of spec section 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace sinkscope::metrics {

enum class Masking {
    Causal,         // row i sees keys j <= i (and j > i - window when window > 0)
    Bidirectional,  // row i sees keys j < length
};

// Rows computed on demand instead of stored as fp64 (long inputs: `sinkscope analyze` recomputes
// them from the captured rotated queries and keys; StoredRows widens fp32 rows). A returned row
// stays valid until `stable_rows()` other distinct rows have been requested; row() and score_row()
// are not thread-safe. Analyses that read whole heads or blocks of rows use copy_rows(), which is.
// Every row a source recomputes is checked where it is computed: finite probabilities (a softmax
// of finite scores, so each row sums to 1 over its visible keys up to rounding); a source throws
// InputError for a row that is not finite.
class RowSource {
public:
    virtual ~RowSource() = default;
    virtual const double* row(int64_t l, int64_t h, int64_t i) const = 0;        // [n_tokens]
    virtual const double* score_row(int64_t l, int64_t h, int64_t i) const = 0;  // [n_tokens]
    virtual bool has_scores() const = 0;
    virtual int64_t stable_rows() const = 0;
    // Probability rows [i0, i1) of head (l, h) into out, [i1 - i0, n_tokens] row-major, the
    // values row() gives up to the rounding of the recomputation; safe to call from several
    // threads at once, and computed block-wise (one matrix product for many rows).
    virtual void copy_rows(int64_t l, int64_t h, int64_t i0, int64_t i1, double* out) const = 0;
    // Frees what row() / score_row() have cached (the pointers they gave become invalid); called
    // between analyses, never while one runs. Not thread-safe.
    virtual void drop_cache() const {}
    // True when every row is held in memory and only widened to fp64 where it is read
    // (StoredRows): nothing is recomputed, so there is no cache worth dropping between analyses
    // and no freed memory worth returning to the system, and its rows are checked as stored rows
    // are.
    virtual bool holds_all_rows() const { return false; }
};

// Attention of one input. Owned, row-major [n_layers, n_heads, n_tokens, n_tokens] fp64, or
// served row by row by `source` (then `pattern` and `scores` are empty).
// Entries outside a row's visible keys are ignored (they are absent parts, spec section 0),
// whatever value they hold.
struct AttentionInput {
    int64_t n_layers = 0;
    int64_t n_heads = 0;
    int64_t n_tokens = 0;  // T: allocated width of every row
    int64_t length = 0;    // tokens that are real (<= n_tokens; < for padded encoder batches)
    Masking masking = Masking::Causal;
    int64_t window = 0;              // sliding window (0 = none), causal only
    std::vector<double> pattern;     // A, [L, H, T, T]
    std::vector<double> scores;      // Z, same shape, or empty when not available
    std::vector<int64_t> token_ids;  // [T] when known (bos sink policy, token strings), else empty
    const RowSource* source = nullptr;              // set: rows come from it
    std::shared_ptr<const RowSource> source_owner;  // holds `source` when this input owns it

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
    // Probability rows [i0, i1) of head (l, h), [i1 - i0, n_tokens] row-major: the stored rows
    // themselves, or the source's, computed into `buffer`. Thread-safe (unlike row() on a
    // source); the pointer is valid until `buffer` changes.
    const double* rows(int64_t l, int64_t h, int64_t i0, int64_t i1,
                       std::vector<double>& buffer) const {
        if (!source) return pattern.data() + offset(l, h, i0);
        buffer.resize(static_cast<size_t>((i1 - i0) * n_tokens));
        source->copy_rows(l, h, i0, i1, buffer.data());
        return buffer.data();
    }
    // fn(i, row) for rows i in [i0, i1) of head (l, h) in order, read through rows() a block at
    // a time; `buffer` holds a block of recomputed rows.
    template <class F>
    void for_each_row(int64_t l, int64_t h, int64_t i0, int64_t i1, std::vector<double>& buffer,
                      F&& fn) const {
        const int64_t per_block = rows_per_block(1);
        for (int64_t b = i0; b < i1; b += per_block) {
            const int64_t e = b + per_block < i1 ? b + per_block : i1;
            const double* block = rows(l, h, b, e, buffer);
            for (int64_t i = b; i < e; ++i) fn(i, block + (i - b) * n_tokens);
        }
    }
    // Rows per block for readers of rows() that hold `n_blocks` such blocks at once: as many
    // as fit in about 32 MB (stored inputs: all of them), at least 8.
    int64_t rows_per_block(int64_t n_blocks) const {
        if (!source) return length > 0 ? length : 1;
        const int64_t bytes = n_blocks * n_tokens * static_cast<int64_t>(sizeof(double));
        const int64_t r = (int64_t{32} << 20) / (bytes > 0 ? bytes : 1);
        return r < 8 ? 8 : (r > length && length > 0 ? length : r);
    }
    // Visible keys of row i are [key_begin(i), key_end(i)).
    int64_t key_begin(int64_t i) const {
        return masking == Masking::Causal && window > 0 && i - window + 1 > 0 ? i - window + 1 : 0;
    }
    int64_t key_end(int64_t i) const { return masking == Masking::Causal ? i + 1 : length; }
    int64_t n_visible(int64_t i) const { return key_end(i) - key_begin(i); }
};

}  // namespace sinkscope::metrics
