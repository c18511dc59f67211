// Path length and clustering of thresholded graphs (metrics/graph_paths.hpp) on graphs whose
// values are known in closed form; tests/python/test_graph_paths.py checks the same against
// networkx on attention.
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "sinkscope/metrics/graph_paths.hpp"

using namespace sinkscope::metrics;

namespace {

// A matrix whose graph at tau = 0.5 has the given undirected edges, each stored one way only
// (a(u, v) = 1, a(v, u) = 0), plus a self-loop on every node (which must not count).
Eigen::MatrixXd graph_of(int n, const std::vector<std::pair<int, int>>& edges) {
    Eigen::MatrixXd a = Eigen::MatrixXd::Identity(n, n);
    for (auto [u, v] : edges) a(u, v) = 1;
    return a;
}

std::vector<std::pair<int, int>> path_edges(int n, int offset = 0) {
    std::vector<std::pair<int, int>> e;
    for (int i = 0; i + 1 < n; ++i) e.emplace_back(offset + i + 1, offset + i);
    return e;
}

}  // namespace

// The path P_n: sum of distances over ordered pairs = 2 sum_{d=1}^{n-1} (n - d) d
// = n (n - 1) (n + 1) / 3, so the mean is (n + 1) / 3; no triangle.
TEST(GraphPaths, PathHasMeanDistanceNPlusOneThirds) {
    for (int n : {2, 3, 7, 64, 65, 130}) {
        const auto g = graph_paths(graph_of(n, path_edges(n)), 0.5);
        EXPECT_EQ(g.n_edges, n - 1);
        EXPECT_EQ(g.n_set, 2 * n - 1);  // n - 1 edges one way, n self-loops
        EXPECT_DOUBLE_EQ(g.avg_shortest_path, (n + 1) / 3.0) << n;
        EXPECT_DOUBLE_EQ(g.lcc_avg_shortest_path, (n + 1) / 3.0) << n;
        EXPECT_EQ(g.reachable_share, 1.0);
        EXPECT_EQ(g.clustering, 0.0);
    }
}

// The star on n nodes: the 2 (n - 1) ordered centre-leaf pairs at distance 1, the (n - 1)(n - 2)
// leaf-leaf pairs at 2: sum 2 (n - 1)^2, mean 2 (n - 1) / n; no triangle. K_n: all at 1,
// clustering 1.
TEST(GraphPaths, StarAndCompleteGraph) {
    for (int n : {3, 10, 200}) {
        std::vector<std::pair<int, int>> e;
        for (int i = 1; i < n; ++i) e.emplace_back(i, 0);  // every row attends to key 0
        const auto g = graph_paths(graph_of(n, e), 0.5);
        EXPECT_DOUBLE_EQ(g.avg_shortest_path, 2.0 * (n - 1) / n) << n;
        EXPECT_EQ(g.clustering, 0.0);
    }
    for (int n : {3, 5, 70}) {
        // K_n from a lower triangle (a causal matrix attending everywhere): distance 1,
        // clustering 1.
        Eigen::MatrixXd a = Eigen::MatrixXd::Ones(n, n).triangularView<Eigen::Lower>();
        const auto g = graph_paths(a, 0.5);
        EXPECT_EQ(g.n_edges, n * (n - 1) / 2);
        EXPECT_EQ(g.avg_shortest_path, 1.0);
        EXPECT_EQ(g.clustering, 1.0);
    }
}

// A triangle {0, 1, 2} with a pendant 3 on node 2: c_0 = c_1 = 1, c_2 = 1 / 3 (one triangle of
// three neighbour pairs), c_3 = 0: mean (7/3) / 4 = 7/12. Distances: 0-1, 0-2, 1-2, 2-3 at 1,
// 0-3, 1-3 at 2: mean (4 + 4) * 2 / 12 = 4/3.
TEST(GraphPaths, TriangleWithPendant) {
    const auto g = graph_paths(graph_of(4, {{1, 0}, {2, 0}, {1, 2}, {3, 2}}), 0.5);
    EXPECT_DOUBLE_EQ(g.clustering, 7.0 / 12.0);
    EXPECT_DOUBLE_EQ(g.avg_shortest_path, 4.0 / 3.0);
}

