// Reversal rates (spec 3, 10.f): constructed reversals, the dA_perp identity, exact counting
// against a brute-force triple loop, and sampled rates against the exact ones.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "metrics/reversal_kernels.hpp"
#include "metrics/reversal_ranks.hpp"
#include "sinkscope/metrics/reversal.hpp"
#include "sinkscope/metrics/simd.hpp"
#include "synthetic_attention.hpp"
#include "testing.hpp"

using namespace sinkscope::metrics;
namespace testutil = sinkscope::testutil;

namespace {

using Row = std::vector<double>;  // [part]; part 0 is the sink

// Spec 1 row quantities, written here from the definitions (independent of the library).
Row drop_row(const Row& p) {  // pi = p_{-s} / (1 - s)
    Row pi(p.begin() + 1, p.end());
    for (double& x : pi) x /= 1.0 - p[0];
    return pi;
}
double cosine_distance(const Row& x, const Row& y) {
    double xy = 0, xx = 0, yy = 0;
    for (size_t j = 0; j < x.size(); ++j) xy += x[j] * y[j], xx += x[j] * x[j], yy += y[j] * y[j];
    return 1.0 - xy / std::sqrt(xx * yy);
}
double js_divergence(const Row& x, const Row& y) {  // nats, 0 ln 0 = 0
    double js = 0;
    for (size_t j = 0; j < x.size(); ++j) {
        const double m = 0.5 * (x[j] + y[j]);
        if (x[j] > 0) js += 0.5 * x[j] * std::log(x[j] / m);
        if (y[j] > 0) js += 0.5 * y[j] * std::log(y[j] / m);
    }
    return js;
}
double euclidean_distance(const Row& x, const Row& y) {
    double s = 0;
    for (size_t j = 0; j < x.size(); ++j) s += (x[j] - y[j]) * (x[j] - y[j]);
    return std::sqrt(s);
}
Row clr(const Row& p) {
    Row out(p.size());
    double mean = 0;
    for (size_t j = 0; j < p.size(); ++j) mean += (out[j] = std::log(p[j]));
    mean /= static_cast<double>(p.size());
    for (double& v : out) v -= mean;
    return out;
}
double aitchison(const Row& p, const Row& q) {
    return euclidean_distance(clr(p), clr(q));
}
// dA_perp from the keep row: clr of the non-sink parts of p (the 1/(1-s) scale cancels in clr).
double aitchison_perp_keep(const Row& p, const Row& q) {
    return aitchison(Row(p.begin() + 1, p.end()), Row(q.begin() + 1, q.end()));
}

using Head = std::vector<Row>;  // [row][part]

// Spec 2 head distance: arithmetic mean of a row distance over rows, or root mean square.
template <typename F>
Eigen::MatrixXd head_distances(const std::vector<Head>& heads, F row_distance, bool rms) {
    const int n = static_cast<int>(heads.size());
    Eigen::MatrixXd d = Eigen::MatrixXd::Zero(n, n);  // [head, head]
    for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) {
            double s = 0;
            for (size_t r = 0; r < heads[static_cast<size_t>(a)].size(); ++r) {
                const double v = row_distance(heads[static_cast<size_t>(a)][r],
                                              heads[static_cast<size_t>(b)][r]);
                s += rms ? v * v : v;
            }
            s /= static_cast<double>(heads[static_cast<size_t>(a)].size());
            d(a, b) = rms ? std::sqrt(s) : s;
        }
    return d;
}

std::vector<Head> drop_heads(const std::vector<Head>& heads) {
    std::vector<Head> out;
    for (const Head& h : heads) {
        Head d;
        for (const Row& r : h) d.push_back(drop_row(r));
        out.push_back(d);
    }
    return out;
}

// Random heads: each row a softmax of Gaussian scores, with a sink logit shift ~ N(0, 9) per
// head.
std::vector<Head> random_heads(int n_heads, int n_rows, int n_parts, std::mt19937_64& rng) {
    std::normal_distribution<double> z(0.0, 1.0);
    auto draw = [&] { return z(rng); };
    std::vector<Head> heads;
    for (int h = 0; h < n_heads; ++h) {
        const testutil::SinkRow shape{.sink_boost = 3.0 * draw()};
        Head head(static_cast<size_t>(n_rows), Row(static_cast<size_t>(n_parts)));
        for (Row& p : head) testutil::sink_softmax_row(draw, shape, n_parts, p.data());
        heads.push_back(head);
    }
    return heads;
}

