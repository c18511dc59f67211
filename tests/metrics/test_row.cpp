// Row quantities of spec section 1: identities, invariances, edge rows and zero policies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/row.hpp"
#include "synthetic_attention.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::metrics;
using testutil::rel_err;
using testutil::softmax;

namespace {
RowQuantities from_p(const std::vector<double>& p, int64_t sink = 0, ZeroPolicy z = {}) {
    return row_from_probabilities(p.data(), int64_t(p.size()), sink, z);
}
RowQuantities from_z(const std::vector<double>& z, int64_t sink = 0) {
    return row_from_scores(z.data(), int64_t(z.size()), sink);
}
double sq(double v) {
    return v * v;
}
// Checks the Pythagorean identity dA^2 = dA_perp^2 + (b - b')^2 (spec 1) to kSpecIdentityRel.
void expect_pythagoras(const RowQuantities& p, const RowQuantities& q) {
    const double lhs = sq(aitchison_distance(p, q));
    const double rhs = sq(content_distance(p, q)) + sq(p.sink_balance - q.sink_balance);
    EXPECT_REL_WITHIN(lhs, rhs, testutil::kSpecIdentityRel) << lhs << " vs " << rhs;
}
// Checks H(p) = H_b(s) + (1 - s) H(pi) (spec 1) to `tol` relative.
void expect_entropy_split(const RowQuantities& r, double tol = testutil::kSpecEntropyRel) {
    // H_b from s and 1 - s as the row reports them (1 - s is summed from the content parts).
    const double hb =
        -r.sink_mass * std::log1p(-r.content_mass) - r.content_mass * std::log(r.content_mass);
    const double rhs = hb + r.content_mass * r.content_entropy;
    EXPECT_REL_WITHIN(r.entropy, rhs, tol) << r.entropy << " vs " << rhs;
    EXPECT_REL_WITHIN(r.binary_sink_entropy, hb, testutil::kSpecEntropyRel);
    if (r.sink_mass < 0.999) {
        EXPECT_REL_WITHIN(r.binary_sink_entropy, binary_entropy(r.sink_mass),
                          testutil::kSpecEntropyRel);
    }
}
}  // namespace

// clr(softmax(z)) = z - mean(z), from probabilities (through ln p) and from scores.
TEST(Row, ClrOfSoftmaxIsCentredLogits) {
    std::mt19937_64 rng(1);
    auto z = testutil::random_logits(rng, 9, 2.0);
    const double mean = std::accumulate(z.begin(), z.end(), 0.0) / z.size();
    RowQuantities rp = from_p(softmax(z), 2), rz = from_z(z, 2);
    double clr_sum = 0;
    for (size_t j = 0; j < z.size(); ++j) {
        // through ln(softmax(z)): relative rounding of p, |z| <= ~6, spec tolerance
        EXPECT_WITHIN(rp.clr[j], z[j] - mean,
                      testutil::kSpecIdentityRel * std::max(1.0, std::abs(z[j] - mean)));
        EXPECT_EQ(rz.clr[j], z[j] - mean);
        clr_sum += rp.clr[j];
    }
    EXPECT_WITHIN(clr_sum, 0.0, testutil::kF64SumRel);  // 9 terms of magnitude <= ~6
}

// b = sqrt(D/(D-1)) clr_s = sqrt((D-1)/D) ln(p_s / g(p_{-s})) (spec 1).
TEST(Row, SinkBalanceMatchesBothDefinitions) {
    std::mt19937_64 rng(2);
    auto z = testutil::random_logits(rng, 6, 1.5);
    auto p = softmax(z);
    const int64_t s = 1, d = 6;
    double log_g = 0;
    for (int64_t j = 0; j < d; ++j)
        if (j != s) log_g += std::log(p[j]) / double(d - 1);
    const double b_ref = std::sqrt(double(d - 1) / d) * (std::log(p[s]) - log_g);
    RowQuantities r = from_p(p, s);
    EXPECT_REL_WITHIN(r.sink_balance, b_ref, testutil::kSpecIdentityRel);
    EXPECT_REL_WITHIN(r.sink_balance, std::sqrt(double(d) / (d - 1)) * r.clr[s],
                      testutil::kFewOps);  // a sqrt and a product
    EXPECT_REL_WITHIN(from_z(z, s).sink_balance, b_ref, testutil::kSpecIdentityRel);
}

