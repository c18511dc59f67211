// Thresholded attention graphs on hand-built matrices with known spectra (spec 8, 10.i).
#include <cmath>
#include <numbers>
#include <random>

#include <gtest/gtest.h>

#include "sinkscope/metrics/graph.hpp"
#include "testing.hpp"

using namespace sinkscope::metrics;
namespace testutil = sinkscope::testutil;

namespace {
// Every row attends to key 0 only.
Eigen::MatrixXd star(int n) {
    Eigen::MatrixXd a = Eigen::MatrixXd::Zero(n, n);
    a.col(0).setOnes();
    return a;
}
// Rows split their mass over their path neighbours, so B = 1[A > 0.1] is a symmetric path.
Eigen::MatrixXd path(int n) {
    Eigen::MatrixXd a = Eigen::MatrixXd::Zero(n, n);
    for (int i = 0; i < n; ++i) {
        const int deg = (i > 0) + (i < n - 1);
        if (i > 0) a(i, i - 1) = 1.0 / deg;
        if (i < n - 1) a(i, i + 1) = 1.0 / deg;
    }
    return a;
}
// Laplacian of the unweighted path on n nodes.
Eigen::MatrixXd path_laplacian(int n) {
    Eigen::MatrixXd l = Eigen::MatrixXd::Zero(n, n);
    for (int i = 0; i + 1 < n; ++i) {
        l(i, i) += 1;
        l(i + 1, i + 1) += 1;
        l(i, i + 1) = l(i + 1, i) = -1;
    }
    return l;
}
}  // namespace

// A perfect star ignoring self-loops (principled) has basic star-likeness 1 and Freeman
// centralization 1; its density is 1/n because only column 0 is set.
TEST(Graph, StarIsPerfectlyCentralized) {
    const int n = 10;
    const auto g = graph_stats(star(n), 0.1, false);
    EXPECT_DOUBLE_EQ(g.star_basic, 1.0);
    EXPECT_DOUBLE_EQ(g.centralization, 1.0);
    EXPECT_DOUBLE_EQ(g.density, 1.0 / n);
    // in-degrees (n-1, 0, ..., 0): Gini = 2 * n (n-1) / (n (n-1)) - (n+1)/n = (n-1)/n
    EXPECT_WITHIN(g.gini, (n - 1.0) / n, testutil::kFewOps);
    EXPECT_WITHIN(g.star_combined, 0.3 + 0.7 * (n - 1.0) / n, testutil::kFewOps);
}

// Compat counts the self-loop of key 0, so the star gives N/(N-1) (10.i).
TEST(Graph, CompatStarCountsSelfLoop) {
    const int n = 10;
    const auto g = graph_stats(star(n), 0.1, true);
    EXPECT_DOUBLE_EQ(g.star_basic, n / (n - 1.0));
}

// Uniform attention above the threshold gives K_n, whose Laplacian has lambda_2 = n and
// lambda_3 - lambda_2 = 0 (self-loops cancel in L).
TEST(Graph, CompleteGraphLambda2IsN) {
    const int n = 8;
    const Eigen::MatrixXd a = Eigen::MatrixXd::Constant(n, n, 1.0 / n);
    const auto g = graph_stats(a, 0.001, false);
    // dense eigensolve, ||L|| = n = 8
    EXPECT_WITHIN(g.lambda2, n, testutil::kDenseEigenAbs);
    EXPECT_WITHIN(g.laplacian_gap, 0.0, testutil::kDenseEigenAbs);
    EXPECT_DOUBLE_EQ(g.density, 1.0);
    EXPECT_WITHIN(g.degree_variance, 0.0, testutil::kFewOps);
    EXPECT_WITHIN(g.centralization, 0.0, testutil::kFewOps);
}

// A symmetric path on n nodes has lambda_2 = 2 - 2 cos(pi / n).
TEST(Graph, PathLambda2MatchesClosedForm) {
    const int n = 12;
    const auto g = graph_stats(path(n), 0.1, false);
    EXPECT_WITHIN(g.lambda2, 2 - 2 * std::cos(std::numbers::pi / n), testutil::kDenseEigenAbs);
    // lambda_3 of the path is 2 - 2 cos(2 pi / n)
    EXPECT_WITHIN(g.laplacian_gap,
                  2 * std::cos(std::numbers::pi / n) - 2 * std::cos(2 * std::numbers::pi / n),
                  testutil::kDenseEigenAbs);
}

