// Thresholded attention graphs (spec 8, 10.i; PAPERS.md B.4).
#include "sinkscope/metrics/graph.hpp"

#include <algorithm>
#include <numeric>

#include <Spectra/MatOp/DenseSymShiftSolve.h>
#include <Spectra/SymEigsShiftSolver.h>

#include "sinkscope/core/error.hpp"

namespace sinkscope::metrics {

double gini(std::vector<double> values) {
    const double total = std::accumulate(values.begin(), values.end(), 0.0);
    if (values.empty() || total <= 0) return 0.0;
    std::sort(values.begin(), values.end());
    const double n = static_cast<double>(values.size());
    double weighted = 0;
    for (size_t i = 0; i < values.size(); ++i) weighted += static_cast<double>(i + 1) * values[i];
    return 2.0 * weighted / (n * total) - (n + 1.0) / n;
}

std::vector<double> smallest_eigenvalues_iterative(const Eigen::MatrixXd& laplacian, int k) {
    const auto n = laplacian.rows();
    SS_CHECK(k < n, "need more nodes than eigenvalues: n=", n, " k=", k);
    // Shift-invert just below 0: the Laplacian is PSD, so the eigenvalues nearest to sigma are
    // the smallest ones, and L - sigma I is positive definite even for disconnected graphs.
    const double sigma = -1e-3;
    Spectra::DenseSymShiftSolve<double> op(laplacian);
    const int ncv = static_cast<int>(std::min<Eigen::Index>(n, std::max(2 * k + 1, 20)));
    Spectra::SymEigsShiftSolver<Spectra::DenseSymShiftSolve<double>> eigs(op, k, ncv, sigma);
    eigs.init();
    eigs.compute(Spectra::SortRule::LargestMagn, 1000, 1e-12, Spectra::SortRule::SmallestAlge);
    if (eigs.info() != Spectra::CompInfo::Successful)
        throw InternalError("Spectra did not converge on a Laplacian of " + std::to_string(n) +
                            " nodes");
    Eigen::VectorXd ev = eigs.eigenvalues();
    std::vector<double> out(ev.data(), ev.data() + ev.size());
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<double> smallest_eigenvalues(const Eigen::MatrixXd& laplacian, int k) {
    const auto n = laplacian.rows();
    if (n > k_dense_eigen_max_nodes) return smallest_eigenvalues_iterative(laplacian, k);
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver(laplacian, Eigen::EigenvaluesOnly);
    SS_CHECK(solver.info() == Eigen::Success, "dense eigensolver failed on n=", n);
    const auto& ev = solver.eigenvalues();  // ascending
    std::vector<double> out;
    for (Eigen::Index i = 0; i < std::min<Eigen::Index>(k, n); ++i) out.push_back(ev[i]);
    return out;
}

namespace {

// Edge set fingerprint: B itself (compared exactly) and the eigenvalue pair it produced.
struct SpectrumCache {
    Eigen::MatrixXd b;
    double lambda2 = 0, gap = 0;
    bool valid = false;
};

GraphStats graph_stats_cached(const Eigen::MatrixXd& a, double tau, bool compat,
                              SpectrumCache* cache) {
    const int64_t n = a.rows();
    SS_CHECK(a.cols() == n, "graph of a non-square matrix");
    GraphStats g;
    if (n == 0) return g;

    // Pass 1: B = 1[a > tau] with self-loops (spec 8); density counts them.
    Eigen::MatrixXd b = (a.array() > tau).cast<double>();  // [n, n] query i -> key j
    g.density = b.sum() / static_cast<double>(n * n);

    // Pass 2: Laplacian of W = (B + B^T)/2; self-loops cancel in L = diag(W 1) - W (10.i).
    Eigen::MatrixXd w = 0.5 * (b + b.transpose());  // [n, n]
    w.diagonal().setZero();
    if (cache && cache->valid && cache->b == b) {
        g.lambda2 = cache->lambda2;
        g.laplacian_gap = cache->gap;
    } else if (n >= 3 && w.sum() > 0) {  // no edge: every eigenvalue is 0
        Eigen::MatrixXd lap = -w;
        lap.diagonal() = w.rowwise().sum();
        const auto ev = smallest_eigenvalues(lap, 3);
        g.lambda2 = ev[1];
        g.laplacian_gap = ev[2] - ev[1];
    } else if (n == 2) {
        g.lambda2 = 2 * w(0, 1);  // eigenvalues of [[w, -w], [-w, w]] are 0 and 2w
        g.laplacian_gap = 0;
    }

    if (cache) {
        cache->b = b;
        cache->lambda2 = g.lambda2;
        cache->gap = g.laplacian_gap;
        cache->valid = true;
    }

    // Pass 3: in-degrees. Principled ignores the diagonal (10.i); compat counts self-loops and,
    // for n > 50, keeps only nodes that touch an edge (networkx from an edge list, B.4).
    Eigen::VectorXd in_degree = b.colwise().sum().transpose();  // [n]
    if (!compat) in_degree -= b.diagonal();
    std::vector<double> degrees;
    Eigen::VectorXd out_degree = b.rowwise().sum();  // [n]
    for (int64_t j = 0; j < n; ++j) {
        const bool touched = in_degree[j] > 0 || out_degree[j] > 0;
        if (compat && n > 50 && !touched) continue;
        degrees.push_back(in_degree[j]);
    }
    const auto n_nodes = static_cast<int64_t>(degrees.size());
    g.n_nodes = n_nodes;
    if (n_nodes == 0) return g;
    const double nn = static_cast<double>(n_nodes);
    const double d_max = *std::max_element(degrees.begin(), degrees.end());
    g.star_basic = d_max / std::max(1.0, nn - 1.0);
    g.gini = gini(degrees);
    g.star_combined = 0.3 * g.star_basic + 0.7 * g.gini;
    double deficit = 0, mean = 0;
    for (double d : degrees) {
        deficit += d_max - d;
        mean += d;
    }
    mean /= nn;
    g.centralization = n_nodes > 1 ? deficit / ((nn - 1) * (nn - 1)) : 0.0;
    double var = 0;
    for (double d : degrees) var += (d - mean) * (d - mean);
    g.degree_variance = var / nn;
    return g;
}

}  // namespace

GraphStats graph_stats(const Eigen::MatrixXd& a, double tau, bool compat) {
    return graph_stats_cached(a, tau, compat, nullptr);
}

std::vector<GraphStats> graph_stats_all(const Eigen::MatrixXd& a, const std::vector<double>& taus,
                                        bool compat) {
    SpectrumCache cache;
    std::vector<GraphStats> out;
    for (double tau : taus) out.push_back(graph_stats_cached(a, tau, compat, &cache));
    return out;
}

}  // namespace sinkscope::metrics