// dA^2 = dA_perp^2 + (b - b')^2 per row, from probabilities and from scores.
TEST(Row, PythagoreanIdentity) {
    std::mt19937_64 rng(3);
    for (int rep = 0; rep < 5; ++rep) {
        auto z1 = testutil::random_logits(rng, 12, 2.0), z2 = testutil::random_logits(rng, 12, 2.0);
        z1[0] += 3;
        expect_pythagoras(from_p(softmax(z1)), from_p(softmax(z2)));
        expect_pythagoras(from_z(z1, 4), from_z(z2, 4));
    }
}

// H(p) = H_b(s) + (1-s) H(pi) from probabilities and from scores.
TEST(Row, EntropyDecomposition) {
    std::mt19937_64 rng(4);
    auto z = testutil::random_logits(rng, 20, 2.0);
    z[0] += 4;
    expect_entropy_split(from_p(softmax(z)));
    expect_entropy_split(from_z(z));
    // and the entropy itself against -sum p ln p computed here
    auto p = softmax(z);
    double h = 0;
    for (double v : p) h -= v * std::log(v);
    EXPECT_REL_WITHIN(from_z(z).entropy, h, testutil::kSpecEntropyRel);
}

// A shared per-key logit bias leaves dA and dA_perp unchanged.
TEST(Row, SharedKeyBiasInvariance) {
    std::mt19937_64 rng(5);
    auto z1 = testutil::random_logits(rng, 10), z2 = testutil::random_logits(rng, 10);
    auto bias = testutil::random_logits(rng, 10, 3.0);
    auto b1 = z1, b2 = z2;
    for (int j = 0; j < 10; ++j) b1[j] += bias[j], b2[j] += bias[j];
    for (bool scores : {false, true}) {
        auto row = [&](const std::vector<double>& z) {
            return scores ? from_z(z) : from_p(softmax(z));
        };
        EXPECT_REL_WITHIN(aitchison_distance(row(z1), row(z2)),
                          aitchison_distance(row(b1), row(b2)), testutil::kSpecIdentityRel);
        EXPECT_REL_WITHIN(content_distance(row(z1), row(z2)), content_distance(row(b1), row(b2)),
                          testutil::kSpecIdentityRel);
    }
}

// Temperature 1/t on the logits scales dA (and dA_perp) by 1/t.
TEST(Row, TemperatureScalesAitchison) {
    std::mt19937_64 rng(6);
    auto z1 = testutil::random_logits(rng, 10), z2 = testutil::random_logits(rng, 10);
    const double t = 2.5;
    auto s1 = z1, s2 = z2;
    for (int j = 0; j < 10; ++j) s1[j] /= t, s2[j] /= t;
    EXPECT_REL_WITHIN(aitchison_distance(from_p(softmax(s1)), from_p(softmax(s2))),
                      aitchison_distance(from_p(softmax(z1)), from_p(softmax(z2))) / t,
                      testutil::kSpecIdentityRel);
    EXPECT_REL_WITHIN(content_distance(from_z(s1), from_z(s2)),
                      content_distance(from_z(z1), from_z(z2)) / t,
                      testutil::kF64SumRel);  // d = 8 log-ratios scaled
}

// Permuting the content keys (same permutation in both rows) leaves dA_perp unchanged.
TEST(Row, ContentPermutationInvariance) {
    std::mt19937_64 rng(7);
    auto z1 = testutil::random_logits(rng, 8), z2 = testutil::random_logits(rng, 8);
    std::vector<int> perm = {0, 5, 3, 7, 1, 2, 6, 4};  // sink (0) stays
    std::vector<double> p1(8), p2(8);
    for (int j = 0; j < 8; ++j) p1[j] = z1[perm[j]], p2[j] = z2[perm[j]];
    EXPECT_REL_WITHIN(content_distance(from_p(softmax(z1)), from_p(softmax(z2))),
                      content_distance(from_p(softmax(p1)), from_p(softmax(p2))),
                      testutil::kSpecIdentityRel);
}