// The eight matrices of the head analyses plus dA_perp from the drop rows, in this order:
// cosine/js/euclidean keep+drop, dA, dA_perp (keep rows), dA_perp (drop rows).
std::vector<Eigen::MatrixXd> all_matrices(const std::vector<Head>& heads) {
    const std::vector<Head> drop = drop_heads(heads);
    return {head_distances(heads, cosine_distance, false),
            head_distances(drop, cosine_distance, false),
            head_distances(heads, js_divergence, false),
            head_distances(drop, js_divergence, false),
            head_distances(heads, euclidean_distance, false),
            head_distances(drop, euclidean_distance, false),
            head_distances(heads, aitchison, true),
            head_distances(heads, aitchison_perp_keep, true),
            head_distances(drop, aitchison, true)};
}

std::vector<const Eigen::MatrixXd*> pointers(const std::vector<Eigen::MatrixXd>& m) {
    std::vector<const Eigen::MatrixXd*> out;
    for (const auto& x : m) out.push_back(&x);
    return out;
}

// The 10.f rule, written out for the brute-force reference.
int brute_verdict(double x, double y) {
    // the spec's tie rule itself (10.f), not a test tolerance
    if (std::fabs(x - y) <= 1e-12 * std::max(std::fabs(x), std::fabs(y))) return 0;
    return x > y ? 1 : -1;
}

// A NaN or infinite distance orders nothing: every triple it enters is a tie (never compared),
// as in triple_verdict, where its diff and tol are NaN or inf.
int brute_verdict_finite(double x, double y) {
    return std::isfinite(x) && std::isfinite(y) ? brute_verdict(x, y) : 0;
}

ReversalCounts brute_force(const Eigen::MatrixXd& d1, const Eigen::MatrixXd& d2,
                           const std::vector<int>& heads) {
    ReversalCounts c;
    for (int a : heads)
        for (int b : heads)
            for (int cc : heads) {
                if (a == b || a == cc || b >= cc) continue;
                ++c.n_triples;
                ++c.n_examined;
                const int v1 = brute_verdict_finite(d1(a, b), d1(a, cc));
                const int v2 = brute_verdict_finite(d2(a, b), d2(a, cc));
                if (v1 == 0 || v2 == 0) {
                    ++c.n_tied;
                } else {
                    ++c.n_compared;
                    c.n_disagree += v1 != v2;
                }
            }
    return c;
}

// count_reversals_exact on `heads` (all n: the default, no subset) with `threads` threads equals
// the brute-force loop for every comparison.
void expect_brute_force(const std::vector<Eigen::MatrixXd>& m, const std::vector<MatrixPair>& pairs,
                        const std::vector<int>& heads, int n, int threads) {
    const bool all = static_cast<int>(heads.size()) == n;
    const auto counts =
        count_reversals_exact(pointers(m), pairs, all ? std::vector<int>{} : heads, threads);
    for (size_t q = 0; q < pairs.size(); ++q) {
        SCOPED_TRACE(testing::Message()
                     << "pair " << q << " heads " << heads.size() << " threads " << threads);
        const ReversalCounts ref = brute_force(m[static_cast<size_t>(pairs[q].first)],
                                               m[static_cast<size_t>(pairs[q].second)], heads);
        EXPECT_EQ(counts[q].n_triples, ref.n_triples);
        EXPECT_EQ(counts[q].n_tied, ref.n_tied);
        EXPECT_EQ(counts[q].n_compared, ref.n_compared);
        EXPECT_EQ(counts[q].n_disagree, ref.n_disagree);
    }
}

}  // namespace

