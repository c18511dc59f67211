// Theorem 1 on demand (metrics/theorem1.hpp): the theorem's claim on the family's grid, the dA
// count against its closed form, and each verdict against a recomputation from the definitions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/reversal.hpp"
#include "sinkscope/metrics/theorem1.hpp"

using namespace sinkscope;
using namespace sinkscope::metrics;

namespace {

const Theorem1Row& row_of(const Theorem1Result& r, const std::string& metric,
                          const std::string& convention) {
    for (const auto& row : r.rows)
        if (row.metric == metric && row.convention == convention) return row;
    throw std::runtime_error("no row " + metric + " " + convention);
}

// ---- the family and the metrics written out from their definitions (spec 1), on plain vectors
std::vector<double> family_row(int d, double s, double t, bool mirror) {
    std::vector<double> p(d);
    double total = 0;
    for (int j = 0; j < d - 1; ++j) total += std::exp(t * j / (d - 2.0));
    p[0] = s;
    for (int j = 0; j < d - 1; ++j) {
        const int k = mirror ? d - 2 - j : j;
        p[1 + j] = (1 - s) * std::exp(t * k / (d - 2.0)) / total;
    }
    return p;
}
std::vector<double> content(const std::vector<double>& p) {
    std::vector<double> pi(p.begin() + 1, p.end());
    double total = 0;
    for (double v : pi) total += v;
    for (double& v : pi) v /= total;
    return pi;
}
std::vector<double> clr(const std::vector<double>& x) {
    double mean = 0;
    for (double v : x) mean += std::log(v) / double(x.size());
    std::vector<double> out;
    for (double v : x) out.push_back(std::log(v) - mean);
    return out;
}
double euclid(const std::vector<double>& x, const std::vector<double>& y) {
    double acc = 0;
    for (size_t j = 0; j < x.size(); ++j) acc += (x[j] - y[j]) * (x[j] - y[j]);
    return std::sqrt(acc);
}
double cosine(const std::vector<double>& x, const std::vector<double>& y) {
    double xy = 0, xx = 0, yy = 0;
    for (size_t j = 0; j < x.size(); ++j) xy += x[j] * y[j], xx += x[j] * x[j], yy += y[j] * y[j];
    return 1 - xy / std::sqrt(xx * yy);
}
double js(const std::vector<double>& x, const std::vector<double>& y) {
    double acc = 0;
    for (size_t j = 0; j < x.size(); ++j) {
        const double m = (x[j] + y[j]) / 2;
        acc += x[j] * std::log(x[j] / m) + y[j] * std::log(y[j] / m);
    }
    return acc / 2;
}
// b(p) = sqrt((D-1)/D) ln(p_s / g(p_{-s})), spec 1.
double balance(const std::vector<double>& p) {
    double log_g = 0;
    for (size_t j = 1; j < p.size(); ++j) log_g += std::log(p[j]) / double(p.size() - 1);
    return std::sqrt((p.size() - 1.0) / p.size()) * (std::log(p[0]) - log_g);
}
// The metric's distance by name, from the definitions above.
double brute_distance(const Theorem1Metric& m, const std::vector<double>& p,
                      const std::vector<double>& q) {
    const bool keep = m.convention == Convention::Keep;
    const std::vector<double> x = keep ? p : content(p), y = keep ? q : content(q);
    if (m.name == "cosine") return cosine(x, y);
    if (m.name == "js") return js(x, y);
    if (m.name == "euclidean") return euclid(x, y);
    if (m.name == "dA") return euclid(clr(p), clr(q));
    if (m.name == "dA_perp") return euclid(clr(content(p)), clr(content(q)));
    if (m.name == "sink_term") return std::abs(balance(p) - balance(q));
    throw std::runtime_error("unknown metric " + m.name);
}

}  // namespace

// Theorem 1 at the defaults: every keep metric and dA reverse the content verdict on a set of
// positive measure; dA_perp and every drop metric never do (on pi, d(a,b) = 0).
TEST(Theorem1, ClassicalKeepAndDaReverseDropAndContentNever) {
    const Theorem1Result r = run_theorem1({});
    ASSERT_EQ(r.rows.size(), theorem1_metrics().size());
    const int64_t n = 64;
    for (const auto& row : r.rows) {
        EXPECT_EQ(row.n_points, n * n * n) << row.metric;
        EXPECT_EQ(row.reversal_measure, double(row.n_reversed) / double(n * n * n));
        if (row.convention == "keep") {
            EXPECT_GT(row.n_reversed, 0) << row.metric << " keep";
        } else {
            EXPECT_EQ(row.n_reversed, 0) << row.metric << " drop";
            EXPECT_EQ(row.n_tied, 0) << row.metric << " drop";
        }
    }
    EXPECT_EQ(row_of(r, "dA_perp", "drop").reversal_measure, 0.0);
    EXPECT_GT(row_of(r, "dA", "keep").reversal_measure, 0.0);
    for (const char* m : {"cosine", "js", "euclidean"})
        EXPECT_GT(row_of(r, m, "keep").reversal_measure, 0.0) << m;
}

