// Head-level aggregation (spec 2, 10.d-10.g): Gram-based matrices against a brute-force per-row
// loop, identities at head level, merge == single pass, row exclusion bookkeeping.
#include <gtest/gtest.h>

#include <cmath>

#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/head.hpp"
#include "synthetic_attention.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::metrics;
using testutil::random_input;
using testutil::rel_err;

namespace {

// Per-row reference: every pair of heads, every usable row, with the row-level functions.
std::map<std::string, Eigen::MatrixXd> brute_force(const std::vector<AttentionInput>& xs,
                                                   int64_t sink, int64_t min_parts) {
    const int64_t n = xs[0].n_layers * xs[0].n_heads;
    std::map<std::string, Eigen::MatrixXd> sum;
    for (const char* name : kDistanceNames) sum[name] = Eigen::MatrixXd::Zero(n, n);
    int64_t rows = 0;
    for (const auto& x : xs) {
        for (int64_t i = 0; i < x.length; ++i) {
            const int64_t kb = x.key_begin(i), d = x.n_visible(i);
            if (d < min_parts || sink < kb || sink >= x.key_end(i)) continue;
            std::vector<RowQuantities> r;
            for (int64_t l = 0; l < x.n_layers; ++l)
                for (int64_t h = 0; h < x.n_heads; ++h)
                    r.push_back(
                        x.has_scores()
                            ? row_from_scores(x.score_row(l, h, i) + kb, d, sink - kb)
                            : row_from_probabilities(x.row(l, h, i) + kb, d, sink - kb, {}));
            ++rows;
            for (int64_t a = 0; a < n; ++a)
                for (int64_t b = 0; b < n; ++b) {
                    sum["dA"](a, b) += std::pow(aitchison_distance(r[a], r[b]), 2);
                    sum["dA_perp"](a, b) += std::pow(content_distance(r[a], r[b]), 2);
                    sum["sink_term"](a, b) += std::pow(sink_term(r[a], r[b]), 2);
                    for (auto m : {ClassicalMetric::Cosine, ClassicalMetric::JensenShannon,
                                   ClassicalMetric::Euclidean})
                        for (auto c : {Convention::Keep, Convention::Drop})
                            sum[std::string(to_string(m)) + "_" + to_string(c)](a, b) +=
                                classical_distance(m, c, r[a], r[b]);
                }
        }
    }
    for (auto& [name, m] : sum) {
        m /= double(rows);
        if (name == "dA" || name == "dA_perp" || name == "sink_term") m = m.cwiseSqrt();
    }
    return sum;
}

void expect_matrices_near(const std::map<std::string, Eigen::MatrixXd>& ref, const HeadResults& r,
                          double tol) {
    for (const char* name : kDistanceNames) {
        const auto& a = ref.at(name);
        const auto& b = r.distances.at(name);
        ASSERT_EQ(b.rows(), a.rows()) << name;
        for (int64_t i = 0; i < a.rows(); ++i)
            for (int64_t j = 0; j < a.cols(); ++j)
                ASSERT_WITHIN(b(i, j), a(i, j), tol * std::max(1.0, std::abs(a(i, j))))
                    << name << " (" << i << ", " << j << ")";
    }
}

HeadResults run(const std::vector<AttentionInput>& xs, HeadOptions o = {}) {
    HeadAccumulator acc(xs[0].n_layers, xs[0].n_heads, o);
    for (const auto& x : xs) acc.add(x);
    return acc.finish();
}

}  // namespace

// Gram-matrix head distances equal the brute-force per-row loop (probabilities, causal rows).
TEST(Head, MatricesMatchBruteForceFromProbabilities) {
    std::vector<AttentionInput> xs = {random_input(1, 2, 3, 9, Masking::Causal, false),
                                      random_input(2, 2, 3, 9, Masking::Causal, false)};
    expect_matrices_near(brute_force(xs, 0, 3), run(xs), testutil::kGramDistanceRel);
}

// Same with scores, bidirectional rows and a sink that is not the first key.
TEST(Head, MatricesMatchBruteForceFromScores) {
    std::vector<AttentionInput> xs = {random_input(3, 3, 2, 7, Masking::Bidirectional, true, 2)};
    HeadOptions o;
    o.sink = parse_sink_policy("2");
    expect_matrices_near(brute_force(xs, 2, 3), run(xs, o), testutil::kGramDistanceRel);
}

