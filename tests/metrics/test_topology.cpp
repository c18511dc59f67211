// Persistent homology on configurations with known diagrams (spec 8, 10.j; PAPERS.md B.3).
#include <algorithm>
#include <cmath>
#include <iostream>  // GUDHI's Persistent_cohomology.h uses std::cout without it
#include <limits>
#include <numbers>
#include <random>

#include <gtest/gtest.h>
#include <gudhi/Persistent_cohomology.h>
#include <gudhi/Rips_complex.h>
#include <gudhi/Simplex_tree.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/topology.hpp"
#include "testing.hpp"

using namespace sinkscope::metrics;
namespace testutil = sinkscope::testutil;

namespace {
Eigen::MatrixXd line_distances(const std::vector<double>& x) {
    const auto n = static_cast<Eigen::Index>(x.size());
    Eigen::MatrixXd d(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < n; ++j) d(i, j) = std::abs(x[i] - x[j]);
    return d;
}
std::vector<PersistenceBar> of_dim(const std::vector<PersistenceBar>& bars, int dim) {
    std::vector<PersistenceBar> out;
    for (const auto& b : bars)
        if (b.dim == dim) out.push_back(b);
    return out;
}
}  // namespace

// Four points on a unit square: the 4-cycle is born at the side 1 and filled at the diagonal
// sqrt(2); H0 has three bars dying at 1 and one essential class.
TEST(Topology, SquareHasOneLoop) {
    const double s = std::sqrt(2.0);
    Eigen::MatrixXd d(4, 4);
    d << 0, 1, s, 1,  //
        1, 0, 1, s,   //
        s, 1, 0, 1,   //
        1, s, 1, 0;
    const auto bars = rips_persistence(d);
    const auto h1 = of_dim(bars, 1);
    ASSERT_EQ(h1.size(), 1u);
    EXPECT_WITHIN(h1[0].birth, 1.0, testutil::kF64SumRel);
    EXPECT_WITHIN(h1[0].death, s, testutil::kF64SumRel);
    const auto h0 = of_dim(bars, 0);
    ASSERT_EQ(h0.size(), 4u);
    int n_inf = 0;
    for (const auto& b : h0) {
        if (std::isinf(b.death))
            ++n_inf;
        else
            EXPECT_WITHIN(b.death, 1.0, testutil::kF64SumRel);
    }
    EXPECT_EQ(n_inf, 1);
}

// Two clusters of three points 0.01 apart, 0.8 between them: H0 deaths are four at 0.01 and one
// at 0.8; the summary counts one long bar and total persistence 0.84; beta_0 is 6 at eps = 0,
// 2 at eps = 0.5 and 1 at eps = 0.9.
TEST(Topology, TwoClustersMergeAtGap) {
    const auto d = line_distances({0.0, 0.01, 0.02, 0.82, 0.83, 0.84});
    const auto bars = rips_persistence(d);
    const auto h0 = of_dim(bars, 0);
    ASSERT_EQ(h0.size(), 6u);
    std::vector<double> deaths;
    for (const auto& b : h0) deaths.push_back(b.death);
    std::sort(deaths.begin(), deaths.end());
    for (int k = 0; k < 4; ++k) EXPECT_WITHIN(deaths[k], 0.01, testutil::kF64SumRel);
    EXPECT_WITHIN(deaths[4], 0.8, testutil::kF64SumRel);
    EXPECT_TRUE(std::isinf(deaths[5]));
    EXPECT_TRUE(of_dim(bars, 1).empty());

    const auto s = summarize_diagram(bars);
    EXPECT_EQ(s.n_long[0], 1);
    EXPECT_REL_WITHIN(s.total_persistence[0], 0.84, testutil::kF64SumRel);
    EXPECT_EQ(s.n_essential[0], 1);
    EXPECT_EQ(s.n_bars[0], 6);
    EXPECT_EQ(s.betti[0][0], 6);
    EXPECT_EQ(s.betti[0][50], 2);
    EXPECT_EQ(s.betti[0][90], 1);
    EXPECT_EQ(s.betti[0][100], 1);  // the essential class stays alive to the end of the grid
}