// Two heads share content and differ in sink mass, the third shares the sink mass with mirrored
// content: keep and drop disagree on one triple for every classical metric; dA_perp never flips.
TEST(Reversal, ConstructedThreeHeadCase) {
    const Row content = {0.5, 0.3, 0.15, 0.05};
    const Row mirrored = {0.05, 0.15, 0.3, 0.5};
    auto make = [](double s, const Row& c) {
        Row p = {s};
        for (double x : c) p.push_back((1 - s) * x);
        return p;
    };
    const std::vector<Head> heads = {
        {make(0.1, content)}, {make(0.9, content)}, {make(0.1, mirrored)}};
    const auto m = all_matrices(heads);
    const auto ptr = pointers(m);
    const std::vector<MatrixPair> pairs = {{0, 1}, {2, 3}, {4, 5}, {7, 8}};
    const auto counts = count_reversals_exact(ptr, pairs);
    for (size_t q = 0; q < 3; ++q) {
        SCOPED_TRACE(q);
        EXPECT_EQ(counts[q].n_triples, 3);
        EXPECT_EQ(counts[q].n_disagree, 1);  // anchor 0: keep says head 2 nearer, drop head 1
        EXPECT_EQ(counts[q].n_tied, 1);      // anchor 2: heads 0 and 1 tie under drop
        EXPECT_EQ(counts[q].n_compared, 2);
    }
    EXPECT_EQ(counts[3].n_disagree, 0);
    EXPECT_GE(counts[3].n_compared, 1);
}

// dA_perp is the same quantity under keep and drop (spec 1), so their flip rate is exactly 0
// on random data, while the classical metrics do flip on the same heads.
TEST(Reversal, AitchisonPerpKeepVsDropNeverFlips) {
    std::mt19937_64 rng(11);
    const auto m = all_matrices(random_heads(30, 5, 8, rng));
    const auto ptr = pointers(m);
    const std::vector<MatrixPair> pairs = {{7, 8}, {0, 1}};
    const auto counts = count_reversals_exact(ptr, pairs);
    EXPECT_EQ(counts[0].n_disagree, 0);
    EXPECT_GT(counts[0].n_compared, counts[0].n_triples * 9 / 10);
    EXPECT_EQ(counts[0].rate(), 0.0);
    EXPECT_GT(counts[1].n_disagree, 0);
}

