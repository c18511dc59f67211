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

namespace sinkscope::analysis {
using metrics::AttentionInput;
using metrics::Masking;

struct AttentionFileOptions {
    std::filesystem::path attention;  // required
    std::filesystem::path scores;     // optional
    std::filesystem::path lengths;    // optional: (N,) integer, 1 <= length <= T
    std::filesystem::path token_ids;  // optional: (N, T) integer ((T,) for a 4-D attention)
    std::optional<Masking> masking;   // empty: causal iff everything above the diagonal is 0
    int64_t window = 0;               // sliding window (causal only), 0 = none
    double sum_tolerance = 1e-3;      // |visible row sum - 1| allowed before closure (10.a)
};

class AttentionFile {
public:
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
    // and the first offending index (n, l, h, i[, j]).
    void load(int64_t n, AttentionInput& out) const;

private:
    AttentionFileOptions options_;
    std::unique_ptr<io::NpyMap> attention_, scores_;
    std::vector<int64_t> lengths_;    // [N] (empty: all T)
    std::vector<int64_t> token_ids_;  // [N * T] (empty: not given)
    int64_t n_inputs_ = 0, n_layers_ = 0, n_heads_ = 0, n_tokens_ = 0;
    Masking masking_ = Masking::Causal;
    bool masking_detected_ = false;
};

}  // namespace sinkscope::analysis