// Changing only the sink logit leaves dA_perp unchanged and moves only the sink term.
TEST(Row, SinkLogitMovesOnlySinkTerm) {
    std::mt19937_64 rng(8);
    auto z1 = testutil::random_logits(rng, 10), z2 = testutil::random_logits(rng, 10);
    auto w2 = z2;
    w2[0] += 5.0;
    RowQuantities a = from_p(softmax(z1)), b = from_p(softmax(z2)), c = from_p(softmax(w2));
    EXPECT_REL_WITHIN(content_distance(a, b), content_distance(a, c), testutil::kSpecIdentityRel);
    EXPECT_GT(std::abs(sink_term(a, c) - sink_term(a, b)), 1.0);
    // the sink balance moves by sqrt((D-1)/D) * 5 exactly
    // a difference of two balances of magnitude <= ~10: 10 * 2^-53 / 4.7 relative, spec tolerance
    EXPECT_REL_WITHIN(c.sink_balance - b.sink_balance, std::sqrt(9.0 / 10.0) * 5.0,
                      testutil::kSpecIdentityRel);
    expect_pythagoras(a, c);
}

// Edge rows D = 3 and D = 4096: identities still hold.
TEST(Row, SmallestAndLargeRows) {
    std::mt19937_64 rng(9);
    for (int64_t d : {3, 4096}) {
        auto z1 = testutil::random_logits(rng, d, 2.0), z2 = testutil::random_logits(rng, d, 2.0);
        z1[0] += 6;
        RowQuantities a = from_p(softmax(z1)), b = from_p(softmax(z2));
        expect_pythagoras(a, b);
        // D = 4096: both sides sum D terms of one sign (2 gamma_4096(2^-53) ~ 9e-13) and the
        // content entropy is rescaled by 1 - s: 10 kF64SumRel
        expect_entropy_split(a, 10 * testutil::kF64SumRel);
        expect_pythagoras(from_z(z1), from_z(z2));
        expect_entropy_split(from_z(z1), 10 * testutil::kF64SumRel);
    }
}

// Sink mass 1 - 1e-12 from scores: 1 - s, the entropies and the identities keep full precision.
TEST(Row, NearlyTotalSinkFromScores) {
    std::mt19937_64 rng(10);
    auto z = testutil::random_logits(rng, 16);
    double sum_c = 0;
    for (int j = 1; j < 16; ++j) sum_c += std::exp(z[j]);
    const double eps = 1e-12;
    z[0] = std::log(sum_c) + std::log((1 - eps) / eps);  // s / (1 - s) = (1 - eps) / eps
    RowQuantities r = from_z(z);
    // z[0] ~ 30 carries 30 * 2^-53 absolute rounding, i.e. ~3e-15 relative on exp(-z[0]) and so
    // on 1 - s (summed from the content parts): kF64SumRel
    EXPECT_REL_WITHIN(r.content_mass, eps, testutil::kF64SumRel);
    EXPECT_WITHIN(r.sink_mass, 1.0 - eps, testutil::kFewOps);
    // H ~ 2.9e-11 is dominated by -(1 - s) ln(1 - s) ~ 27.6 (1 - s): the relative error of 1 - s
    // times |ln(1 - s)| ~ 28, on both sides: the spec's identity tolerance
    expect_entropy_split(r, testutil::kSpecIdentityRel);
    const double hb_ref = -(1 - eps) * std::log1p(-eps) - eps * std::log(eps);
    EXPECT_REL_WITHIN(r.binary_sink_entropy, hb_ref, testutil::kSpecIdentityRel);  // as H above
    auto z2 = testutil::random_logits(rng, 16);
    expect_pythagoras(r, from_z(z2));
    // content composition is the softmax of the content logits, untouched by the sink
    auto pi_ref = softmax(std::vector<double>(z.begin() + 1, z.end()));
    for (int j = 0; j < 15; ++j) EXPECT_REL_WITHIN(r.pi[j], pi_ref[j], testutil::kF64SumRel);
}

