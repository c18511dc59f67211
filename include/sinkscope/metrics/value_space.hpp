// Value-space analyses of spec section 8 that need model internals: reference tokens, relative
// magnitude and directional influence of their contribution (hidden-state and true-V variants,
// the latter pooled per layer and per head), transformation magnitude, geometric-semantic
// alignment, and the entropy-magnitude and PCA correlations of PAPERS.md B.7. Torch-free: the
// analysis module hands host fp64 arrays in.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "sinkscope/core/serialize.hpp"
#include "sinkscope/metrics/attention.hpp"

namespace sinkscope::metrics {

struct ValueSpaceOptions {
    double reference_threshold = 0.1;  // column mean above which a key is a reference (spec 8)
    double fallback_fraction = 0.1;    // else the top 10% of keys (at least 1)
    double cap_fraction = 0.3;         // at most 30% of the keys (at least 1)
    // ruscio2025: queries inside R count with the notebook's dummy (0.5, 0.5); hidden states are
    // rescaled by 1e5/max|h| above 1e5; transformation inputs by 1e3/max above 1e3 and clipped;
    // alignment over all off-diagonal pairs (PAPERS.md B.6, B.7).
    bool compat = false;
};

// Reference set R of one [T, T] head-averaged attention matrix (row-major, rows over visible
// keys of `attn`'s masking rule): keys sorted by decreasing column mean.
std::vector<int64_t> reference_tokens(const std::vector<double>& head_avg,
                                      const AttentionInput& shape, const ValueSpaceOptions& opts);

// True-V sums of one head: its own closed rows over its own values (R from the head average).
struct ValueSpaceHead {
    double sum_rel_magnitude = 0, sum_direction = 0;
    int64_t n = 0;  // non-reference queries that see a reference key
};

// Per-layer results, accumulated over inputs (sums and counts so shards merge exactly).
struct ValueSpaceLayer {
    double sum_reference_count = 0;
    int64_t n_inputs = 0;
    double sum_rel_magnitude_hidden = 0, sum_direction_hidden = 0;
    int64_t n_hidden = 0;
    double sum_rel_magnitude_value = 0, sum_direction_value = 0;
    int64_t n_value = 0;
    int64_t n_no_reference_visible = 0;  // principled: rows that see no reference key (excluded)
    double sum_transformation = 0;
    int64_t n_transformation = 0;
    double sum_alignment = 0;
    int64_t n_alignment = 0;            // Pearson r per input, averaged
    int64_t n_alignment_undefined = 0;  // inputs where r is undefined (constant vectors)
    // Entropy-magnitude correlation (B.7): per input, Pearson r over the tokens between the row
    // entropy of the head average and the transformation magnitude; averaged over inputs.
    double sum_entropy_magnitude = 0;
    int64_t n_entropy_magnitude = 0;
    int64_t n_entropy_magnitude_undefined = 0;  // inputs where r is undefined
    // PCA correlation (B.7, pca_correlation below): per input, the mean over k of |r_k| and of
    // r_k under the sign convention of principal_scores; averaged over inputs.
    double sum_pca = 0, sum_pca_signed = 0;
    int64_t n_pca = 0;
    int64_t n_pca_undefined = 0;  // inputs where a component is undetermined (n < 4, ties)
    // True-V sums per head ([H]; their sums over h equal the pooled ones up to the order of the
    // additions, and their counts add up to n_value exactly). Empty until values arrive.
    std::vector<ValueSpaceHead> heads;
};

class ValueSpaceAccumulator {
public:
    ValueSpaceAccumulator(int64_t n_layers, ValueSpaceOptions opts = {});

    // One input. `hidden` holds n_layers + 1 residual-stream states [T, d_model] row-major
    // (hidden[l] enters layer l; hidden[n_layers] is the final one), or, for layers that do not
    // follow one another in the model (analyze --layers 0,5), 2 n_layers states: the one entering
    // and the one leaving each layer (for one layer both forms are the same); `values` holds per
    // layer the
    // V projections [H, T, d_head], GQA-expanded (may be empty to skip the true-V variant).
    // `per_input` (may be null) receives this input's sums and counts per layer.
    void add(const AttentionInput& attn, const std::vector<std::vector<double>>& hidden,
             int64_t d_model, const std::vector<std::vector<double>>& values, int64_t d_head,
             std::vector<ValueSpaceLayer>* per_input = nullptr);
    void merge(const ValueSpaceAccumulator& other);
    // Exact state for resumable runs.
    void save(BinaryWriter& w) const;
    void load(BinaryReader& r);
    const std::vector<ValueSpaceLayer>& layers() const { return layers_; }
    const ValueSpaceOptions& options() const { return opts_; }

private:
    ValueSpaceOptions opts_;
    std::vector<ValueSpaceLayer> layers_;
};

// Pearson correlation of two equal-length samples; NaN when either is constant.
double pearson_r(const std::vector<double>& x, const std::vector<double>& y);

// Entropy (nats) of one attention row over its entries [begin, end) (the visible keys): the
// entries p > `floor` closed by their own sum s, H = ln s - (sum p ln p) / s, as
// mean_row_entropy (ref_frame.hpp) per row. Principled: floor 0 (zero entries skipped, 10.m);
// compat: 100 float32 eps (B.7). NaN for a row with no entry above the floor.
double row_entropy(const double* row, int64_t begin, int64_t end, double floor);

// Principal-component scores of the n samples (rows) of X [n, p] (row stride `ld`): with X_c
// the column-centred X = U S V^T, score k is the column u_k (unit norm; the score X_c v_k =
// s_k u_k up to its scale, which no correlation sees). Exact: a symmetric eigendecomposition
// (Eigen's SelfAdjointEigenSolver, deterministic) of the smaller Gram matrix, X_c X_c^T [n, n]
// or X_c^T X_c [p, p]. A component has no sign of its own; each u_k is flipped so that its
// entry of largest |value| (the first one on a tie) is positive, the rule of scikit-learn's
// svd_flip on U. Returns nothing (undetermined) when fewer than k + 1 samples, or when one of
// the k leading eigenvalues lambda_1 >= ... >= lambda_k, or a gap between consecutive ones up
// to lambda_k - lambda_{k+1}, is at most the rounding level of the Gram matrix and its
// eigendecomposition, tau = 8 (p + n) u ||X_c||_F^2 (u = 2^-53): such a component's direction
// is set by rounding, not by the data (rank below k, or a tie).
std::vector<std::vector<double>> principal_scores(const double* x, int64_t n, int64_t p, int64_t ld,
                                                  int k);

// The PCA correlation of B.7 between two sets of scores of the same n samples: r_k = Pearson r
// of the k-th score vectors. `abs_mean` = mean over k of |r_k| (sign-invariant, the default:
// each component's sign is arbitrary, so the sign of r_k is not a property of the data);
// `signed_mean` = mean of r_k under principal_scores' sign convention. NaN when either set is
// empty (undetermined) or the sets differ in size.
struct PcaCorrelation {
    double abs_mean = std::numeric_limits<double>::quiet_NaN();
    double signed_mean = std::numeric_limits<double>::quiet_NaN();
};
PcaCorrelation pca_correlation(const std::vector<std::vector<double>>& a,
                               const std::vector<std::vector<double>>& b);

}  // namespace sinkscope::metrics
