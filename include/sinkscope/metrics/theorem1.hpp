// Theorem 1 of P1 on demand (spec/PAPERS.md A.6, issue 50): the measure of the set of triples on
// which each row metric of spec 1 reverses the content verdict, over a grid of sink masses and
// content distributions.
//
// The family. D parts (D >= 3), the sink at part 0, the D-1 content parts after it.
//   content    pi(t)_j     = exp(t j/(D-2)) / sum_k exp(t k/(D-2)),   j = 0..D-2, t > 0
//   mirror     pi_rev(t)_j = pi(t)_{D-2-j}
//   anchor     a = (s_a, (1-s_a) pi(t))
//   head b     b = (s_b, (1-s_b) pi(t))         a's content, another sink mass
//   head c     c = (s_a, (1-s_a) pi_rev(t))     a's sink mass, the mirrored content
// Content truth: b is nearer to a than c, since dA_perp(a,b) = 0 < dA_perp(a,c) for t > 0.
// A metric m reverses at a point when its verdict sign(m(a,b) - m(a,c)) (spec 3, triple_verdict
// of reversal.hpp) says c is nearer; a tie (spec 10.f, relative 1e-12) is counted apart.
//
// The grid. s_a and s_b at the midpoints of `grid` equal cells of (0,1), t at the midpoints of
// `grid` equal cells of (0, t_max]: grid^3 points, each the midpoint of a cell of equal volume,
// so the fraction of points that reverse is the midpoint rule for the Lebesgue measure of the
// reversing set in (0,1)^2 x (0, t_max], normalised to 1.
//
// The closed form for dA (spec 1: dA^2 = dA_perp^2 + (b - b')^2). a and b share the content and
// a and c the sink balance (g(pi_rev) = g(pi)), so dA(a,b) = |b(a) - b(b)| and dA(a,c) =
// dA_perp(pi, pi_rev); with b(p) = sqrt((D-1)/D) ln(p_s / g(p_{-s})) and g(p_{-s}) =
// (1-s) g(pi):
//   |b(a) - b(b)|       = sqrt((D-1)/D) |logit s_a - logit s_b|
//   dA_perp(pi, pi_rev) = t sqrt(D (D-1) / (3 (D-2)))      (clr(pi_rev) = -clr(pi))
// and dA reverses iff the first exceeds the second.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sinkscope/metrics/row.hpp"

namespace sinkscope::metrics {

// The family and grid; in-class defaults are the single source of defaults (flags --parts,
// --grid, --t-max of `sinkscope theorem1`).
struct Theorem1Options {
    int64_t n_parts = 8;  // D, >= 3
    int64_t grid = 64;    // cells per axis (s_a, s_b, t), >= 1
    double t_max = 4.0;   // upper end of the t range (0, t_max], finite and > 0
};
// Throws UsageError naming the option when `options` is outside the ranges above.
void check_theorem1_options(const Theorem1Options& options);

// The metrics of spec 1 compared, in output order: cosine, js, euclidean (keep, then drop), dA
// (keep: on p), dA_perp (drop: on pi), sink_term (keep: |b - b'|, on p).
enum class Theorem1Kind { Classical, Aitchison, Content, SinkTerm };
struct Theorem1Metric {
    std::string name;  // "cosine", "js", "euclidean", "dA", "dA_perp", "sink_term"
    Convention convention;
    Theorem1Kind kind;
    ClassicalMetric classical = ClassicalMetric::Cosine;  // Kind::Classical only
};
const std::vector<Theorem1Metric>& theorem1_metrics();
// The metric's row distance, by the functions of row.hpp.
double theorem1_distance(const Theorem1Metric& metric, const RowQuantities& p,
                         const RowQuantities& q);

// Midpoint of cell `i` of `n` equal cells of (0, hi): (i + 1/2) hi / n.
double theorem1_midpoint(int64_t i, int64_t n, double hi);
// pi(t) [D-1] of the family (mirrored when `mirror`).
std::vector<double> theorem1_content(int64_t n_parts, double t, bool mirror);
// The row (s, (1-s) pi(t)) [D] (pi_rev(t) when `mirror`), sink at part 0.
RowQuantities theorem1_row(int64_t n_parts, double s, double t, bool mirror);

// The triple at one point and each metric's verdict there (triple_verdict: +1 = c nearer =
// reversal, -1 = b nearer, 0 = tie), in theorem1_metrics() order.
struct Theorem1Triple {
    RowQuantities a, b, c;
};
Theorem1Triple theorem1_triple(int64_t n_parts, double s_a, double s_b, double t);
std::vector<int> theorem1_verdicts(const Theorem1Triple& triple);

// The closed form for dA at one point: |b(a) - b(b)| - dA_perp(pi, pi_rev), from the family's
// parameters alone (no row is built); dA reverses iff it is > 0.
double theorem1_closed_form_gap(int64_t n_parts, double s_a, double s_b, double t);

// One metric over the grid (a row of theorem1.csv).
struct Theorem1Row {
    std::string metric;
    std::string convention;       // "keep" or "drop"
    int64_t n_points = 0;         // grid^3
    int64_t n_reversed = 0;       // points whose verdict is +1
    int64_t n_tied = 0;           // points whose verdict is 0
    double reversal_measure = 0;  // n_reversed / n_points
    double tie_measure = 0;       // n_tied / n_points
};

struct Theorem1Result {
    Theorem1Options options;
    std::vector<Theorem1Row> rows;  // theorem1_metrics() order
    // The closed form for dA over the same grid: points with gap > 0, their fraction, and the
    // smallest |gap| / max(|b(a) - b(b)|, dA_perp(pi, pi_rev)) over the points (how far the
    // nearest point lies from the boundary of the reversing set, relative).
    int64_t closed_form_reversed = 0;
    double closed_form_measure = 0;
    double closed_form_min_margin = 0;
};

// Every grid point, in passes: (1) the rows (s, pi(t)) and (s, pi_rev(t)) of every grid s and
// t, built once; (2) per point the verdict of each metric; (3) the closed form for dA.
Theorem1Result run_theorem1(const Theorem1Options& options);

}  // namespace sinkscope::metrics