// D_A^2 = D_perp^2 + D_b^2 holds exactly at head level (root-mean-square aggregation).
TEST(Head, PythagoreanIdentityAtHeadLevel) {
    HeadResults r = run({random_input(4, 2, 4, 12, Masking::Causal, true)});
    const auto &a = r.distances.at("dA"), &p = r.distances.at("dA_perp"),
               &s = r.distances.at("sink_term");
    for (int64_t i = 0; i < a.rows(); ++i)
        for (int64_t j = 0; j < i; ++j)
            EXPECT_REL_WITHIN(a(i, j) * a(i, j), p(i, j) * p(i, j) + s(i, j) * s(i, j),
                              testutil::kSpecIdentityRel);
}

// Dispersion computed per row equals (1/(2H^2)) sum of squared head distances (spec 2), per
// layer and over the whole model, and rho = V_b / (V_b + C_perp).
TEST(Head, DispersionMatchesDistanceMatrices) {
    HeadResults r = run({random_input(5, 3, 4, 10, Masking::Causal, false),
                         random_input(6, 3, 4, 10, Masking::Causal, false)});
    const auto &p = r.distances.at("dA_perp"), &s = r.distances.at("sink_term");
    auto check = [&](const Dispersion& d, int64_t first, int64_t m) {
        const double c = p.block(first, first, m, m).squaredNorm() / (2.0 * m * m);
        const double v = s.block(first, first, m, m).squaredNorm() / (2.0 * m * m);
        // row-wise sums vs the distance matrices' Frobenius norms: the same quantities summed in
        // another order, through squares of Gram distances (kGramDistanceRel on D, so twice that
        // on D^2 would bound it; the spec's identity tolerance is tighter and holds)
        EXPECT_REL_WITHIN(d.c_perp, c, testutil::kSpecIdentityRel);
        EXPECT_REL_WITHIN(d.v_b, v, testutil::kSpecIdentityRel);
        EXPECT_REL_WITHIN(d.rho, v / (v + c), testutil::kSpecIdentityRel);
    };
    for (int64_t l = 0; l < 3; ++l) check(r.layers[l], l * 4, 4);
    check(r.model, 0, 12);
}

// Merging two accumulators gives the same results as one pass over both inputs.
TEST(Head, MergeEqualsSinglePass) {
    auto x1 = random_input(7, 2, 3, 8, Masking::Causal, false);
    auto x2 = random_input(8, 2, 3, 8, Masking::Causal, false);
    HeadAccumulator one(2, 3), a(2, 3), b(2, 3);
    one.add(x1);
    one.add(x2);
    a.add(x1);
    b.add(x2);
    a.merge(b);
    HeadResults r1 = one.finish(), r2 = a.finish();
    for (const char* name : kDistanceNames)
        // merged accumulators: the same float64 sums in another order (distances <= ~10)
        EXPECT_ERROR_WITHIN((r1.distances.at(name) - r2.distances.at(name)).cwiseAbs().maxCoeff(),
                            testutil::kF64SumRel)
            << name;
    for (size_t h = 0; h < r1.means.size(); ++h) {
        EXPECT_REL_WITHIN(r1.means[h].entropy, r2.means[h].entropy, testutil::kF64ShortSumRel);
        EXPECT_EQ(r1.means[h].n_rows, r2.means[h].n_rows);
    }
    EXPECT_EQ(r1.counts.rows_total, r2.counts.rows_total);
    EXPECT_REL_WITHIN(r1.model.rho, r2.model.rho, testutil::kF64SumRel);
    HeadAccumulator other(3, 2);
    EXPECT_THROW(a.merge(other), UsageError);
}

// Head means are the means of the row quantities over the head's rows; the content
// concentration is written here from its definition, ||clr(pi)||_2 with pi = p_{-s} / (1 - s).
TEST(Head, MeansAreRowMeans) {
    auto x = random_input(9, 1, 2, 6, Masking::Causal, false);
    HeadResults r = run({x});
    for (int64_t h = 0; h < 2; ++h) {
        double s = 0, e = 0, cc = 0;
        int64_t rows = 0;
        for (int64_t i = 2; i < 6; ++i) {  // rows 0 and 1 have D < 3
            auto q = row_from_probabilities(x.row(0, h, i), i + 1, 0, {});
            s += q.sink_mass, e += q.entropy, ++rows;
            const double* p = x.row(0, h, i);
            std::vector<double> log_pi;
            double mean = 0;
            for (int64_t j = 1; j <= i; ++j) {
                log_pi.push_back(std::log(p[j] / (1.0 - p[0])));
                mean += log_pi.back() / static_cast<double>(i);
            }
            double sq = 0;
            for (double v : log_pi) sq += (v - mean) * (v - mean);
            cc += std::sqrt(sq);
        }
        EXPECT_EQ(r.means[h].n_rows, rows);
        EXPECT_REL_WITHIN(r.means[h].sink_mass, s / rows, testutil::kF64ShortSumRel);
        EXPECT_REL_WITHIN(r.means[h].entropy, e / rows, testutil::kF64ShortSumRel);
        // logs of ratios of O(1) numbers, a short sum, a sqrt: a few ulps of the log values
        // (|ln pi| <= ~10) per term, in the same order
        EXPECT_REL_WITHIN(r.means[h].content_concentration, cc / rows, testutil::kF64ShortSumRel);
    }
}

