// Path length and clustering of the thresholded attention graphs (spec 8, 10.i; P2's "average
// shortest path and clustering coefficient", PAPERS.md B.4), on the undirected simple graph U of
// B = 1[a > tau]: nodes 0..n-1, an edge {i, j} (i != j) when a(i, j) > tau or a(j, i) > tau, i.e.
// where W = (B + B^T)/2 is non-zero off the diagonal, unweighted; self-loops play no part.
//
// Cost: one breadth-first search from every node over bitset rows (n/64 words a row), level by
// level pushing (the frontier's neighbour lists, or rows where a list is longer than a row) or,
// on dense levels, pulling (each unvisited node scans its row against the frontier up to the
// first hit): at most O(n^3 / 64) word operations in all, and the triangles O(m n / 64) for m
// edges, popcount by the CPU's instruction where it has one. Measured on one core: n = 4096
// tokens, under 2 s a graph from sparse to half full. Memory: n^2 / 8 bytes of rows plus the
// lists. Every sum is an integer, so the results do not depend on the order of work (or on the
// number of threads that run other layers).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include <Eigen/Dense>

namespace sinkscope::metrics {

struct GraphPaths {
    int64_t n_set = 0;    // sum of B, self-loops counted
    int64_t n_edges = 0;  // edges of U
    // Mean hop distance over the ordered pairs (s, t), s != t, that a path joins:
    // networkx.average_shortest_path_length on a connected U; on a disconnected one the mean over
    // the reachable pairs (within components), NaN when no pair is reachable (no edge).
    double avg_shortest_path = std::numeric_limits<double>::quiet_NaN();
    // Share of the n (n - 1) ordered pairs joined by a path (1 iff U is connected; NaN for n < 2).
    double reachable_share = std::numeric_limits<double>::quiet_NaN();
    // networkx.average_clustering: the mean over all n nodes of 2 T_v / (d_v (d_v - 1)), T_v the
    // triangles through v, 0 where d_v < 2; NaN for n = 0.
    double clustering = std::numeric_limits<double>::quiet_NaN();
    // laplacian.ipynb's path length (compat): networkx.average_shortest_path_length on the
    // largest connected component (of several of the largest, the one with the lowest node, as
    // max(nx.connected_components(G), key=len) picks it); NaN when it has fewer than 2 nodes.
    double lcc_avg_shortest_path = std::numeric_limits<double>::quiet_NaN();
    int64_t lcc_nodes = 0;
};

// The graph of a row-major [n, n] matrix `a` (query i, key j) at threshold tau (strict).
GraphPaths graph_paths(const Eigen::MatrixXd& a, double tau);
// The same at several thresholds; a threshold whose graph U equals the previous one's reuses its
// results (identical, without the searches).
std::vector<GraphPaths> graph_paths_all(const Eigen::MatrixXd& a, const std::vector<double>& taus);

}  // namespace sinkscope::metrics
