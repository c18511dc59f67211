// Thresholded attention graphs (spec 8, 10.i; PAPERS.md B.4).
#include "sinkscope/metrics/graph.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include <Spectra/MatOp/DenseSymShiftSolve.h>
#include <Spectra/SymEigsShiftSolver.h>
#include <Spectra/SymEigsSolver.h>
#include <Eigen/SparseCholesky>
#include <Eigen/SparseCore>

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

namespace {

std::vector<double> dense_smallest(const Eigen::MatrixXd& laplacian, int k) {
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver(laplacian, Eigen::EigenvaluesOnly);
    SS_CHECK(solver.info() == Eigen::Success, "dense eigensolver failed on n=", laplacian.rows());
    const auto& ev = solver.eigenvalues();  // ascending
    std::vector<double> out;
    for (Eigen::Index i = 0; i < std::min<Eigen::Index>(k, ev.size()); ++i) out.push_back(ev[i]);
    return out;
}

}  // namespace

std::vector<double> smallest_eigenvalues_iterative(const Eigen::MatrixXd& laplacian, int k) {
    const auto n = laplacian.rows();
    SS_CHECK(k < n, "need more nodes than eigenvalues: n=", n, " k=", k);
    // Shift-invert just below 0: the Laplacian is PSD, so the eigenvalues nearest to sigma are
    // the smallest ones, and L - sigma I is positive definite even for disconnected graphs.
    // Lanczos sees one copy of a repeated eigenvalue only: graphs use laplacian_lambda23, which
    // deflates.
    Spectra::DenseSymShiftSolve<double> op(laplacian);
    const int ncv = static_cast<int>(std::min<Eigen::Index>(n, std::max(2 * k + 1, 20)));
    Spectra::SymEigsShiftSolver<Spectra::DenseSymShiftSolve<double>> eigs(op, k, ncv,
                                                                          k_laplacian_shift);
    eigs.init();
    eigs.compute(Spectra::SortRule::LargestMagn, 1000, k_lanczos_tol,
                 Spectra::SortRule::SmallestAlge);
    // Not converged: the dense solver gives the answer, only slower.
    if (eigs.info() != Spectra::CompInfo::Successful) return dense_smallest(laplacian, k);
    Eigen::VectorXd ev = eigs.eigenvalues();
    std::vector<double> out(ev.data(), ev.data() + ev.size());
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<double> smallest_eigenvalues(const Eigen::MatrixXd& laplacian, int k) {
    const auto n = laplacian.rows();
    if (n > k_dense_eigen_max_nodes) return smallest_eigenvalues_iterative(laplacian, k);
    return dense_smallest(laplacian, k);
}

namespace {

using SparseMatrix = Eigen::SparseMatrix<double, Eigen::ColMajor, int>;

// Dense Laplacian of a graph on n nodes: off-diagonal -w, diagonal the weighted degree. The
// weights are 1/2 and 1, so every degree is exact whatever the summation order.
Eigen::MatrixXd dense_laplacian(int64_t n, const std::vector<WeightedEdge>& edges) {
    // Built as -W + diag(W 1) was before: off-diagonal -0.0 where there is no edge, so a small
    // graph's dense solve sees the same matrix bit for bit.
    Eigen::MatrixXd lap = Eigen::MatrixXd::Constant(n, n, -0.0);  // [n, n]
    lap.diagonal().setZero();
    for (const auto& e : edges) {
        lap(e.u, e.v) -= e.w;
        lap(e.v, e.u) -= e.w;
        lap(e.u, e.u) += e.w;
        lap(e.v, e.v) += e.w;
    }
    return lap;
}

// Simplicial sparse Cholesky (AMD order) that tells, after its symbolic analysis, what the
// numeric factorisation will cost: sum over columns of (column count)^2 multiply-adds.
class SparseLlt : public Eigen::SimplicialLLT<SparseMatrix, Eigen::Lower, Eigen::AMDOrdering<int>> {
public:
    double factor_flops() const {
        double f = 0;
        for (Eigen::Index k = 0; k < m_nonZerosPerCol.size(); ++k) {
            const double c = static_cast<double>(m_nonZerosPerCol[k]) + 1.0;
            f += c * c;
        }
        return f;
    }
};

// The Lanczos operators work on the complement of span(V), V orthonormal eigenvectors of L
// (the constant vector, then also lambda_2's): y = P B P x with P = I - V V^T and B either
// (L - sigma I)^{-1} (shift-invert: eigenvalue 1 / (lambda - sigma)) or c I - L (direct, c >= the
// largest eigenvalue: eigenvalue c - lambda). On span(V) the operator is 0, so its largest
// eigenvalue belongs to the smallest eigenvalue of L outside span(V).
class DeflatedOperator {
public:
    using Scalar = double;

    explicit DeflatedOperator(const SparseMatrix& lap) : lap_(lap) {}
    // Shift-invert through a factorisation of L - sigma I.
    void use_sparse(const SparseLlt* llt) { sparse_ = llt, dense_ = nullptr; }
    void use_dense(const Eigen::LLT<Eigen::MatrixXd>* llt) { dense_ = llt, sparse_ = nullptr; }
    // Direct: c I - L.
    void use_direct(double c) { c_ = c, sparse_ = nullptr, dense_ = nullptr; }
    bool direct() const { return !sparse_ && !dense_; }
    // lambda of L from an eigenvalue theta of the operator.
    double lambda_of(double theta) const {
        return direct() ? c_ - theta : 1.0 / theta + k_laplacian_shift;
    }

    void set_deflation(Eigen::MatrixXd v) { v_ = std::move(v); }  // [n, k], orthonormal
    Eigen::Index rows() const { return lap_.rows(); }
    Eigen::Index cols() const { return lap_.rows(); }
    void project(Eigen::Ref<Eigen::VectorXd> x) const {
        if (v_.cols() > 0) x -= v_ * (v_.transpose() * x);
    }
    void perform_op(const double* x_in, double* y_out) const {
        Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(x_in, rows());
        project(x);
        Eigen::Map<Eigen::VectorXd> y(y_out, rows());
        if (sparse_) {
            y = sparse_->solve(x);
        } else if (dense_) {
            y = dense_->solve(x);
        } else {
            y = c_ * x;
            y.noalias() -= lap_.selfadjointView<Eigen::Lower>() * x;
        }
        project(y);
    }

private:
    const SparseMatrix& lap_;  // lower triangle of L
    const SparseLlt* sparse_ = nullptr;
    const Eigen::LLT<Eigen::MatrixXd>* dense_ = nullptr;
    double c_ = 0;
    Eigen::MatrixXd v_;
};

// The largest eigenpair of the operator as (lambda of L, eigenvector); false when Lanczos did not
// converge within `max_restarts`. The start vector is a fixed pseudo-random one, projected.
bool smallest_outside(DeflatedOperator& op, int ncv, int max_restarts, double& lambda,
                      Eigen::VectorXd& vec) {
    const auto n = op.rows();
    Spectra::SymEigsSolver<DeflatedOperator> eigs(op, 1, std::min<Eigen::Index>(n, ncv));
    std::mt19937_64 rng(20251);
    std::uniform_real_distribution<double> uniform(-0.5, 0.5);
    Eigen::VectorXd start(n);
    for (Eigen::Index i = 0; i < n; ++i) start[i] = uniform(rng);
    op.project(start);
    eigs.init(start.data());
    eigs.compute(Spectra::SortRule::LargestAlge, max_restarts, k_lanczos_tol);
    if (eigs.info() != Spectra::CompInfo::Successful) return false;
    const double theta = eigs.eigenvalues()[0];
    if (!op.direct() && !(theta > 0)) return false;
    lambda = op.lambda_of(theta);
    vec = eigs.eigenvectors().col(0);
    return true;
}

// lambda_2 and, when `both`, lambda_3 of the operator's graph: the first run deflates the null
// vector (constant, known exactly), the second also lambda_2's eigenvector, so a repeated
// lambda_2 (a cycle, a star: lambda = 1 on every leaf) is found twice; Lanczos on one Krylov
// space sees a second copy only through rounding and can miss it. False when a run does not
// converge.
bool deflated_pair(DeflatedOperator& op, int ncv, int max_restarts, bool both,
                   std::array<double, 2>& out) {
    const auto m = op.rows();
    Eigen::MatrixXd v(m, 1);  // [m, 1] the normalised constant vector, L's null vector
    v.setConstant(1.0 / std::sqrt(static_cast<double>(m)));
    op.set_deflation(v);
    Eigen::VectorXd vec;
    if (!smallest_outside(op, ncv, max_restarts, out[0], vec)) return false;
    if (!both) return true;
    // Orthonormalise the Ritz vector against the constant (it is orthogonal up to rounding).
    vec -= v.col(0) * v.col(0).dot(vec);
    vec.normalize();
    v.conservativeResize(m, 2);
    v.col(1) = vec;
    op.set_deflation(v);
    if (!smallest_outside(op, ncv, max_restarts, out[1], vec)) return false;
    // lambda_3 >= lambda_2 exactly; the two runs may disagree by their tolerance when equal.
    out[1] = std::max(out[1], out[0]);
    return true;
}

// lambda_2 and, when `both`, lambda_3 of a connected graph's Laplacian (m nodes, local ids).
// Shift-invert Lanczos where the sparse Cholesky of L - sigma I is cheap (little fill: paths,
// stars, bands, where the small eigenvalues are too close for plain Lanczos); otherwise plain
// Lanczos on c I - L (graphs dense enough to fill the factor have well separated small
// eigenvalues), with a bounded number of restarts; then a factorisation; then the dense solver.
std::array<double, 2> connected_lambda23(int64_t m, const std::vector<WeightedEdge>& edges,
                                         bool both) {
    auto dense = [&] {
        const auto ev = dense_smallest(dense_laplacian(m, edges), 3);
        return std::array<double, 2>{ev[1], ev.size() > 2 ? ev[2] : ev[1]};
    };
    if (m <= k_dense_eigen_max_nodes) return dense();
    std::vector<Eigen::Triplet<double, int>> t;
    t.reserve(edges.size() + static_cast<size_t>(m));
    Eigen::VectorXd degree = Eigen::VectorXd::Zero(m);  // [m]
    for (const auto& e : edges) {
        t.emplace_back(e.v, e.u, -e.w);  // lower triangle (u < v)
        degree[e.u] += e.w;
        degree[e.v] += e.w;
    }
    for (int64_t i = 0; i < m; ++i)
        t.emplace_back(static_cast<int>(i), static_cast<int>(i), degree[i]);
    SparseMatrix lap(m, m);  // lower triangle of L
    lap.setFromTriplets(t.begin(), t.end());
    SparseMatrix shifted = lap;  // L - sigma I, positive definite
    for (Eigen::Index i = 0; i < m; ++i) shifted.coeffRef(i, i) -= k_laplacian_shift;

    DeflatedOperator op(lap);
    std::array<double, 2> out{};
    SparseLlt sparse;
    sparse.analyzePattern(shifted);
    const double nnz = static_cast<double>(lap.nonZeros());
    const bool cheap_factor = sparse.factor_flops() <= k_sparse_factor_budget * nnz;
    if (!cheap_factor) {
        // Gershgorin: every eigenvalue of L is <= 2 max degree.
        op.use_direct(2.0 * degree.maxCoeff());
        if (deflated_pair(op, k_lanczos_direct_ncv, k_lanczos_direct_max_restarts, both, out))
            return out;
    }
    const double md = static_cast<double>(m);
    Eigen::LLT<Eigen::MatrixXd> dense_llt;
    if (cheap_factor || sparse.factor_flops() < md * md * md / 3.0 / k_dense_factor_speedup) {
        sparse.factorize(shifted);
        if (sparse.info() != Eigen::Success) return dense();
        op.use_sparse(&sparse);
    } else {
        dense_llt.compute(Eigen::MatrixXd(shifted));  // LLT reads the lower triangle
        if (dense_llt.info() != Eigen::Success) return dense();
        op.use_dense(&dense_llt);
    }
    if (deflated_pair(op, k_lanczos_ncv, k_lanczos_max_restarts, both, out)) return out;
    return dense();
}

}  // namespace

std::array<double, 2> laplacian_lambda23(int64_t n, const std::vector<WeightedEdge>& edges) {
    SS_CHECK(n >= 3, "laplacian_lambda23 needs 3 nodes, got ", n);
    if (edges.empty()) return {0.0, 0.0};  // no edge: every eigenvalue is 0
    if (n <= k_dense_eigen_max_nodes) {
        const auto ev = smallest_eigenvalues(dense_laplacian(n, edges), 3);
        return {ev[1], ev[2]};
    }
    // Connected components (union-find). The spectrum of L is the union of the components'
    // spectra and each component contributes one 0: with >= 3 components lambda_2 = lambda_3
    // = 0 exactly; with 2, lambda_2 = 0 and lambda_3 = the smaller algebraic connectivity.
    std::vector<int64_t> parent(static_cast<size_t>(n));
    std::iota(parent.begin(), parent.end(), 0);
    auto find = [&](int64_t x) {
        while (parent[x] != x) x = parent[x] = parent[parent[x]];
        return x;
    };
    int64_t n_components = n;
    for (const auto& e : edges) {
        const int64_t a = find(e.u), b = find(e.v);
        if (a == b) continue;
        parent[std::max(a, b)] = std::min(a, b);
        --n_components;
    }
    if (n_components >= 3) return {0.0, 0.0};
    if (n_components == 1) return connected_lambda23(n, edges, true);
    // Two components: relabel each one's nodes 0..m-1 in node order.
    std::vector<int64_t> local(static_cast<size_t>(n)), size_of(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < n; ++i) local[i] = size_of[find(i)]++;
    std::vector<std::vector<WeightedEdge>> parts(static_cast<size_t>(n));
    for (const auto& e : edges)
        parts[find(e.u)].push_back(
            {static_cast<int32_t>(local[e.u]), static_cast<int32_t>(local[e.v]), e.w});
    double lambda3 = std::numeric_limits<double>::infinity();
    for (int64_t r = 0; r < n; ++r)
        if (find(r) == r && size_of[r] >= 2)
            lambda3 = std::min(lambda3, size_of[r] == 2
                                            ? 2.0 * parts[r].front().w
                                            : connected_lambda23(size_of[r], parts[r], false)[0]);
    return {0.0, lambda3};
}

namespace {

// The edge set (W) and the eigenvalue pair it produced.
struct SpectrumCache {
    std::vector<WeightedEdge> edges;
    double lambda2 = 0, gap = 0;
    bool valid = false;
};

bool same_edges(const std::vector<WeightedEdge>& x, const std::vector<WeightedEdge>& y) {
    return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin(),
                                              [](const WeightedEdge& a, const WeightedEdge& b) {
                                                  return a.u == b.u && a.v == b.v && a.w == b.w;
                                              });
}

GraphStats graph_stats_cached(const Eigen::MatrixXd& a, double tau, bool compat,
                              SpectrumCache* cache) {
    const int64_t n = a.rows();
    SS_CHECK(a.cols() == n, "graph of a non-square matrix");
    GraphStats g;
    if (n == 0) return g;

    // Pass 1: B = 1[a > tau] with self-loops (spec 8), never stored: its count (density counts
    // the self-loops), in- and out-degrees, and the edges of W = (B + B^T)/2 without the
    // diagonal (self-loops cancel in L = diag(W 1) - W, 10.i): one per pair i < j, weight 1/2
    // for a one-way edge and 1 for a two-way one. Tiles keep a(i, j) and a(j, i) in cache.
    std::vector<double> in_degree(static_cast<size_t>(n), 0.0),
        out_degree(static_cast<size_t>(n), 0.0);
    std::vector<WeightedEdge> edges;
    int64_t n_set = 0;
    constexpr int64_t tile = 64;
    for (int64_t jb = 0; jb < n; jb += tile) {
        const int64_t je = std::min(n, jb + tile);
        for (int64_t ib = jb; ib < n; ib += tile) {
            const int64_t ie = std::min(n, ib + tile);
            for (int64_t j = jb; j < je; ++j) {
                for (int64_t i = std::max(ib, j + 1); i < ie; ++i) {
                    const bool down = a(i, j) > tau;  // query i -> key j
                    const bool up = a(j, i) > tau;    // query j -> key i
                    if (!down && !up) continue;
                    if (down) ++in_degree[j], ++out_degree[i];
                    if (up) ++in_degree[i], ++out_degree[j];
                    n_set += down + up;
                    edges.push_back(
                        {static_cast<int32_t>(j), static_cast<int32_t>(i), down && up ? 1.0 : 0.5});
                }
            }
        }
    }
    std::vector<char> self_loop(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < n; ++i) {
        if (!(a(i, i) > tau)) continue;
        self_loop[i] = 1;
        ++n_set;
    }
    g.density = static_cast<double>(n_set) / static_cast<double>(n * n);

    // Pass 2: lambda_2 and lambda_3 of the Laplacian of W.
    if (cache && cache->valid && same_edges(cache->edges, edges)) {
        g.lambda2 = cache->lambda2;
        g.laplacian_gap = cache->gap;
    } else if (n >= 3 && !edges.empty()) {
        const auto ev = laplacian_lambda23(n, edges);
        g.lambda2 = ev[0];
        g.laplacian_gap = ev[1] - ev[0];
    } else if (n == 2) {
        g.lambda2 = edges.empty() ? 0.0 : 2 * edges.front().w;  // eigenvalues 0 and 2w
        g.laplacian_gap = 0;
    }

    // Pass 3: in-degrees. Principled ignores the diagonal (10.i); compat counts self-loops and,
    // for n > 50, keeps only nodes that touch an edge (networkx from an edge list, B.4).
    std::vector<double> degrees;
    for (int64_t j = 0; j < n; ++j) {
        const double in = in_degree[j] + (compat && self_loop[j] ? 1.0 : 0.0);
        const bool touched = in_degree[j] > 0 || out_degree[j] > 0 || self_loop[j];
        if (compat && n > 50 && !touched) continue;
        degrees.push_back(in);
    }
    if (cache) {
        cache->edges = std::move(edges);
        cache->lambda2 = g.lambda2;
        cache->gap = g.laplacian_gap;
        cache->valid = true;
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