// Disconnected: P_3 on {0, 1, 2}, P_4 on {3..6}, node 7 isolated. Reachable ordered pairs:
// 3 * 2 + 4 * 3 = 18 of 8 * 7 = 56, distance sums 8 and 20 (n (n^2 - 1) / 3): mean 28 / 18;
// the largest component is P_4 (mean 5/3). Ties go to the component of the lowest node.
TEST(GraphPaths, DisconnectedGraphs) {
    auto e = path_edges(3);
    for (auto p : path_edges(4, 3)) e.push_back(p);
    const auto g = graph_paths(graph_of(8, e), 0.5);
    EXPECT_DOUBLE_EQ(g.avg_shortest_path, 28.0 / 18.0);
    EXPECT_DOUBLE_EQ(g.reachable_share, 18.0 / 56.0);
    EXPECT_EQ(g.lcc_nodes, 4);
    EXPECT_DOUBLE_EQ(g.lcc_avg_shortest_path, 5.0 / 3.0);

    // Two components of 3: a path {0, 1, 2} (mean 4/3) and a triangle {3, 4, 5} (mean 1).
    const auto tie = graph_paths(graph_of(6, {{1, 0}, {2, 1}, {4, 3}, {5, 4}, {5, 3}}), 0.5);
    EXPECT_EQ(tie.lcc_nodes, 3);
    EXPECT_DOUBLE_EQ(tie.lcc_avg_shortest_path, 4.0 / 3.0);
    EXPECT_DOUBLE_EQ(tie.avg_shortest_path, (8.0 + 6.0) / 12.0);

    // No edge: nothing reachable, clustering 0.
    const auto none = graph_paths(Eigen::MatrixXd::Identity(5, 5), 0.5);
    EXPECT_TRUE(std::isnan(none.avg_shortest_path));
    EXPECT_TRUE(std::isnan(none.lcc_avg_shortest_path));
    EXPECT_EQ(none.reachable_share, 0.0);
    EXPECT_EQ(none.clustering, 0.0);
    EXPECT_EQ(none.n_set, 5);
}

// Strict threshold, both directions: an entry equal to tau is no edge; an edge stored either way
// counts once. The thresholds in one call reuse equal graphs and agree with one call each.
TEST(GraphPaths, ThresholdsAndReuse) {
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> u(0, 1);
    const int n = 150;  // three words a row: neighbour lists and row ORs both run
    Eigen::MatrixXd a(n, n);
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) a(i, j) = u(rng) * u(rng) * u(rng);
    const std::vector<double> taus{0.9, 0.5, 0.5, 0.2, 0.05, 2.0};
    const auto all = graph_paths_all(a, taus);
    ASSERT_EQ(all.size(), taus.size());
    for (size_t k = 0; k < taus.size(); ++k) {
        const auto one = graph_paths(a, taus[k]);
        EXPECT_EQ(all[k].n_edges, one.n_edges);
        EXPECT_EQ(all[k].n_set, one.n_set);
        EXPECT_TRUE(all[k].avg_shortest_path == one.avg_shortest_path ||
                    (std::isnan(all[k].avg_shortest_path) && std::isnan(one.avg_shortest_path)));
        EXPECT_EQ(all[k].clustering, one.clustering);
    }
    Eigen::MatrixXd b = Eigen::MatrixXd::Zero(3, 3);
    b(1, 0) = 0.5;  // == tau: no edge
    b(2, 1) = 0.6;
    b(1, 2) = 0.7;  // the same edge the other way
    const auto g = graph_paths(b, 0.5);
    EXPECT_EQ(g.n_edges, 1);
    EXPECT_EQ(g.n_set, 2);
    EXPECT_EQ(g.avg_shortest_path, 1.0);
    EXPECT_DOUBLE_EQ(g.reachable_share, 2.0 / 6.0);
}

// Against a plain queue search and a triangle count over the adjacency matrix, written here, on
// random graphs from sparse (long paths, several components) to dense (where levels pull).
TEST(GraphPaths, AgreesWithPlainSearch) {
    std::mt19937_64 rng(51);
    std::uniform_real_distribution<double> u(0, 1);
    for (int n : {65, 150, 300}) {
        Eigen::MatrixXd a(n, n);
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j) a(i, j) = std::pow(u(rng), 6);
        for (double tau : {0.995, 0.98, 0.9, 0.5, 1e-3}) {
            std::vector<std::vector<char>> e(n, std::vector<char>(n, 0));
            for (int i = 0; i < n; ++i)
                for (int j = 0; j < n; ++j)
                    if (i != j && (a(i, j) > tau || a(j, i) > tau)) e[i][j] = 1;
            int64_t sum = 0, pairs = 0;
            for (int s = 0; s < n; ++s) {
                std::vector<int> d(n, -1);
                std::vector<int> queue{s};
                d[s] = 0;
                for (size_t q = 0; q < queue.size(); ++q)
                    for (int v = 0; v < n; ++v)
                        if (e[queue[q]][v] && d[v] < 0) {
                            d[v] = d[queue[q]] + 1;
                            queue.push_back(v);
                            sum += d[v];
                            ++pairs;
                        }
            }
            double clustering = 0;
            for (int v = 0; v < n; ++v) {
                int deg = 0, links = 0;
                for (int x = 0; x < n; ++x) deg += e[v][x];
                for (int x = 0; x < n; ++x)
                    for (int y = x + 1; y < n; ++y) links += e[v][x] && e[v][y] && e[x][y];
                if (deg >= 2) clustering += 2.0 * links / (deg * (deg - 1.0));
            }
            const auto g = graph_paths(a, tau);
            const auto where = ::testing::Message() << "n=" << n << " tau=" << tau;
            if (pairs == 0) {
                EXPECT_TRUE(std::isnan(g.avg_shortest_path)) << where;
            } else {
                EXPECT_EQ(g.avg_shortest_path, static_cast<double>(sum) / pairs) << where;
            }
            EXPECT_EQ(g.reachable_share, static_cast<double>(pairs) / (n * (n - 1.0))) << where;
            // Both sum the same per-node fractions in node order.
            EXPECT_EQ(g.clustering, clustering / n) << where;
        }
    }
}
