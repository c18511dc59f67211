// Thresholded attention graphs of the reference-frame analyses (spec section 8 "Thresholded
// graphs", 10.i, PAPERS.md B.4): density, Laplacian spectrum of the symmetrised graph and in-degree
// statistics.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <Eigen/Dense>

namespace sinkscope::metrics {

// The seven thresholds of laplacian.ipynb (spec 8).
inline constexpr std::array<double, 7> k_graph_thresholds{0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2};
// Up to this many nodes the Laplacian is solved densely; above it iteratively (Spectra).
inline constexpr int64_t k_dense_eigen_max_nodes = 256;
// The iterative solver: Lanczos (Spectra) on (L - sigma I)^{-1}, sigma just below 0 so that
// L - sigma I is positive definite even for a disconnected graph. Spectra stops when a Ritz
// value theta = 1/(lambda - sigma) has residual < tol * theta; the error of a symmetric Ritz
// value is at most its residual, so |d lambda| = |d theta| / theta^2 <= tol (lambda - sigma),
// plus the rounding of the Cholesky factorisation, which like a dense solve's is a backward
// error of order n u ||L||. A run that does not converge falls back to the dense solver.
inline constexpr double k_laplacian_shift = -1e-3;
inline constexpr double k_lanczos_tol = 1e-12;
inline constexpr int k_lanczos_ncv = 20;
inline constexpr int k_lanczos_max_restarts = 1000;
// Shift-invert is used where the sparse Cholesky factorisation costs at most this many
// multiply-adds per non-zero of L (little fill); otherwise plain Lanczos on c I - L (c = 2 max
// degree >= lambda_max) first, which stops when the residual < tol * (c - lambda): there
// |d lambda| <= tol * 2 max degree. Its restarts are bounded; then the factorisation after all
// (dense blocked Cholesky where it is this many times cheaper per multiply-add than the
// simplicial one), then the dense eigensolver.
inline constexpr double k_sparse_factor_budget = 1000;
inline constexpr int k_lanczos_direct_ncv = 40;
inline constexpr int k_lanczos_direct_max_restarts = 50;
inline constexpr double k_dense_factor_speedup = 4;
// A threshold is "effective" when the density averaged over inputs lies in this range (10.i).
inline constexpr double k_effective_density_lo = 0.05;
inline constexpr double k_effective_density_hi = 0.95;

struct GraphStats {
    int64_t n_nodes = 0;         // nodes entering the degree statistics
    double density = 0;          // sum B / n^2, self-loops counted
    double lambda2 = 0;          // algebraic connectivity of L(W), W = (B + B^T)/2
    double laplacian_gap = 0;    // lambda_3 - lambda_2
    double star_basic = 0;       // d* / max(1, N-1)
    double star_combined = 0;    // 0.3 basic + 0.7 Gini
    double gini = 0;             // Gini of in-degrees
    double centralization = 0;   // Freeman in-degree: sum(d* - d_i) / (N-1)^2
    double degree_variance = 0;  // population variance of in-degrees
};

// Graph of B = 1[a > tau] (strict, spec 8) for a row-major [n, n] matrix `a` (query i, key j).
// `compat` = ruscio2025 (10.i): self-loops count in the in-degrees and, for n > 50, only nodes
// touched by an edge enter the degree statistics (laplacian.ipynb builds the graph from edges).
GraphStats graph_stats(const Eigen::MatrixXd& a, double tau, bool compat);
// The same at several thresholds; when two thresholds give the same edge set the Laplacian
// spectrum is reused (identical results, fewer eigensolves).
std::vector<GraphStats> graph_stats_all(const Eigen::MatrixXd& a, const std::vector<double>& taus,
                                        bool compat);

// The `k` smallest eigenvalues (ascending) of a symmetric positive semi-definite matrix:
// Eigen's dense solver for n <= k_dense_eigen_max_nodes, Spectra shift-invert above (dense
// when Spectra does not converge). Lanczos on one start vector may see one copy of a repeated
// eigenvalue: for graphs use laplacian_lambda23, which does not have that blind spot.
std::vector<double> smallest_eigenvalues(const Eigen::MatrixXd& laplacian, int k);
// Forces the iterative branch (tests run it on small graphs too).
std::vector<double> smallest_eigenvalues_iterative(const Eigen::MatrixXd& laplacian, int k);

// One undirected edge of W, each pair once (u < v), weight w > 0.
struct WeightedEdge {
    int32_t u = 0, v = 0;
    double w = 0;
};
// lambda_2 and lambda_3 (ascending, repeated eigenvalues counted) of the Laplacian
// L = diag(W 1) - W of a graph on n >= 3 nodes. n <= k_dense_eigen_max_nodes: one dense solve.
// Above: the spectrum is the union of the connected components' spectra, each holding one 0, so
// >= 3 components give (0, 0) exactly and 2 give (0, smaller algebraic connectivity); a
// connected graph (or component) of more than k_dense_eigen_max_nodes nodes is solved by
// shift-invert Lanczos with the known null vector deflated, and lambda_3 by a second run that
// also deflates lambda_2's eigenvector (so a repeated lambda_2 is found twice). Error bound:
// see k_lanczos_tol.
std::array<double, 2> laplacian_lambda23(int64_t n, const std::vector<WeightedEdge>& edges);

// Gini of non-negative values, sorted ascending with ranks i = 1..N:
// 2 sum_i i x_(i) / (N sum x) - (N+1)/N; 0 when all values are 0 (10.i).
double gini(std::vector<double> values);

}  // namespace sinkscope::metrics