// ripser's sparse semantics on a causal-like matrix: vertex births from the diagonal, all edges
// at 1, so every vertex but the oldest dies at 1 and persistence = 1 - birth.
TEST(Topology, SparseVertexBirthsGiveElderRuleBars) {
    Eigen::MatrixXd d(3, 3);
    d << 0.0, 1.0, 1.0,  //
        0.4, 0.7, 1.0,   //
        0.5, 0.2, 0.6;
    const auto bars = ripser_sparse_persistence(d);
    const auto h0 = of_dim(bars, 0);
    ASSERT_EQ(h0.size(), 3u);
    EXPECT_EQ(h0[0].birth, 0.0);
    EXPECT_TRUE(std::isinf(h0[0].death));
    EXPECT_WITHIN(h0[1].birth, 0.6, testutil::kFewOps);
    EXPECT_WITHIN(h0[1].death, 1.0, testutil::kFewOps);
    EXPECT_WITHIN(h0[2].birth, 0.7, testutil::kFewOps);
    EXPECT_WITHIN(h0[2].death, 1.0, testutil::kFewOps);
    EXPECT_TRUE(of_dim(bars, 1).empty());
}

// An exact zero off the diagonal is no edge (scipy COO drops it): two vertices stay apart.
TEST(Topology, SparseExactZeroIsNoEdge) {
    Eigen::MatrixXd d(2, 2);
    d << 0.0, 0.0,  //
        0.0, 0.0;
    const auto bars = ripser_sparse_persistence(d);
    EXPECT_EQ(of_dim(bars, 0).size(), 2u);  // two essential classes
    for (const auto& b : bars) EXPECT_TRUE(std::isinf(b.death));
}

