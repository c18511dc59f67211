// Attention dumps from other frameworks: a memory-mapped .npy shaped (N, L, H, T, T) or
// (L, H, T, T) (f2/f4/f8), optional scores of the same shape (masked = -inf), per-input lengths
// for padded encoder batches and token ids for the bos sink policy (spec 0, 10.p). Inputs are
// converted to fp64 and validated one at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sinkscope/io/npy_map.hpp"
#include "sinkscope/metrics/attention.hpp"
#include "sinkscope/metrics/stored_rows.hpp"

namespace sinkscope::analysis {
using metrics::AttentionInput;
using metrics::Masking;
using metrics::StoredRows;

struct AttentionFileOptions {
    std::filesystem::path attention;  // required
    std::filesystem::path scores;     // optional
    std::filesystem::path lengths;    // optional: (N,) integer, 1 <= length <= T
    std::filesystem::path token_ids;  // optional: (N, T) integer ((T,) for a 4-D attention)
    std::optional<Masking> masking;   // empty: causal iff everything above the diagonal is 0
    int64_t window = 0;               // sliding window (causal only), 0 = none
    double sum_tolerance = 1e-3;      // |visible row sum - 1| allowed before closure (10.a)
};

// "auto" (empty: detected from the entries above the diagonal), "causal" or "bidirectional";
// UsageError otherwise.
std::optional<Masking> parse_masking(const std::string& text);

// The same inputs already in memory (the Python bindings' numpy arrays), borrowed as views
// (io::NpyMap's in-memory constructor): nothing is copied before load() converts one input.
struct AttentionArrays {
    std::unique_ptr<io::NpyMap> attention;                   // required
    std::unique_ptr<io::NpyMap> scores, lengths, token_ids;  // optional (null: not given)
    std::optional<Masking> masking;
    int64_t window = 0;
    double sum_tolerance = 1e-3;
};

class AttentionFile {
public:
    // The arrays as one run's inputs, with every check of the file constructor.
    explicit AttentionFile(AttentionArrays arrays);
    // Opens and checks shapes, dtypes and option combinations; auto-detects the masking (one
    // pass over the entries above the diagonal). Throws InputError / UnsupportedError naming
    // the file, UsageError for option conflicts.
    explicit AttentionFile(const AttentionFileOptions& options);
    ~AttentionFile();

    int64_t n_inputs() const { return n_inputs_; }
    int64_t n_layers() const { return n_layers_; }
    int64_t n_heads() const { return n_heads_; }
    int64_t n_tokens() const { return n_tokens_; }
    Masking masking() const { return masking_; }
    bool masking_detected() const { return masking_detected_; }
    const io::NpyMap& attention() const { return *attention_; }

    // Input n as fp64, validated on its visible entries: non-finite or negative values, rows
    // whose visible sum is not 1 within the tolerance, non-finite visible scores, and attention
    // that differs from softmax(scores) by more than the tolerance -> InputError naming the file
    // and the first offending index (n, l, h, i[, j]). fp32 and fp64 arrays in C order are read
    // where they are (out.source: a StoredRows that out holds, and that holds the arrays);
    // others (fp16, strided) are copied into out.pattern and out.scores.
    void load(int64_t n, AttentionInput& out) const;

private:
    int64_t window_ = 0;
    double sum_tolerance_ = 1e-3;
    std::shared_ptr<const io::NpyMap> attention_, scores_;  // shared with the StoredRows of load
    std::vector<int64_t> lengths_;                          // [N] (empty: all T)
    std::vector<int64_t> token_ids_;                        // [N * T] (empty: not given)
    int64_t n_inputs_ = 0, n_layers_ = 0, n_heads_ = 0, n_tokens_ = 0;
    Masking masking_ = Masking::Causal;
    bool masking_detected_ = false;

    std::shared_ptr<const StoredRows> hold(int64_t n) const;  // nullptr: not readable in place
};

}  // namespace sinkscope::analysis