// Exact counting equals the brute-force triple loop, ties included, on 12 heads whose distances
// repeat exactly, differ by less than the 10.f tolerance, or by just more; also on a head subset
// and with two threads.
TEST(Reversal, ExactMatchesBruteForceWithTies) {
    std::mt19937_64 rng(5);
    std::uniform_int_distribution<int> base(1, 3);
    std::uniform_int_distribution<int> pick(0, 3);
    const double eps[4] = {0.0, 4e-13, -4e-13, 3e-12};  // tie, tie, tie, not a tie
    const int n = 12;
    std::vector<Eigen::MatrixXd> m;
    for (int k = 0; k < 4; ++k) {
        Eigen::MatrixXd d = Eigen::MatrixXd::Zero(n, n);
        for (int i = 0; i < n; ++i)
            for (int j = i + 1; j < n; ++j) d(i, j) = d(j, i) = base(rng) * (1.0 + eps[pick(rng)]);
        m.push_back(d);
    }
    const std::vector<MatrixPair> pairs = {{0, 1}, {1, 2}, {2, 3}, {0, 3}, {3, 3}};
    std::vector<int> all(n);
    for (int i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
    const std::vector<int> subset = {1, 3, 4, 7, 8, 11};
    for (const auto& heads : {all, subset})
        for (int threads : {1, 2}) expect_brute_force(m, pairs, heads, n, threads);
    // The tie cases must actually occur, or this test proves nothing about ties.
    EXPECT_GT(brute_force(m[0], m[1], all).n_tied, 0);
    EXPECT_GT(brute_force(m[0], m[1], all).n_disagree, 0);
}

// The vectorised counting (reversal_kernels.hpp: verdict bits, 64 candidates a word) equals the
// brute-force triple loop on 150 heads (149 candidates an anchor: three words, the last partly
// padding) with ties, zeros and NaN distances, on every SIMD target the CPU runs, for all heads
// and a subset of 70 (two words), with 1 and 3 threads.
TEST(Reversal, ExactMatchesBruteForceAcrossWordsOnEveryTarget) {
    std::mt19937_64 rng(11);
    std::uniform_int_distribution<int> base(0, 4);
    std::uniform_int_distribution<int> pick(0, 5);
    const double eps[6] = {0.0, 4e-13, -4e-13, 3e-12, -3e-12, 0.0};
    const int n = 150;
    std::vector<Eigen::MatrixXd> m;
    for (int k = 0; k < 3; ++k) {
        Eigen::MatrixXd d = Eigen::MatrixXd::Zero(n, n);
        for (int i = 0; i < n; ++i)
            for (int j = i + 1; j < n; ++j) {
                const int e = pick(rng);
                d(i, j) = d(j, i) = e == 5 && k == 1 && (i + j) % 7 == 0
                                        ? std::nan("")
                                        : base(rng) * (1.0 + eps[e]);
            }
        m.push_back(d);
    }
    const std::vector<MatrixPair> pairs = {{0, 1}, {1, 2}, {0, 2}, {2, 2}};
    std::vector<int> all(n), subset;
    for (int i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
    for (int i = 3; i < n; i += 2) subset.push_back(i);
    subset.resize(70);
    struct Guard {
        ~Guard() { simd::force_target(0); }
    } guard;
    for (const auto& t : simd::available_targets()) {
        simd::force_target(t.bits);
        SCOPED_TRACE(t.name);
        for (const auto& heads : {all, subset})
            for (int threads : {1, 3}) expect_brute_force(m, pairs, heads, n, threads);
    }
    // Ties, NaN ties and disagreements all occur.
    const ReversalCounts r01 = brute_force(m[0], m[1], all);
    EXPECT_GT(r01.n_tied, brute_force(m[0], m[2], all).n_tied);  // the NaN of matrix 1
    EXPECT_GT(brute_force(m[0], m[2], all).n_tied, 0);
    EXPECT_GT(r01.n_disagree, 0);
}

// Counting one anchor by ranks (reversal_ranks.hpp) equals the pair loop (count_anchor) and the
// brute-force rule on rows built to break it: clusters of values whose gaps are exact ties, 10.f
// ties, just past the tolerance and near the window's stop (2e-12 relative), negative values and
// both zeros, values below the scan floor (1e-300), huge values whose differences overflow,
// +-inf and NaN (every pair with a non-finite value is a tie), for 1 to 200 candidates, with a
// comparison of a matrix with itself, and with an unlimited tie budget (so that the ranks count
// every tie-heavy row). A budget too small returns false and adds nothing.
TEST(Reversal, RankedAnchorCountEqualsPairLoop) {
    namespace k = sinkscope::metrics::kernels;
    const double inf = std::numeric_limits<double>::infinity();
    const double special[] = {0.0,    -0.0, 1e-300, 1.0000000000004e-300, 3e-300, 1e308,
                              -1e308, inf,  -inf,   std::nan("")};
    const double eps[] = {0.0, 4e-13, -4e-13, 1e-12, 1.5e-12, -1.9e-12, 2e-12, 2.1e-12, 3e-12};
    std::mt19937_64 rng(17);
    int64_t tie_discordant_seen = 0;
    for (const int64_t m : {1, 2, 3, 63, 64, 65, 200}) {
        for (int kind = 0; kind < 3; ++kind) {
            SCOPED_TRACE(testing::Message() << "m " << m << " kind " << kind);
            const int64_t n_used = 3, w = k::kVerdictWord;
            const int64_t stride = (m + w - 1) / w * w;
            std::vector<double> x(static_cast<size_t>(n_used * stride), std::nan(""));
            std::uniform_real_distribution<double> unit(0.0, 1.0);
            std::uniform_int_distribution<int> base(-2, 3), pick_eps(0, 8), pick_special(0, 9),
                coin(0, 9);
            for (int64_t u = 0; u < n_used; ++u)
                for (int64_t c = 0; c < m; ++c) {
                    double v = 0;
                    if (kind == 0) {
                        v = unit(rng);  // continuous: almost no ties
                    } else {
                        v = base(rng) * (1.0 + eps[pick_eps(rng)]);  // clusters of near-ties
                        if (kind == 2 && coin(rng) == 0) v = special[pick_special(rng)];
                    }
                    x[static_cast<size_t>(u * stride + c)] = v;
                }
            const k::AnchorRows rows{x.data(), stride, m, n_used};
            const std::array<int, 2> slots[] = {{0, 1}, {1, 2}, {2, 0}, {1, 1}};
            const int64_t n_slots = 4;
            std::vector<int64_t> cmp_ranked(n_slots, 0), dis_ranked(n_slots, 0);
            std::vector<int64_t> cmp_loop(n_slots, 0), dis_loop(n_slots, 0);
            k::RankedAnchor ranked;
            ASSERT_TRUE(ranked.count(rows, slots, n_slots, cmp_ranked.data(), dis_ranked.data(),
                                     std::numeric_limits<int64_t>::max()));
            std::vector<uint64_t> words(static_cast<size_t>(2 * n_used * stride / w));
            k::count_anchor(rows, slots, n_slots, words.data(), cmp_loop.data(), dis_loop.data());
            for (int64_t q = 0; q < n_slots; ++q) {
                SCOPED_TRACE(q);
                const double* xu = x.data() + slots[q][0] * stride;
                const double* xv = x.data() + slots[q][1] * stride;
                int64_t compared = 0, disagree = 0;
                for (int64_t b = 0; b < m; ++b)
                    for (int64_t c = b + 1; c < m; ++c) {
                        const int vu = brute_verdict_finite(xu[b], xu[c]);
                        const int vv = brute_verdict_finite(xv[b], xv[c]);
                        if (vu == 0 || vv == 0) {
                            // a tie the ranks must correct: finite, ordered oppositely
                            tie_discordant_seen += std::isfinite(xu[b] + xu[c] + xv[b] + xv[c]) &&
                                                   (xu[b] - xu[c]) * (xv[b] - xv[c]) < 0;
                            continue;
                        }
                        ++compared;
                        disagree += vu != vv;
                    }
                EXPECT_EQ(cmp_ranked[static_cast<size_t>(q)], compared);
                EXPECT_EQ(dis_ranked[static_cast<size_t>(q)], disagree);
                EXPECT_EQ(cmp_loop[static_cast<size_t>(q)], compared);
                EXPECT_EQ(dis_loop[static_cast<size_t>(q)], disagree);
            }
            if (kind > 0 && m >= 63) {  // tie-heavy rows overrun a small budget: nothing added
                std::vector<int64_t> cmp(n_slots, 7), dis(n_slots, 7);
                EXPECT_FALSE(ranked.count(rows, slots, n_slots, cmp.data(), dis.data(), m));
                EXPECT_EQ(cmp, std::vector<int64_t>(n_slots, 7));
                EXPECT_EQ(dis, std::vector<int64_t>(n_slots, 7));
            }
        }
    }
    EXPECT_GT(tie_discordant_seen, 0);  // the correction of ties was exercised
}

// Sampled rates on random heads agree with the exact rate within their 95% interval, at a small
// sampling fraction (5,000 of 31,200 triples) and a large one (400 of 660, where the finite
// population correction narrows the interval well below Wilson's): over 40 seeds x 7
// comparisons the interval covers the exact rate about 95% of the time (>= 90% required; 3.8
// standard errors below 95%), and the mean sampled rate is unbiased.
TEST(Reversal, SampledAgreesWithExactWithinInterval) {
    const std::vector<MatrixPair> pairs = {{0, 1}, {2, 3}, {4, 5}, {0, 7}, {2, 7}, {4, 7}, {6, 7}};
    for (const auto& [n_heads, n_samples] : {std::pair{40, 5000}, std::pair{12, 400}}) {
        std::mt19937_64 rng(3);
        const auto m = all_matrices(random_heads(n_heads, 4, 10, rng));
        const auto ptr = pointers(m);
        const auto exact = count_reversals_exact(ptr, pairs);
        const int n_seeds = 40;
        const double f = static_cast<double>(n_samples) / count_triples(n_heads);
        int covered = 0;
        std::vector<double> mean_rate(pairs.size(), 0.0);
        for (int seed = 0; seed < n_seeds; ++seed) {
            const auto sampled = count_reversals_sampled(ptr, pairs, n_samples, 1000 + seed);
            for (size_t q = 0; q < pairs.size(); ++q) {
                ASSERT_EQ(sampled[q].n_examined, n_samples);
                ASSERT_EQ(sampled[q].n_triples, count_triples(n_heads));
                const RateInterval ci = sampled_rate_interval(sampled[q]);
                const RateInterval plain =
                    wilson_interval(sampled[q].n_disagree, sampled[q].n_compared);
                ASSERT_LE(ci.hi - ci.lo, plain.hi - plain.lo);          // the correction narrows it
                ASSERT_LT(ci.hi - ci.lo, n_heads == 40 ? 0.05 : 0.12);  // informative
                covered += ci.lo <= exact[q].rate() && exact[q].rate() <= ci.hi;
                mean_rate[q] += sampled[q].rate() / n_seeds;
            }
        }
        EXPECT_GE(covered, static_cast<int>(0.90 * n_seeds * static_cast<double>(pairs.size())))
            << n_heads << " heads";
        for (size_t q = 0; q < pairs.size(); ++q) {
            const double p = exact[q].rate();
            // without replacement the variance carries the correction (1 - f) (up to N/(N-1))
            const double se = std::sqrt(p * (1 - p) * (1 - f) / (n_samples * n_seeds));
            // statistical, not rounding: 4 standard errors (two-sided p ~ 6e-5 per comparison)
            EXPECT_WITHIN(mean_rate[q], p, 4 * se + 1e-12) << "comparison " << q;
        }
    }
}

// Sampling is without replacement: every drawn triple is valid and distinct, in increasing
// order; a sample as large as the population is every triple once; each triple is drawn with
// probability n / N (checked over 3,000 seeds: each of the 60 triples of 6 heads is drawn
// 500 times in expectation, standard deviation 20.4; 5 of them allowed).
TEST(Reversal, SamplesTriplesWithoutReplacement) {
    for (int m : {3, 4, 6, 12}) {
        const int64_t n_triples = count_triples(m);
        for (int64_t n : {int64_t{1}, n_triples / 2, n_triples, n_triples + 7}) {
            const auto t = sample_triples(m, n, 11);
            ASSERT_EQ(std::ssize(t), std::min(n, n_triples));
            std::set<std::array<int, 3>> seen;
            for (const auto& x : t) {
                EXPECT_TRUE(x[0] >= 0 && x[0] < m && x[1] >= 0 && x[2] < m && x[1] < x[2]);
                EXPECT_TRUE(x[0] != x[1] && x[0] != x[2]);
                EXPECT_TRUE(seen.insert(x).second) << "triple drawn twice";
            }
            if (n >= n_triples) {  // every triple, by brute force
                std::set<std::array<int, 3>> all;
                for (int a = 0; a < m; ++a)
                    for (int b = 0; b < m; ++b)
                        for (int c = b + 1; c < m; ++c)
                            if (a != b && a != c) all.insert({a, b, c});
                EXPECT_EQ(seen, all);
            }
        }
    }
    std::map<std::array<int, 3>, int> drawn;
    const int n_seeds = 3000;
    for (int seed = 0; seed < n_seeds; ++seed)
        for (const auto& x : sample_triples(6, 10, static_cast<uint64_t>(seed))) ++drawn[x];
    ASSERT_EQ(drawn.size(), 60u);
    const double expect = n_seeds * 10.0 / 60.0, sd = std::sqrt(expect * (1 - 10.0 / 60.0));
    for (const auto& [x, k] : drawn) EXPECT_WITHIN(k, expect, 5 * sd);
    EXPECT_EQ(sample_triples(12, 100, 5), sample_triples(12, 100, 5));  // seeded
    EXPECT_NE(sample_triples(12, 100, 5), sample_triples(12, 100, 6));
}

// The sampled counts are the brute-force counts over the triples sample_triples draws, on a head
// subset too; a sample of every triple gives the exact counts and an interval equal to the rate.
TEST(Reversal, SampledCountsAreThoseOfTheDrawnTriples) {
    std::mt19937_64 rng(8);
    const auto m = all_matrices(random_heads(14, 4, 10, rng));
    const auto ptr = pointers(m);
    const std::vector<MatrixPair> pairs = {{0, 1}, {2, 7}, {6, 7}};
    const std::vector<int> heads = {1, 3, 4, 6, 8, 9, 13};
    const auto sampled = count_reversals_sampled(ptr, pairs, 50, 21, heads);
    const auto drawn = sample_triples(std::ssize(heads), 50, 21);
    for (size_t q = 0; q < pairs.size(); ++q) {
        int64_t compared = 0, disagree = 0;
        for (const auto& x : drawn) {
            const int a = heads[static_cast<size_t>(x[0])], b = heads[static_cast<size_t>(x[1])],
                      c = heads[static_cast<size_t>(x[2])];
            const auto& d1 = *ptr[static_cast<size_t>(pairs[q].first)];
            const auto& d2 = *ptr[static_cast<size_t>(pairs[q].second)];
            const int v1 = triple_verdict(d1(a, b), d1(a, c));
            const int v2 = triple_verdict(d2(a, b), d2(a, c));
            if (v1 == 0 || v2 == 0) continue;
            ++compared;
            disagree += v1 != v2;
        }
        EXPECT_EQ(sampled[q].n_examined, 50);
        EXPECT_EQ(sampled[q].n_compared, compared);
        EXPECT_EQ(sampled[q].n_disagree, disagree);
    }
    const auto all = count_reversals_sampled(ptr, pairs, 1000000, 3);
    const auto exact = count_reversals_exact(ptr, pairs);
    for (size_t q = 0; q < pairs.size(); ++q) {
        EXPECT_EQ(all[q].n_examined, count_triples(14));
        EXPECT_EQ(all[q].n_compared, exact[q].n_compared);
        EXPECT_EQ(all[q].n_disagree, exact[q].n_disagree);
        const RateInterval ci = sampled_rate_interval(all[q]);
        EXPECT_EQ(ci.lo, exact[q].rate());
        EXPECT_EQ(ci.hi, exact[q].rate());
    }
}

// The 10.f tie rule at its edges: exact equality and relative gaps <= 1e-12 tie, larger do not.
TEST(Reversal, TieRule) {
    EXPECT_EQ(triple_verdict(0.0, 0.0), 0);
    EXPECT_EQ(triple_verdict(1.0, 1.0 + 5e-13), 0);
    EXPECT_EQ(triple_verdict(1.0 + 5e-13, 1.0), 0);
    EXPECT_EQ(triple_verdict(1.0, 1.0 + 2e-12), -1);
    EXPECT_EQ(triple_verdict(1.0 + 2e-12, 1.0), 1);
    EXPECT_EQ(triple_verdict(0.0, 1e-300), -1);
}

// Wilson interval against the closed form for 0/10 (upper z^2 / (n + z^2) = 0.2775 for the 95%
// z) and symmetry k <-> n - k.
TEST(Reversal, WilsonInterval) {
    const RateInterval zero = wilson_interval(0, 10);
    EXPECT_EQ(zero.lo, 0.0);
    const double z2 = 1.959963984540054 * 1.959963984540054;
    // the library's general formula (~8 operations without cancellation and a sqrt: 8 * 2^-53
    // ~ 9e-16 relative) vs this closed form
    EXPECT_REL_WITHIN(zero.hi, z2 / (10 + z2), 4 * testutil::kFewOps);
    const RateInterval a = wilson_interval(3, 20);
    const RateInterval b = wilson_interval(17, 20);
    EXPECT_WITHIN(a.lo, 1 - b.hi, testutil::kFewOps);
    EXPECT_WITHIN(a.hi, 1 - b.lo, testutil::kFewOps);
    EXPECT_TRUE(std::isnan(wilson_interval(0, 0).lo));
}

// Triple count n (n-1) (n-2) / 2: 12 heads give 660, 1,024 heads 535,299,072.
TEST(Reversal, TripleCount) {
    EXPECT_EQ(count_triples(12), 660);
    EXPECT_EQ(count_triples(1024), 535299072);
    EXPECT_EQ(count_triples(2), 0);
}
