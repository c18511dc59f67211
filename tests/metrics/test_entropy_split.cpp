// Spec/METRICS.md section 6: the Shapley split of an entropy change. Checked against the
// definition written out from whole rows (not from the parts the split reads), and against the
// exact identity sink + content = measured change.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "sinkscope/metrics/entropy_split.hpp"
#include "sinkscope/metrics/row.hpp"
#include "testing.hpp"

using namespace sinkscope;

namespace {

// A random closed row of d parts with sink 0, its sink mass pushed towards `s`.
std::vector<double> random_row(std::mt19937_64& rng, int d, double s) {
    std::uniform_real_distribution<double> u(0.05, 1.0);
    std::vector<double> p(static_cast<size_t>(d));
    double rest = 0;
    for (int j = 1; j < d; ++j) rest += p[size_t(j)] = u(rng);
    for (int j = 1; j < d; ++j) p[size_t(j)] *= (1 - s) / rest;
    p[0] = s;
    return p;
}

// The parts from the row's own definition: H over all parts, H(pi) over the renormalised rest.
metrics::EntropyParts parts_of(const std::vector<double>& p) {
    metrics::EntropyParts e;
    e.sink_mass = p[0];
    for (size_t j = 1; j < p.size(); ++j) e.content_mass += p[j];
    for (double x : p) e.entropy -= x * std::log(x);
    for (size_t j = 1; j < p.size(); ++j) {
        const double q = p[j] / e.content_mass;
        e.content_entropy -= q * std::log(q);
    }
    return e;
}

double hb(double s) {
    return -s * std::log(s) - (1 - s) * std::log(1 - s);
}

}  // namespace

// Sink + content = measured change, per pair of rows and summed, within float64 rounding: each
// row's H is a sum of d <= 40 terms of one sign (gamma_40 relative), and the identity
// H = H_b(s) + (1 - s) H(pi) holds to that on both sides; n rows add n such errors.
TEST(EntropySplit, TermsAddUpToTheMeasuredChange) {
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> s(0.01, 0.99);
    std::uniform_int_distribution<int> d(3, 40);
    metrics::EntropySplit sum;
    double scale = 0;
    for (int r = 0; r < 2000; ++r) {
        const int parts = d(rng);
        const auto a = parts_of(random_row(rng, parts, s(rng)));
        const auto b = parts_of(random_row(rng, parts, s(rng)));
        metrics::EntropySplit one;
        one.add(a, b);
        const double row_scale = a.entropy + b.entropy + 1;
        EXPECT_LE(std::abs(one.residual()), 16 * testutil::gamma_k(40, testutil::kU64) * row_scale);
        sum.add(a, b);
        scale += row_scale;
    }
    EXPECT_EQ(sum.n_rows, 2000);
    EXPECT_LE(std::abs(sum.residual()), 16 * testutil::gamma_k(2000 * 40, testutil::kU64) * scale);
}

// The terms equal the spec's formulas written with s (not 1 - s) on one hand-sized pair.
TEST(EntropySplit, MatchesTheSpecFormulas) {
    const std::vector<double> p0 = {0.5, 0.25, 0.25}, p1 = {0.8, 0.15, 0.05};
    const auto a = parts_of(p0), b = parts_of(p1);
    metrics::EntropySplit x;
    x.add(a, b);
    const double hpi0 = std::log(2.0);  // (0.5, 0.5)
    const double hpi1 = -(0.75 * std::log(0.75) + 0.25 * std::log(0.25));
    const double sink = hb(0.8) - hb(0.5) + (0.5 - 0.8) * (hpi0 + hpi1) / 2;
    const double content = (1 - (0.5 + 0.8) / 2) * (hpi1 - hpi0);
    EXPECT_NEAR(x.sink_term, sink, 1e-15);
    EXPECT_NEAR(x.content_term, content, 1e-15);
    EXPECT_NEAR(x.sink_share(), sink / (sink + content), 1e-14);
    // Reversing the pair negates both terms (the split is symmetric).
    metrics::EntropySplit back;
    back.add(b, a);
    EXPECT_NEAR(back.sink_term, -sink, 1e-15);
    EXPECT_NEAR(back.content_term, -content, 1e-15);
}

// No change, no terms; the share is then undefined rather than 0/0 garbage.
TEST(EntropySplit, NoChangeHasNoShare) {
    const auto a = parts_of({0.3, 0.3, 0.4});
    metrics::EntropySplit x;
    x.add(a, a);
    EXPECT_EQ(x.sink_term, 0);
    EXPECT_EQ(x.content_term, 0);
    EXPECT_TRUE(std::isnan(x.sink_share()));
}