// n > 256 goes through Spectra and still gives the path's closed-form lambda_2 and lambda_3.
TEST(Graph, LargePathUsesIterativeSolver) {
    const int n = 300;
    const auto g = graph_stats(path(n), 0.1, false);
    EXPECT_WITHIN(g.lambda2, 2 - 2 * std::cos(std::numbers::pi / n), testutil::kIterativeEigenAbs);
    EXPECT_WITHIN(g.laplacian_gap,
                  2 * std::cos(std::numbers::pi / n) - 2 * std::cos(2 * std::numbers::pi / n),
                  testutil::kIterativeEigenAbs);
}

// The iterative (Spectra) and dense branches agree on the same small Laplacian.
TEST(Graph, IterativeAgreesWithDense) {
    const auto lap = path_laplacian(40);
    const auto dense = smallest_eigenvalues(lap, 3);
    const auto iter = smallest_eigenvalues_iterative(lap, 3);
    ASSERT_EQ(dense.size(), 3u);
    ASSERT_EQ(iter.size(), 3u);
    for (int k = 0; k < 3; ++k) EXPECT_WITHIN(dense[k], iter[k], testutil::kIterativeEigenAbs) << k;
}

// A graph of two disconnected cliques has lambda_2 = 0 (algebraic connectivity > 0 iff connected).
TEST(Graph, DisconnectedGraphHasZeroLambda2) {
    const int n = 6;
    Eigen::MatrixXd a = Eigen::MatrixXd::Zero(n, n);
    a.topLeftCorner(3, 3).setConstant(1.0 / 3);
    a.bottomRightCorner(3, 3).setConstant(1.0 / 3);
    EXPECT_WITHIN(graph_stats(a, 0.1, false).lambda2, 0.0, testutil::kDenseEigenAbs);
}

// Gini: 0 for equal or all-zero values, (N-1)/N for one non-zero value of N.
TEST(Graph, GiniKnownValues) {
    EXPECT_DOUBLE_EQ(gini({0, 0, 0}), 0.0);
    EXPECT_WITHIN(gini({2, 2, 2, 2}), 0.0, testutil::kFewOps);
    EXPECT_WITHIN(gini({0, 0, 0, 5}), 0.75, testutil::kFewOps);
    // 2 * (1*1 + 2*2 + 3*3) / (3 * 6) - 4/3 = 28/18 - 24/18
    EXPECT_WITHIN(gini({3, 1, 2}), 4.0 / 18.0, testutil::kFewOps);
}

// Nothing above the threshold: empty graph, zero density, degree statistics 0.
TEST(Graph, EmptyGraphAboveAllValues) {
    const Eigen::MatrixXd a = Eigen::MatrixXd::Constant(5, 5, 0.2);
    const auto g = graph_stats(a, 0.2, false);  // strict >
    EXPECT_EQ(g.density, 0.0);
    EXPECT_EQ(g.star_basic, 0.0);
    EXPECT_EQ(g.gini, 0.0);
}

// The multi-threshold path reuses spectra only for identical edge sets: it equals the
// one-threshold computation at every threshold.
TEST(Graph, AllThresholdsEqualSingleThreshold) {
    Eigen::MatrixXd a(6, 6);
    for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j) a(i, j) = 0.001 * ((i * 7 + j * 3) % 11) + (j == 0 ? 0.3 : 0);
    const std::vector<double> taus(k_graph_thresholds.begin(), k_graph_thresholds.end());
    const auto all = graph_stats_all(a, taus, false);
    ASSERT_EQ(all.size(), taus.size());
    for (size_t k = 0; k < taus.size(); ++k) {
        const auto one = graph_stats(a, taus[k], false);
        EXPECT_EQ(all[k].lambda2, one.lambda2) << taus[k];
        EXPECT_EQ(all[k].laplacian_gap, one.laplacian_gap) << taus[k];
        EXPECT_EQ(all[k].density, one.density) << taus[k];
    }
}