// dA's reversing set is exactly the closed form's |b(a) - b(b)| > dA_perp(pi, pi_rev): the two
// counts of grid points are equal, and no point lies so near the boundary that rounding decides.
TEST(Theorem1, DaCountEqualsTheClosedForm) {
    for (const Theorem1Options o :
         {Theorem1Options{}, Theorem1Options{3, 24, 2.0}, Theorem1Options{16, 20, 8.0}}) {
        const Theorem1Result r = run_theorem1(o);
        const Theorem1Row& da = row_of(r, "dA", "keep");
        EXPECT_GT(r.closed_form_min_margin, 1e-9) << o.n_parts;
        EXPECT_EQ(da.n_reversed, r.closed_form_reversed) << o.n_parts;
        EXPECT_EQ(da.reversal_measure, r.closed_form_measure) << o.n_parts;
        EXPECT_EQ(da.n_tied, 0) << o.n_parts;
        EXPECT_GT(r.closed_form_reversed, 0) << o.n_parts;
        EXPECT_LT(r.closed_form_reversed, da.n_points) << o.n_parts;
    }
}

// The sink term: c shares a's balance (g(pi_rev) = g(pi)), so it says c is nearer wherever
// s_a != s_b (every off-diagonal point) and never reverses on the diagonal s_a = s_b.
TEST(Theorem1, SinkTermReversesOffTheDiagonal) {
    const Theorem1Result r = run_theorem1({5, 12, 3.0});
    const Theorem1Row& st = row_of(r, "sink_term", "keep");
    EXPECT_EQ(st.n_reversed, 12 * 12 * 12 - 12 * 12);
    EXPECT_LE(st.n_tied, 12 * 12);
}

// The grid counts are the per-point verdicts summed: run_theorem1 (rows built once per t)
// against theorem1_verdicts on freshly built triples, at every point of a small grid.
TEST(Theorem1, CountsAreThePerPointVerdictsSummed) {
    const Theorem1Options o{6, 7, 5.0};
    const Theorem1Result r = run_theorem1(o);
    const size_t n_metrics = theorem1_metrics().size();
    std::vector<int64_t> reversed(n_metrics), tied(n_metrics);
    int64_t closed = 0;
    for (int64_t ia = 0; ia < o.grid; ++ia)
        for (int64_t ib = 0; ib < o.grid; ++ib)
            for (int64_t it = 0; it < o.grid; ++it) {
                const double s_a = (ia + 0.5) / o.grid, s_b = (ib + 0.5) / o.grid,
                             t = (it + 0.5) * o.t_max / o.grid;
                const auto v = theorem1_verdicts(theorem1_triple(o.n_parts, s_a, s_b, t));
                for (size_t k = 0; k < n_metrics; ++k) reversed[k] += v[k] > 0, tied[k] += !v[k];
                closed += theorem1_closed_form_gap(o.n_parts, s_a, s_b, t) > 0;
            }
    for (size_t k = 0; k < n_metrics; ++k) {
        EXPECT_EQ(r.rows[k].n_reversed, reversed[k]) << r.rows[k].metric;
        EXPECT_EQ(r.rows[k].n_tied, tied[k]) << r.rows[k].metric;
    }
    EXPECT_EQ(r.closed_form_reversed, closed);
}