// Exact zeros: policy error refuses the row; replace:DELTA replaces only in the log-ratios.
TEST(Row, ZeroPolicies) {
    std::vector<double> p = {0.5, 0.0, 0.25, 0.25};
    EXPECT_THROW(from_p(p), InputError);
    ZeroPolicy rep = parse_zero_policy("replace:1e-6");
    RowQuantities r = from_p(p, 0, rep);
    // replaced row: (0.5, 1e-6, 0.25, 0.25) * (1 - 1e-6) for the non-zeros
    std::vector<double> ln = {std::log(0.5 * (1 - 1e-6)), std::log(1e-6),
                              std::log(0.25 * (1 - 1e-6)), std::log(0.25 * (1 - 1e-6))};
    const double mean = (ln[0] + ln[1] + ln[2] + ln[3]) / 4;
    for (int j = 0; j < 4; ++j) EXPECT_REL_WITHIN(r.clr[j], ln[j] - mean, testutil::kF64SumRel);
    // entropies and pi use the closed row, where 0 ln 0 = 0
    const double h = -(0.5 * std::log(0.5) + 2 * 0.25 * std::log(0.25));
    EXPECT_REL_WITHIN(r.entropy, h, testutil::kF64ShortSumRel);
    EXPECT_EQ(r.pi[0], 0.0);
    EXPECT_REL_WITHIN(r.pi[1], 0.5, testutil::kFewOps);
    expect_entropy_split(r);
    expect_pythagoras(r, from_p({0.1, 0.2, 0.3, 0.4}, 0, rep));
    // a zero sink part is replaced too
    RowQuantities zs = from_p({0.0, 0.5, 0.5}, 0, rep);
    EXPECT_EQ(zs.sink_mass, 0.0);
    EXPECT_LT(zs.sink_balance, -10.0);
}

// Zero-policy and parsing errors are usage errors with the option named.
TEST(Row, ParseZeroPolicy) {
    EXPECT_EQ(parse_zero_policy("error").kind, ZeroPolicy::Kind::Error);
    EXPECT_EQ(parse_zero_policy("replace:1e-9").delta, 1e-9);
    for (const char* bad : {"replace:", "replace:0", "replace:2", "zero", "replace:1e-9x"})
        EXPECT_THROW(parse_zero_policy(bad), UsageError) << bad;
}

// Closure (10.a): a row that sums to 1 + 1e-7 gives the same quantities as the exact row.
TEST(Row, ClosureBeforeEverything) {
    std::vector<double> p = {0.4, 0.3, 0.2, 0.1}, q = p;
    for (auto& v : q) v *= 1 + 1e-7;
    RowQuantities a = from_p(p), b = from_p(q);
    for (int j = 0; j < 4; ++j)
        EXPECT_REL_WITHIN(a.p[j], b.p[j], testutil::kFewOps);  // one division by the row sum
    EXPECT_REL_WITHIN(a.entropy, b.entropy, testutil::kF64ShortSumRel);
}

// Classical metrics against hand values in both conventions.
TEST(Row, ClassicalMetricsHandValues) {
    // disjoint supports: JS = ln 2, cosine distance 1, Euclidean sqrt(2)
    std::vector<double> x = {1, 0}, y = {0, 1};
    EXPECT_WITHIN(js_divergence(x.data(), y.data(), 2), std::log(2.0), testutil::kFewOps);
    EXPECT_WITHIN(cosine_distance(x.data(), y.data(), 2), 1.0, testutil::kFewOps);
    EXPECT_WITHIN(euclidean_distance(x.data(), y.data(), 2), std::sqrt(2.0), testutil::kFewOps);
    // keep vs drop: p = (0.5, 0.25, 0.25), q = (0.8, 0.1, 0.1) have equal content pi = (.5, .5)
    RowQuantities p = from_p({0.5, 0.25, 0.25}), q = from_p({0.8, 0.1, 0.1});
    for (auto m :
         {ClassicalMetric::Cosine, ClassicalMetric::JensenShannon, ClassicalMetric::Euclidean}) {
        EXPECT_WITHIN(classical_distance(m, Convention::Drop, p, q), 0.0, testutil::kFewOps)
            << to_string(m);
        EXPECT_GT(classical_distance(m, Convention::Keep, p, q), 1e-3) << to_string(m);
    }
    EXPECT_WITHIN(classical_distance(ClassicalMetric::Euclidean, Convention::Keep, p, q),
                  std::sqrt(0.09 + 2 * 0.0225), testutil::kFewOps);
    const double js = 0.5 * (0.5 * std::log(0.5 / 0.65) + 0.5 * std::log(0.25 / 0.175) +
                             0.8 * std::log(0.8 / 0.65) + 0.2 * std::log(0.1 / 0.175));
    EXPECT_WITHIN(classical_distance(ClassicalMetric::JensenShannon, Convention::Keep, p, q), js,
                  testutil::kFewOps);
}
