// The exact split of an entropy change between two checkpoints into a sink and a content term
// (spec/METRICS.md section 6). Per row, H = H_b(s) + (1 - s) H(pi); for the same row at
// checkpoints 0 and 1 the symmetric (Shapley) split is
//   sink term    = [H_b(s1) - H_b(s0)] + (s0 - s1) (H(pi0) + H(pi1)) / 2
//   content term = (1 - (s0 + s1) / 2) (H(pi1) - H(pi0))
// and sink term + content term = H1 - H0 exactly (algebraically). Here 1 - s is the content mass
// summed from the content parts (equal to 1 - s, but accurate near s = 1), so (s0 - s1) is
// written (w1 - w0) with w = 1 - s.
#pragma once

#include <cstdint>

namespace sinkscope::metrics {

// One row's parts at one checkpoint.
struct EntropyParts {
    double sink_mass = 0;        // s
    double content_mass = 0;     // w = 1 - s
    double content_entropy = 0;  // H(pi), nats
    double entropy = 0;          // H(p) measured on the whole row, nats
};

// Sums over paired rows.
struct EntropySplit {
    double sink_term = 0, content_term = 0;
    double delta_entropy = 0;  // sum of measured H1 - H0
    int64_t n_rows = 0;
    void add(const EntropyParts& before, const EntropyParts& after);
    // sink term / (sink term + content term); NaN when the sum is 0.
    double sink_share() const;
    // delta_entropy - (sink_term + content_term): rounding only.
    double residual() const { return delta_entropy - (sink_term + content_term); }
};

}  // namespace sinkscope::metrics