// Content concentration does not see the sink: heads whose rows differ only in sink mass have
// the same concentration; uniform content has none (exactly, from scores: clr of equal scores).
TEST(Head, ContentConcentrationIgnoresTheSink) {
    auto x = random_input(12, 1, 3, 7, Masking::Causal, true);
    for (int64_t i = 0; i < 7; ++i) {
        // head 1 = head 0 with a larger sink score; head 2 has equal content scores
        double* z0 = x.scores.data() + x.offset(0, 0, i);
        double* z1 = x.scores.data() + x.offset(0, 1, i);
        double* z2 = x.scores.data() + x.offset(0, 2, i);
        for (int64_t j = 0; j <= i; ++j) {
            z1[j] = j == 0 ? z0[j] + 2.5 : z0[j];
            z2[j] = j == 0 ? 1.5 : -0.5;  // -0.5 k / k is -0.5 exactly
        }
        for (int64_t h : {1, 2}) {
            const double* z = x.scores.data() + x.offset(0, h, i);
            double total = 0;
            for (int64_t j = 0; j <= i; ++j) total += std::exp(z[j]);
            for (int64_t j = 0; j <= i; ++j)
                x.pattern[x.offset(0, h, i) + static_cast<size_t>(j)] = std::exp(z[j]) / total;
        }
    }
    HeadResults r = run({x});
    ASSERT_GT(r.means[0].content_concentration, 0.1);
    // the same clr(pi) from scores Z_j - mean Z over the content parts: identical operations
    EXPECT_EQ(r.means[1].content_concentration, r.means[0].content_concentration);
    EXPECT_NE(r.means[1].sink_mass, r.means[0].sink_mass);
    EXPECT_EQ(r.means[2].content_concentration, 0.0);
}

// Causal rows below min_parts are excluded and counted; the rest are used.
TEST(Head, MinPartsExclusionCounts) {
    auto x = random_input(10, 2, 2, 6, Masking::Causal, false);
    HeadOptions o;
    o.min_parts = 4;
    HeadResults r = run({x}, o);
    EXPECT_EQ(r.counts.rows_total, 6 * 4);
    EXPECT_EQ(r.counts.rows_excluded, 3 * 4);  // D = 1, 2, 3
    EXPECT_EQ(r.counts.rows_used, 3 * 4);
    EXPECT_EQ(r.means[0].n_rows, 3);
    o.min_parts = 1;
    EXPECT_THROW(HeadAccumulator(2, 2, o), UsageError);
}

// A fixed sink beyond early causal rows, and a sliding window that hides key 0, are counted as
// sink_not_visible (10.e).
TEST(Head, SinkNotVisibleCounts) {
    HeadOptions o;
    o.sink = parse_sink_policy("3");
    HeadResults r = run({random_input(11, 1, 2, 8, Masking::Causal, false, 3)}, o);
    EXPECT_EQ(r.counts.sink_not_visible, 1 * 2);  // row 2 (rows 0, 1 have D < 3)
    EXPECT_EQ(r.counts.rows_excluded, 2 * 2);
    EXPECT_EQ(r.counts.rows_used, 5 * 2);
    HeadResults w = run({random_input(12, 1, 2, 8, Masking::Causal, false, 0, 4)});
    EXPECT_EQ(w.counts.sink_not_visible, 4 * 2);  // rows 4..7 no longer see key 0
    EXPECT_EQ(w.means[0].n_rows, 2);              // rows 2, 3
}

