// Value-space analyses of spec section 8 that need model internals: reference tokens, relative
// magnitude and directional influence of their contribution (hidden-state and true-V variants),
// transformation magnitude and geometric-semantic alignment. Torch-free: the analysis module
// hands host fp64 arrays in.
#pragma once

#include <cstdint>
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

}  // namespace sinkscope::metrics
