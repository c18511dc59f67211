// Row quantities of spec/METRICS.md section 1: one attention row (its D visible parts) as a
// composition: sink mass, content composition, CLR, sink balance, entropies, and the row-level
// distances (Aitchison family and the classical metrics in keep/drop conventions).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sinkscope::metrics {

// Zero policy for probability rows (spec 1, 10.c). Scores never need one.
struct ZeroPolicy {
    enum class Kind { Error, Replace };
    Kind kind = Kind::Error;
    double delta = 1e-9;  // replace: zeros -> delta, non-zeros scaled by (1 - k * delta)
};
// "error" or "replace:DELTA" (0 < DELTA < 1); throws UsageError otherwise.
ZeroPolicy parse_zero_policy(const std::string& text);
std::string to_string(const ZeroPolicy& policy);

// The quantities of one row, all fp64. Parts are the row's visible keys in key order; the
// content parts are the same with the sink part removed.
struct RowQuantities {
    int64_t n_parts = 0;              // D
    int64_t sink = 0;                 // index of the sink among the parts
    std::vector<double> p;            // [D] closed row (spec 10.a) or softmax of the scores
    std::vector<double> pi;           // [D-1] content composition p_{-s} / (1 - s)
    std::vector<double> clr;          // [D] clr(p); with scores Z - mean Z (spec 10.b)
    std::vector<double> clr_content;  // [D-1] clr(pi)
    double sink_mass = 0;             // s
    double content_mass = 0;          // 1 - s, summed from the content parts (accurate near s = 1)
    double sink_balance = 0;          // b = sqrt(D/(D-1)) clr(p)_s
    double entropy = 0;               // H(p), nats
    double binary_sink_entropy = 0;   // H_b(s)
    double content_entropy = 0;       // H(pi)
};

// From probabilities: `a` holds the D visible values (non-negative, any positive sum: they are
// closed first). With ZeroPolicy::Error an exact zero throws InputError naming `origin` and the
// part index. When every content part is 0, pi is taken as uniform (the limit that
// replace:DELTA gives); its log-ratios then come from the zero policy as usual.
RowQuantities row_from_probabilities(const double* a, int64_t n_parts, int64_t sink,
                                     const ZeroPolicy& zeros, const std::string& origin = "row");
// From pre-softmax scores (all D finite): exact fp64 log-softmax, no zero policy (spec 10.b).
RowQuantities row_from_scores(const double* z, int64_t n_parts, int64_t sink);

// ---- low-level kernel used by the head accumulators: writes into caller buffers ------------
struct RowOut {
    double* p;            // [D]
    double* pi;           // [D-1]
    double* clr;          // [D]
    double* clr_content;  // [D-1]
    double sink_mass, content_mass, sink_balance, entropy, binary_sink_entropy, content_entropy;
};
// Returns the part index of the first exact zero when the policy is Error (the outputs are then
// unspecified), else -1. `scratch` holds D doubles.
int64_t compose_row_probabilities(const double* a, int64_t n_parts, int64_t sink,
                                  const ZeroPolicy& zeros, RowOut& out, double* scratch);
void compose_row_scores(const double* z, int64_t n_parts, int64_t sink, RowOut& out);

// ---- row-level distances (spec 1) -------------------------------------------------------------
double binary_entropy(double s);  // -s ln s - (1-s) ln(1-s), 0 ln 0 = 0
double aitchison_distance(const RowQuantities& p, const RowQuantities& q);  // ||clr - clr'||
double content_distance(const RowQuantities& p, const RowQuantities& q);    // dA(pi, pi')
double sink_term(const RowQuantities& p, const RowQuantities& q);           // |b - b'|

enum class Convention { Keep, Drop };  // keep: on p; drop: on pi
enum class ClassicalMetric { Cosine, JensenShannon, Euclidean };
const char* to_string(Convention c);       // "keep", "drop"
const char* to_string(ClassicalMetric m);  // "cosine", "js", "euclidean"

double cosine_distance(const double* x, const double* y, int64_t n);  // 1 - cos
double js_divergence(const double* x, const double* y, int64_t n);    // nats, 0 ln 0 = 0
double euclidean_distance(const double* x, const double* y, int64_t n);
double classical_distance(ClassicalMetric metric, Convention convention, const RowQuantities& p,
                          const RowQuantities& q);

}  // namespace sinkscope::metrics