// Layer scope compares only heads within a layer; those pairs equal the model-scope values
// when every layer shares the sink.
TEST(Head, LayerScopeBlocks) {
    auto x = random_input(13, 2, 3, 7, Masking::Causal, false);
    HeadOptions o;
    o.scope = Scope::Layer;
    HeadResults lay = run({x}, o), mod = run({x});
    for (const char* name : kDistanceNames) {
        const auto &a = lay.distances.at(name), &b = mod.distances.at(name);
        for (int64_t i = 0; i < 6; ++i)
            for (int64_t j = 0; j < 6; ++j) {
                if (i / 3 == j / 3)
                    EXPECT_WITHIN(a(i, j), b(i, j),
                                  testutil::kGramDistanceRel * std::max(1.0, b(i, j)))
                        << name;  // Gram matrices of other sizes
                else
                    EXPECT_TRUE(std::isnan(a(i, j))) << name;
            }
    }
}

// An exact zero under --zeros error names the input, layer, head, query and key.
TEST(Head, ZeroErrorNamesIndex) {
    auto x = random_input(14, 2, 2, 6, Masking::Causal, false);
    double* row = &x.pattern[x.offset(1, 0, 3)];
    row[0] += row[2];
    row[2] = 0.0;
    HeadOptions o;
    o.origin = "A.npy";
    HeadAccumulator acc(2, 2, o);
    try {
        acc.add(x, 5);
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(
                      "A.npy: exact zero at visible entry (n, l, h, i, j) = (5, 1, 0, 3, 2)"),
                  std::string::npos)
            << e.what();
    }
    o.zeros = parse_zero_policy("replace:1e-9");
    HeadAccumulator ok(2, 2, o);
    EXPECT_NO_THROW(ok.add(x));
}

// Argmax with per-layer sinks: model-scope matrices use the model-wide sink, per-layer
// dispersion the layer's own (10.d).
TEST(Head, ArgmaxSinksPerLayerAndModel) {
    auto x = random_input(15, 2, 2, 6, Masking::Bidirectional, false);
    // layer 0 attends mostly to key 4, layer 1 a bit less to key 1
    for (int64_t l = 0; l < 2; ++l)
        for (int64_t h = 0; h < 2; ++h)
            for (int64_t i = 0; i < 6; ++i) {
                double* r = &x.pattern[x.offset(l, h, i)];
                r[l == 0 ? 4 : 1] += l == 0 ? 5.0 : 3.0;
                double s = 0;
                for (int64_t j = 0; j < 6; ++j) s += r[j];
                for (int64_t j = 0; j < 6; ++j) r[j] /= s;
            }
    HeadOptions o;
    o.sink = parse_sink_policy("argmax");
    HeadAccumulator acc(2, 2, o);
    SinkPositions s = acc.add(x);
    EXPECT_EQ(s.per_layer, (std::vector<int64_t>{4, 1}));
    EXPECT_EQ(s.model, 4);
    HeadResults r = acc.finish();
    // layer 1 means use sink 1: its sink mass is the mean of A[1, h, i, 1]
    double mass = 0;
    for (int64_t i = 0; i < 6; ++i) mass += x.pattern[x.offset(1, 0, i) + 1];
    EXPECT_REL_WITHIN(r.means[2].sink_mass, mass / 6, testutil::kF64ShortSumRel);
    // model-scope sink term of heads (1,0) vs (1,1) uses sink 4
    HeadOptions fixed;
    fixed.sink = parse_sink_policy("4");
    HeadResults f = run({x}, fixed);
    EXPECT_REL_WITHIN(r.distances.at("sink_term")(2, 3), f.distances.at("sink_term")(2, 3),
                      testutil::kF64SumRel);
    EXPECT_REL_WITHIN(r.model.rho, f.model.rho, testutil::kF64SumRel);
}

// The pairwise loops give bit-identical matrices for any thread count.
TEST(Head, ThreadCountDoesNotChangeResults) {
    auto x = random_input(16, 2, 24, 6, Masking::Causal, false);
    HeadOptions one, three;
    three.n_threads = 3;
    HeadResults a = run({x}, one), b = run({x}, three);
    for (const char* name : kDistanceNames)
        EXPECT_EQ((a.distances.at(name) - b.distances.at(name)).cwiseAbs().maxCoeff(), 0.0) << name;
}