// np.linspace(0, n-1, k, dtype=int), values from numpy.
TEST(Topology, LinspaceIndicesMatchNumpy) {
    const std::vector<int64_t> n40{0,  1,  2,  4,  5,  6,  8,  9,  10, 12, 13, 14, 16, 17, 18,
                                   20, 21, 22, 24, 25, 26, 28, 29, 30, 32, 33, 34, 36, 37, 39};
    EXPECT_EQ(linspace_indices(40, 30), n40);
    const std::vector<int64_t> n128{0,  4,  8,  13,  17,  21,  26,  30,  35,  39,
                                    43, 48, 52, 56,  61,  65,  70,  74,  78,  83,
                                    87, 91, 96, 100, 105, 109, 113, 118, 122, 127};
    EXPECT_EQ(linspace_indices(128, 30), n128);
    EXPECT_EQ(linspace_indices(5, 30), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

// Symmetrisation: max uses the larger direction, mean the average; the diagonal is 0.
TEST(Topology, SymmetricDistanceConventions) {
    Eigen::MatrixXd a(2, 2);
    a << 0.7, 0.3,  //
        0.9, 0.1;
    const auto dmax = symmetric_distance(a, Symmetrize::Max);
    const auto dmean = symmetric_distance(a, Symmetrize::Mean);
    EXPECT_DOUBLE_EQ(dmax(0, 1), 1 - 0.9);
    EXPECT_DOUBLE_EQ(dmax(1, 0), 1 - 0.9);
    EXPECT_DOUBLE_EQ(dmean(0, 1), 1 - 0.6);
    EXPECT_EQ(dmax(0, 0), 0.0);
    EXPECT_EQ(dmean(1, 1), 0.0);
}

// Against an independent implementation: python gudhi 3.7.1 RipsComplex (no edge collapse),
// max_dimension 2, persistence over Z/2, on d = 1 - max(A, A^T) of the 24 x 24 matrix
// A_ij proportional to ((31 i + 17 j) mod 23 + 1)^3: 23 finite H0 bars of total persistence
// 19.473289549915844 (max 0.8717649184079003), 30 H1 bars of total 0.9382797146642364, 5 of
// them longer than 0.05, the longest 0.060307154581914046.
TEST(Topology, MatchesPythonGudhiOnStructuredAttention) {
    const int n = 24;
    Eigen::MatrixXd a(n, n);
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) a(i, j) = std::pow(((i * 31 + j * 17) % 23 + 1), 3);
    for (int i = 0; i < n; ++i) a.row(i) /= a.row(i).sum();
    const auto s = summarize_diagram(rips_persistence(symmetric_distance(a, Symmetrize::Max)));
    EXPECT_EQ(s.n_bars[0] - s.n_essential[0], 23);
    EXPECT_EQ(s.n_essential[0], 1);
    EXPECT_REL_WITHIN(s.total_persistence[0], 19.473289549915844, testutil::kF64SumRel);
    EXPECT_REL_WITHIN(s.max_persistence[0], 0.8717649184079003, testutil::kF64SumRel);
    EXPECT_EQ(s.n_bars[1], 30);
    EXPECT_REL_WITHIN(s.total_persistence[1], 0.9382797146642364, testutil::kF64SumRel);
    EXPECT_EQ(s.n_long[1], 5);
    EXPECT_REL_WITHIN(s.max_persistence[1], 0.060307154581914046, testutil::kF64SumRel);
}

namespace {
// GUDHI's Rips_complex (no edge collapse) up to dimension 2 and its persistent cohomology over
// Z/2: an implementation independent of rips_persistence (rips.cpp reduces the coboundary of
// the distance matrix itself). Bars of length 0 dropped, sorted as rips_persistence sorts.
std::vector<PersistenceBar> gudhi_rips(const Eigen::MatrixXd& d) {
    struct Options : Gudhi::Simplex_tree_options_full_featured {
        typedef double Filtration_value;
    };
    using Tree = Gudhi::Simplex_tree<Options>;
    std::vector<std::vector<double>> lower(static_cast<size_t>(d.rows()));
    for (Eigen::Index i = 0; i < d.rows(); ++i)
        for (Eigen::Index j = 0; j < i; ++j) lower[static_cast<size_t>(i)].push_back(d(i, j));
    Gudhi::rips_complex::Rips_complex<double> rips(lower, std::numeric_limits<double>::infinity());
    Tree st;
    rips.create_complex(st, 2);
    Gudhi::persistent_cohomology::Persistent_cohomology<Tree,
                                                        Gudhi::persistent_cohomology::Field_Zp>
        pcoh(st);
    pcoh.init_coefficients(2);
    pcoh.compute_persistent_cohomology(0.0);
    std::vector<PersistenceBar> bars;
    for (int dim = 0; dim <= 1; ++dim)
        for (const auto& [birth, death] : pcoh.intervals_in_dimension(dim))
            bars.push_back({dim, birth, death});
    sort_bars(bars);
    return bars;
}
}  // namespace

// Every bar equal (the values are matrix entries, so exactly) to GUDHI's on random symmetric
// matrices: continuous values (no ties), values from a grid of 4 (ties everywhere: the pairing
// of equal values must not change the diagram) and attention-like 1 - max(A, A^T) with zeros.
TEST(Topology, RipsMatchesGudhiOnRandomMatrices) {
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (int trial = 0; trial < 66; ++trial) {
        const int n = trial < 60 ? 2 + trial % 30 : 90;  // larger n: columns reduced repeatedly
        const int kind = trial % 3;
        Eigen::MatrixXd d = Eigen::MatrixXd::Zero(n, n);
        Eigen::MatrixXd a(n, n);
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j) a(i, j) = kind == 2 && unit(rng) < 0.2 ? 0.0 : unit(rng);
        for (int i = 0; i < n; ++i) a.row(i) /= a.row(i).sum();
        if (kind == 2) a(0, 1) = 1.0;  // an edge of length 0
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < i; ++j) {
                const double v = kind == 0   ? unit(rng)
                                 : kind == 1 ? std::floor(unit(rng) * 4) / 4
                                             : 1.0 - std::max(a(i, j), a(j, i));
                d(i, j) = d(j, i) = v;
            }
        const auto ours = rips_persistence(d);
        const auto theirs = gudhi_rips(d);
        ASSERT_EQ(ours.size(), theirs.size()) << "trial " << trial << ", n = " << n;
        for (size_t b = 0; b < ours.size(); ++b) {
            EXPECT_EQ(ours[b].dim, theirs[b].dim) << "trial " << trial << " bar " << b;
            EXPECT_EQ(ours[b].birth, theirs[b].birth) << "trial " << trial << " bar " << b;
            EXPECT_EQ(ours[b].death, theirs[b].death) << "trial " << trial << " bar " << b;
        }
    }
}

// The octahedron (distance 1 between all vertices but the three antipodal pairs, 2 between
// those): at 1 its triangles form a 2-sphere, whose H1 is 0, so its 4-cycles are filled as they
// appear and no H1 bar has positive length; the antipodal edges at 2 add no loop either.
TEST(Topology, OctahedronHasNoLoop) {
    Eigen::MatrixXd d = Eigen::MatrixXd::Ones(6, 6);
    d.diagonal().setZero();
    for (int i = 0; i < 3; ++i) d(i, i + 3) = d(i + 3, i) = 2.0;
    const auto bars = rips_persistence(d);
    EXPECT_TRUE(of_dim(bars, 1).empty());
    EXPECT_EQ(of_dim(bars, 0).size(), 6u);
}

TEST(Topology, RipsRejectsNonFiniteDistances) {
    Eigen::MatrixXd d = Eigen::MatrixXd::Zero(3, 3);
    d(0, 1) = d(1, 0) = std::numeric_limits<double>::quiet_NaN();
    EXPECT_THROW(rips_persistence(d), sinkscope::InternalError);
}