// Each metric's verdict at a point equals the verdict of its definition written out anew
// (brute_distance), wherever that verdict is clear (relative difference > 1e-9).
TEST(Theorem1, VerdictsEqualABruteForceRecomputation) {
    const auto& metrics = theorem1_metrics();
    int64_t compared = 0, reversals = 0;
    for (int d : {3, 4, 8, 13})
        for (double s_a : {0.03, 0.4, 0.5, 0.91})
            for (double s_b : {0.02, 0.45, 0.77, 0.99})
                for (double t : {0.05, 0.7, 2.5, 7.0}) {
                    const auto v = theorem1_verdicts(theorem1_triple(d, s_a, s_b, t));
                    const auto a = family_row(d, s_a, t, false), b = family_row(d, s_b, t, false),
                               c = family_row(d, s_a, t, true);
                    for (size_t k = 0; k < metrics.size(); ++k) {
                        const double d_ab = brute_distance(metrics[k], a, b);
                        const double d_ac = brute_distance(metrics[k], a, c);
                        if (std::abs(d_ab - d_ac) <= 1e-9 * std::max(d_ab, d_ac)) continue;
                        const int expected = d_ab > d_ac ? 1 : -1;
                        EXPECT_EQ(v[k], expected)
                            << metrics[k].name << " " << to_string(metrics[k].convention)
                            << " D=" << d << " s_a=" << s_a << " s_b=" << s_b << " t=" << t;
                        ++compared;
                        reversals += expected > 0;
                    }
                }
    // All but the sink term (whose d(a,c) is 0) at every point, and reversals among them.
    EXPECT_GE(compared, 4 * 64 * int64_t(metrics.size() - 1));
    EXPECT_GT(reversals, 0);
}

// The closed form is dA(a,b) - dA(a,c) of the rows: dA(a,b) = |b(a) - b(b)| (shared content) and
// dA(a,c) = dA_perp(a,c) (shared balance), spec 1's dA^2 = dA_perp^2 + (b - b')^2.
TEST(Theorem1, ClosedFormGapIsTheDaDifference) {
    for (int d : {3, 7, 32})
        for (double s_a : {0.1, 0.6})
            for (double s_b : {0.3, 0.95})
                for (double t : {0.2, 3.0}) {
                    const Theorem1Triple x = theorem1_triple(d, s_a, s_b, t);
                    const double d_ab = aitchison_distance(x.a, x.b);
                    const double d_ac = aitchison_distance(x.a, x.c);
                    EXPECT_NEAR(d_ab, sink_term(x.a, x.b), 1e-10 * d_ab);
                    EXPECT_NEAR(d_ac, content_distance(x.a, x.c), 1e-10 * d_ac);
                    EXPECT_NEAR(sink_term(x.a, x.c), 0.0, 1e-12);
                    EXPECT_NEAR(content_distance(x.a, x.b), 0.0, 1e-12);
                    EXPECT_NEAR(theorem1_closed_form_gap(d, s_a, s_b, t), d_ab - d_ac,
                                1e-10 * std::max(d_ab, d_ac));
                }
}

// The family: pi(t) is the closed exponential ramp, pi_rev its mirror, the sink at part 0.
TEST(Theorem1, FamilyRows) {
    const std::vector<double> pi = theorem1_content(5, 1.5, false);
    const std::vector<double> rev = theorem1_content(5, 1.5, true);
    ASSERT_EQ(pi.size(), 4u);
    EXPECT_NEAR(pi[3] / pi[0], std::exp(1.5), 1e-14);
    EXPECT_NEAR(pi[1] / pi[0], std::exp(0.5), 1e-14);
    for (size_t j = 0; j < 4; ++j) EXPECT_EQ(rev[j], pi[3 - j]);
    const RowQuantities row = theorem1_row(5, 0.3, 1.5, true);
    EXPECT_NEAR(row.sink_mass, 0.3, 1e-15);
    for (size_t j = 0; j < 4; ++j) EXPECT_NEAR(row.pi[j], rev[j], 1e-15);
    EXPECT_EQ(theorem1_midpoint(0, 4, 1.0), 0.125);
    EXPECT_EQ(theorem1_midpoint(3, 4, 4.0), 3.5);
}

// Options outside the family's ranges are usage errors, never adjusted.
TEST(Theorem1, BadOptionsThrowUsageError) {
    const double nan = std::nan(""), inf = INFINITY;
    for (const Theorem1Options o :
         {Theorem1Options{2, 8, 1.0}, Theorem1Options{8, 0, 1.0}, Theorem1Options{8, -3, 1.0},
          Theorem1Options{8, 8, 0.0}, Theorem1Options{8, 8, -1.0}, Theorem1Options{8, 8, nan},
          Theorem1Options{8, 8, inf}, Theorem1Options{8, 1 << 20, 1.0}})
        EXPECT_THROW(run_theorem1(o), UsageError) << o.n_parts << " " << o.grid << " " << o.t_max;
    EXPECT_NO_THROW(check_theorem1_options({3, 1, 1e-3}));
}