namespace {
// Bidirectional input whose argmax sinks are key `s0` in layer 0 and `s1` in layer 1.
AttentionInput two_sink_input(uint64_t seed, int64_t s0, int64_t s1) {
    auto x = random_input(seed, 2, 2, 6, Masking::Bidirectional, false);
    for (int64_t l = 0; l < 2; ++l)
        for (int64_t h = 0; h < 2; ++h)
            for (int64_t i = 0; i < 6; ++i) {
                double* r = &x.pattern[x.offset(l, h, i)];
                r[l == 0 ? s0 : s1] += l == 0 ? 5.0 : 3.0;
                double s = 0;
                for (int64_t j = 0; j < 6; ++j) s += r[j];
                for (int64_t j = 0; j < 6; ++j) r[j] /= s;
            }
    return x;
}
}  // namespace

// 10.d: in model scope with per-layer sinks that differ from the model-wide one, the
// within-layer distances of each layer are also given with the layer's own sink
// (layer_distances; cross-layer NaN): equal to the brute-force loop with that sink, and to
// what layer scope computes (also when an earlier input had shared sinks: the groups are then
// seeded from the model group). They survive save/load bit for bit and merge like one pass.
TEST(Head, LayerSinkDistancesInModelScope) {
    const auto x = two_sink_input(15, 4, 1);  // sinks {4, 1}, model 4
    const auto y = two_sink_input(16, 4, 4);  // sinks {4, 4}: shared
    HeadOptions o;
    o.sink = parse_sink_policy("argmax");
    HeadAccumulator only_y(2, 2, o);
    only_y.add(y);
    EXPECT_TRUE(only_y.finish().layer_distances.empty());
    const HeadResults rx = run({x}, o);
    ASSERT_FALSE(rx.layer_distances.empty());
    const auto ref0 = brute_force({x}, 4, 3), ref1 = brute_force({x}, 1, 3);
    for (const char* name : kDistanceNames) {
        const Eigen::MatrixXd& d = rx.layer_distances.at(name);
        for (int64_t a = 0; a < 4; ++a)
            for (int64_t b = 0; b < 4; ++b) {
                if (a / 2 != b / 2) {
                    EXPECT_TRUE(std::isnan(d(a, b))) << name;
                    continue;
                }
                // Gram-matrix distances against the per-row loop (the bound of brute_force above)
                const double ref = (a / 2 == 0 ? ref0 : ref1).at(name)(a, b);
                EXPECT_WITHIN(d(a, b), ref,
                              testutil::kGramDistanceRel * std::max(1.0, std::abs(ref)))
                    << name;
            }
    }
    // y then x, model scope vs layer scope (the bound of LayerScopeBlocks).
    HeadOptions lo = o;
    lo.scope = Scope::Layer;
    const HeadResults both = run({y, x}, o), layer = run({y, x}, lo);
    for (const char* name : kDistanceNames) {
        const Eigen::MatrixXd &a = both.layer_distances.at(name), &b = layer.distances.at(name);
        for (int64_t i = 0; i < 4; ++i)
            for (int64_t j = 0; j < 4; ++j)
                if (i / 2 == j / 2) {
                    // Gram matrices of other sizes (the bound of LayerScopeBlocks)
                    EXPECT_WITHIN(a(i, j), b(i, j),
                                  testutil::kGramDistanceRel * std::max(1.0, b(i, j)))
                        << name;
                }
    }
    // save/load: bit for bit
    HeadAccumulator acc(2, 2, o);
    acc.add(y);
    acc.add(x);
    BinaryWriter w;
    acc.save(w);
    HeadAccumulator loaded(2, 2, o);
    BinaryReader r(w.bytes(), "state");
    loaded.load(r);
    const HeadResults saved = loaded.finish();
    for (const char* name : kDistanceNames) {
        const Eigen::MatrixXd &a = saved.layer_distances.at(name),
                              &b = both.layer_distances.at(name);
        EXPECT_TRUE(((a.array() == b.array()) || (a.array().isNaN() && b.array().isNaN())).all())
            << name;
    }
    // merge: a shard without per-layer-sink groups (y) with one that has them (x)
    HeadAccumulator sy(2, 2, o), sx(2, 2, o);
    sy.add(y);
    sx.add(x);
    sy.merge(sx);
    const HeadResults merged = sy.finish();
    for (const char* name : kDistanceNames) {
        const Eigen::MatrixXd &a = merged.layer_distances.at(name),
                              &b = both.layer_distances.at(name);
        for (int64_t i = 0; i < 4; ++i)
            for (int64_t j = 0; j < 4; ++j)
                if (i / 2 == j / 2) {  // sums in another order (the bound of MergeEqualsSinglePass)
                    EXPECT_WITHIN(a(i, j), b(i, j), testutil::kF64SumRel) << name;
                }
    }
}