// Compat with n > 50 keeps only nodes touched by an edge (laplacian.ipynb builds the graph from
// its edge list); principled keeps every node. Rows 0..29 attend to key 0, rows 30..59 are
// uniform below tau, so 30 nodes are isolated: compat d* = 30 (self-loop) over N = 30,
// principled d* = 29 over N = 60.
TEST(Graph, CompatDropsIsolatedNodesAboveFifty) {
    const int n = 60;
    Eigen::MatrixXd a = Eigen::MatrixXd::Zero(n, n);
    for (int i = 0; i < 30; ++i) a(i, 0) = 1.0;
    for (int i = 30; i < n; ++i) a.row(i).setConstant(1.0 / n);
    const auto compat = graph_stats(a, 0.02, true);
    EXPECT_EQ(compat.n_nodes, 30);
    EXPECT_DOUBLE_EQ(compat.star_basic, 30.0 / 29.0);
    const auto principled = graph_stats(a, 0.02, false);
    EXPECT_EQ(principled.n_nodes, 60);
    EXPECT_DOUBLE_EQ(principled.star_basic, 29.0 / 59.0);
}

namespace {
// Edges of the path 0 - 1 - ... - (n-1), weight 1, starting at node `first`.
std::vector<WeightedEdge> path_edges(int n, int first = 0) {
    std::vector<WeightedEdge> e;
    for (int i = 0; i + 1 < n; ++i) e.push_back({first + i, first + i + 1, 1.0});
    return e;
}
// Bound on |iterative - exact| for the sparse shift-invert solver on m nodes (k_lanczos_tol in
// graph.hpp): the Lanczos stop, tol (lambda - sigma), plus the Cholesky rounding, taken like a
// dense solve's as c m u ||L||_2 with c = 10, and ||L||_2 <= 2 max degree (Gershgorin).
double iterative_bound(double lambda, int m, double max_degree) {
    return k_lanczos_tol * (lambda - k_laplacian_shift) +
           10.0 * m * testutil::kU64 * 2.0 * max_degree;
}
// Against Eigen's dense solver, which has its own c m u ||L||_2.
double versus_dense_bound(double lambda, int m, double max_degree) {
    return iterative_bound(lambda, m, max_degree) + 10.0 * m * testutil::kU64 * 2.0 * max_degree;
}
// A random graph on n nodes: each pair an edge with probability p, weight 1/2 or 1 (a one-way
// or two-way attention edge), plus the path through all nodes so that it is connected.
std::vector<WeightedEdge> random_edges(int n, double p, uint64_t seed, double* max_degree) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u;
    std::vector<WeightedEdge> e;
    std::vector<double> degree(static_cast<size_t>(n), 0.0);
    for (int i = 0; i < n; ++i)
        for (int j = i + 1; j < n; ++j)
            if (j == i + 1 || u(rng) < p) {
                e.push_back({i, j, u(rng) < 0.5 ? 0.5 : 1.0});
                degree[static_cast<size_t>(i)] += e.back().w;
                degree[static_cast<size_t>(j)] += e.back().w;
            }
    *max_degree = *std::max_element(degree.begin(), degree.end());
    return e;
}
Eigen::MatrixXd laplacian_of(int n, const std::vector<WeightedEdge>& edges) {
    Eigen::MatrixXd l = Eigen::MatrixXd::Zero(n, n);
    for (const auto& e : edges) {
        l(e.u, e.v) -= e.w;
        l(e.v, e.u) -= e.w;
        l(e.u, e.u) += e.w;
        l(e.v, e.v) += e.w;
    }
    return l;
}
}  // namespace

// The sparse iterative solver (n > 256) gives the path's closed forms lambda_k = 2 - 2 cos((k-1)
// pi / n) for k = 2, 3.
TEST(Graph, SparsePathMatchesClosedForm) {
    const int n = 1000;
    const auto ev = laplacian_lambda23(n, path_edges(n));
    const double l2 = 2 - 2 * std::cos(std::numbers::pi / n);
    const double l3 = 2 - 2 * std::cos(2 * std::numbers::pi / n);
    EXPECT_WITHIN(ev[0], l2, iterative_bound(l2, n, 2));
    EXPECT_WITHIN(ev[1], l3, iterative_bound(l3, n, 2));
}

// The cycle's lambda_2 = lambda_3 = 2 - 2 cos(2 pi / n) is a double eigenvalue: the second,
// deflated run must find it again (plain Lanczos sees the second copy only through rounding and
// can miss it: on the 4096-cycle with 40 Lanczos vectors it returned lambda_4 as lambda_3).
TEST(Graph, SparseCycleFindsDoubleEigenvalue) {
    const int n = 1200;
    auto edges = path_edges(n);
    edges.push_back({0, n - 1, 1.0});
    const auto ev = laplacian_lambda23(n, edges);
    const double l = 2 - 2 * std::cos(2 * std::numbers::pi / n);
    EXPECT_WITHIN(ev[0], l, iterative_bound(l, n, 2));
    EXPECT_WITHIN(ev[1], l, iterative_bound(l, n, 2));
}

