// Tests of metrics/pruning (spec section 5): the greedy order on a hand-worked example, against a
// direct transcription of the definition (every redundancy recomputed at every step) on random
// matrices with ties and missing pairs, the sparsity -> head count rule and the random baseline.
#include "sinkscope/metrics/pruning.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/random.hpp"

namespace sinkscope::metrics {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Heads at points of a line, D = |x_i - x_j|.
Eigen::MatrixXd line_distances(const std::vector<double>& x) {
    const auto n = static_cast<Eigen::Index>(x.size());
    Eigen::MatrixXd d(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < n; ++j) d(i, j) = std::abs(x[size_t(i)] - x[size_t(j)]);
    return d;
}

// Points 0, 1, 3, 7. Redundancies 1, 1, 2, 4: heads 0 and 1 tie, the lower index goes first.
// Survivors 1, 3, 7: 2, 2, 4 -> head 1. Survivors 3, 7: 4, 4 -> head 2. Head 3 is last.
TEST(Pruning, HandWorkedLine) {
    const auto order = greedy_prune_order(line_distances({0, 1, 3, 7}), 4);
    ASSERT_EQ(order.size(), 4u);
    const std::vector<int64_t> heads = {order[0].head, order[1].head, order[2].head, order[3].head};
    EXPECT_EQ(heads, (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(order[0].redundancy, 1.0);
    EXPECT_EQ(order[1].redundancy, 2.0);
    EXPECT_EQ(order[2].redundancy, 4.0);
    EXPECT_EQ(order[3].redundancy, kInf);  // no survivor left to be near
}

// A head that shares no usable row with any other (all NaN) is never "redundant": it comes after
// every head that still has a finite neighbour (NaN must not compare as a small distance).
TEST(Pruning, MissingPairsAreNotNeighbours) {
    Eigen::MatrixXd d = line_distances({0, 5, 6, 20});
    for (int i = 0; i < 4; ++i)
        if (i != 0) d(0, i) = d(i, 0) = kNaN;
    const auto order = greedy_prune_order(d, 4);
    EXPECT_EQ(order[0].head, 1);  // 1 and 2 tie at 1
    EXPECT_EQ(order[1].head, 2);  // survivors 2, 3: 14 each
    // Survivors 0 and 3 have no finite neighbour left: both +inf, the lower index first.
    EXPECT_EQ(order[2].head, 0);
    EXPECT_EQ(order[2].redundancy, kInf);
    EXPECT_EQ(order[3].head, 3);
}

// Section 5 transcribed literally: at every step, every survivor's redundancy is recomputed as
// the minimum over the other survivors, and the smallest one (lowest index on ties) goes.
std::vector<PruneStep> definition_order(const Eigen::MatrixXd& d, int64_t k) {
    const int64_t n = d.rows();
    std::vector<bool> alive(size_t(n), true);
    std::vector<PruneStep> out;
    for (int64_t s = 0; s < k; ++s) {
        int64_t best = -1;
        double best_r = 0;
        for (int64_t h = 0; h < n; ++h) {
            if (!alive[size_t(h)]) continue;
            double r = kInf;
            for (int64_t o = 0; o < n; ++o) {
                if (o == h || !alive[size_t(o)]) continue;
                const double v = d(std::max(h, o), std::min(h, o));
                if (!std::isnan(v)) r = std::min(r, v);
            }
            if (best < 0 || r < best_r) {
                best = h;
                best_r = r;
            }
        }
        out.push_back({best, best_r});
        alive[size_t(best)] = false;
    }
    return out;
}

// Random symmetric matrices with many exact ties (small integer distances) and some missing
// pairs: the incremental order equals the literal definition at every step.
TEST(Pruning, EqualsTheDefinitionOnRandomMatrices) {
    Xoshiro256 rng(7);
    for (int trial = 0; trial < 200; ++trial) {
        const int64_t n = 2 + int64_t(rng.below(30));
        Eigen::MatrixXd d = Eigen::MatrixXd::Zero(n, n);
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < i; ++j) {
                const double v = rng.below(10) == 0 ? kNaN : double(1 + rng.below(6));
                d(i, j) = d(j, i) = v;
            }
        const int64_t k = int64_t(rng.below(uint64_t(n) + 1));
        const auto got = greedy_prune_order(d, k);
        const auto want = definition_order(d, k);
        ASSERT_EQ(got.size(), want.size());
        for (size_t s = 0; s < got.size(); ++s) {
            ASSERT_EQ(got[s].head, want[s].head) << "trial " << trial << " step " << s;
            ASSERT_EQ(got[s].redundancy, want[s].redundancy) << "trial " << trial;
        }
    }
}

// Only the lower triangle is read: an upper triangle that differs (rounding in a caller's
// matrix) cannot change the order.
TEST(Pruning, ReadsTheLowerTriangle) {
    Eigen::MatrixXd d = line_distances({0, 1, 3, 7});
    Eigen::MatrixXd skewed = d;
    skewed(0, 1) = 100;  // upper triangle only
    const auto a = greedy_prune_order(d, 3);
    const auto b = greedy_prune_order(skewed, 3);
    for (size_t s = 0; s < a.size(); ++s) EXPECT_EQ(a[s].head, b[s].head);
}

TEST(Pruning, RemoveCountOutOfRangeIsAUsageError) {
    const Eigen::MatrixXd d = line_distances({0, 1});
    EXPECT_THROW(greedy_prune_order(d, 3), UsageError);
    EXPECT_THROW(greedy_prune_order(d, -1), UsageError);
    EXPECT_TRUE(greedy_prune_order(d, 0).empty());
}

// round(s * n) with halves up: 16 heads (tinystories656K) at 10/20/30% prune 2, 3, 5 heads.
TEST(Pruning, SparsityToHeadCount) {
    EXPECT_EQ(heads_to_prune(0.1, 16), 2);  // 1.6
    EXPECT_EQ(heads_to_prune(0.2, 16), 3);  // 3.2
    EXPECT_EQ(heads_to_prune(0.3, 16), 5);  // 4.8
    EXPECT_EQ(heads_to_prune(0.5, 3), 2);   // 1.5 rounds up
    EXPECT_EQ(heads_to_prune(0.25, 1024), 256);
    for (double bad : {0.0, 1.0, -0.1, 1.5, kNaN, kInf}) {
        try {
            heads_to_prune(bad, 16);
            ADD_FAILURE() << "sparsity " << bad << " was accepted";
        } catch (const UsageError& e) {
            EXPECT_NE(std::string(e.what()).find("between 0 and 1"), std::string::npos) << e.what();
        }
    }
    EXPECT_THROW(heads_to_prune(0.01, 16), UsageError);  // prunes 0 heads
    EXPECT_THROW(heads_to_prune(0.9, 2), UsageError);    // prunes both heads
}

// The random baseline: k distinct sorted heads; one seed always gives the same heads, and the
// three default seeds give different sets.
TEST(Pruning, RandomBaselineIsSeeded) {
    const auto a = random_prune(16, 5, 1);
    EXPECT_EQ(a, random_prune(16, 5, 1));
    EXPECT_EQ(a.size(), 5u);
    EXPECT_EQ(std::set<int64_t>(a.begin(), a.end()).size(), 5u);
    EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
    for (int64_t h : a) EXPECT_TRUE(h >= 0 && h < 16);
    const std::set<std::vector<int64_t>> seeds = {a, random_prune(16, 5, 2),
                                                  random_prune(16, 5, 3)};
    EXPECT_EQ(seeds.size(), 3u);
    EXPECT_THROW(random_prune(4, 5, 1), UsageError);
}

}  // namespace
}  // namespace sinkscope::metrics