// A star of one-way edges (every row attends to key 0) has W = star with weights 1/2, so
// L = (1/2) L(K_{1,n-1}) with eigenvalues 0, 1/2 (n-2 times), n/2: lambda_2 = 1/2, gap 0.
TEST(Graph, LargeStarHasRepeatedLambda2) {
    const int n = 400;
    const auto g = graph_stats(star(n), 0.1, false);
    EXPECT_WITHIN(g.lambda2, 0.5, iterative_bound(0.5, n, n / 2.0));
    EXPECT_WITHIN(g.laplacian_gap, 0.0, 2 * iterative_bound(0.5, n, n / 2.0));
    EXPECT_DOUBLE_EQ(g.star_basic, 1.0);
}

// Components: the spectrum is the union of theirs, each holding one 0. Two paths give
// lambda_2 = 0 exactly and lambda_3 = the longer path's lambda_2; three components give (0, 0).
TEST(Graph, ComponentsSplitTheSpectrum) {
    // A path of `a` nodes and one of `b` nodes after it: lambda_2 = 0, lambda_3 = the smaller
    // of the two paths' lambda_2 = 2 - 2 cos(pi / max(a, b)).
    const auto two_paths = [](int a, int b) {
        auto edges = path_edges(a);
        for (const auto& e : path_edges(b, a)) edges.push_back(e);
        return edges;
    };
    const auto expect_two = [](const std::array<double, 2>& ev, int longest) {
        EXPECT_EQ(ev[0], 0.0);
        const double l = 2 - 2 * std::cos(std::numbers::pi / longest);
        EXPECT_WITHIN(ev[1], l, iterative_bound(l, longest, 2));
    };
    const auto two = two_paths(300, 400);
    expect_two(laplacian_lambda23(700, two), 400);
    // the same paths plus one isolated node: three components
    const auto three = laplacian_lambda23(701, two);
    EXPECT_EQ(three[0], 0.0);
    EXPECT_EQ(three[1], 0.0);
    // two components, one of them small (dense solve of its 100 nodes)
    expect_two(laplacian_lambda23(400, two_paths(300, 100)), 300);
}

// Random connected graphs, sparse (sparse Cholesky) and dense (dense Cholesky, density above
// k_dense_factor_density), agree with Eigen's dense solver on the full Laplacian.
TEST(Graph, SparseSolverAgreesWithDenseOnRandomGraphs) {
    for (const auto& [n, p, seed] :
         {std::tuple{400, 0.01, 1u}, std::tuple{500, 0.05, 2u}, std::tuple{300, 0.6, 3u}}) {
        double max_degree = 0;
        const auto edges = random_edges(n, p, seed, &max_degree);
        Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> dense(laplacian_of(n, edges),
                                                             Eigen::EigenvaluesOnly);
        const auto& d = dense.eigenvalues();
        const auto ev = laplacian_lambda23(n, edges);
        EXPECT_WITHIN(ev[0], d[1], versus_dense_bound(d[1], n, max_degree)) << n << " " << p;
        EXPECT_WITHIN(ev[1], d[2], versus_dense_bound(d[2], n, max_degree)) << n << " " << p;
    }
}

// The iterative branch on random symmetric positive semi-definite matrices X^T X (rank-deficient:
// a repeated 0) agrees with the dense solver on the smallest eigenvalues it reports, to the
// Lanczos stop tol (lambda - sigma) plus both solvers' rounding, c n u ||A||_2 each.
TEST(Graph, IterativeAgreesWithDenseOnRandomSymmetric) {
    std::mt19937_64 rng(99);
    std::normal_distribution<double> normal;
    const int n = 300;
    Eigen::MatrixXd x(n + 50, n);
    for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
    const Eigen::MatrixXd a = x.transpose() * x / n;  // [n, n] PSD, eigenvalues in ~[0.01, 4]
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> dense(a, Eigen::EigenvaluesOnly);
    const auto& d = dense.eigenvalues();
    const double norm = d[n - 1];
    const auto iter = smallest_eigenvalues_iterative(a, 3);
    ASSERT_EQ(iter.size(), 3u);
    for (int k = 0; k < 3; ++k)
        EXPECT_WITHIN(
            iter[k], d[k],
            k_lanczos_tol * (d[k] - k_laplacian_shift) + 2 * 10.0 * n * testutil::kU64 * norm)
            << k;
}
