// Head clustering (spec 4, 10.h): classical MDS, agglomerative linkages, silhouette, ARI.
#include "sinkscope/metrics/cluster.hpp"

#include <Spectra/MatOp/DenseSymMatProd.h>
#include <Spectra/SymEigsSolver.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "sinkscope/core/error.hpp"

namespace sinkscope::metrics {

namespace {

void check_distance_matrix(const Eigen::MatrixXd& d) {
    SS_CHECK(d.rows() == d.cols(), "distance matrix must be square, got ", d.rows(), " x ",
             d.cols());
    SS_CHECK(d.allFinite(), "distance matrix has non-finite entries");
}

// Below this size a dense eigensolver is as fast as Lanczos and has no convergence questions.
constexpr Eigen::Index kDenseEigenMax = 64;

}  // namespace

Eigen::MatrixXd classical_mds(const Eigen::MatrixXd& d, int n_dims) {
    check_distance_matrix(d);
    SS_CHECK(n_dims >= 1, "n_dims must be >= 1, got ", n_dims);
    const Eigen::Index n = d.rows();
    Eigen::MatrixXd coords = Eigen::MatrixXd::Zero(n, n_dims);  // [head, axis]
    if (n == 0) return coords;

    // Pass 1: double centring of the squared distances, B = -1/2 J D.^2 J.
    Eigen::MatrixXd sq = (0.5 * (d + d.transpose())).array().square().matrix();  // [n, n]
    const Eigen::VectorXd row_mean = sq.rowwise().mean();                        // [n]
    const double grand_mean = row_mean.mean();
    Eigen::MatrixXd b = -0.5 * ((sq.colwise() - row_mean).rowwise() - row_mean.transpose());
    b.array() -= 0.5 * grand_mean;  // the + grand mean inside the bracket
    b = 0.5 * (b + b.transpose()).eval();

    // Pass 2: the n_dims largest eigenpairs (algebraic; negative ones give zero coordinates).
    const Eigen::Index n_eig = std::min<Eigen::Index>(n_dims, n);
    Eigen::VectorXd values(n_eig);      // [axis], decreasing
    Eigen::MatrixXd vectors(n, n_eig);  // [head, axis]
    bool done = false;
    if (n > kDenseEigenMax && n_eig < n - 1) {
        Spectra::DenseSymMatProd<double> op(b);
        const Eigen::Index ncv =
            std::min<Eigen::Index>(n, std::max<Eigen::Index>(20, 2 * n_eig + 1));
        Spectra::SymEigsSolver<Spectra::DenseSymMatProd<double>> eigs(op, n_eig, ncv);
        eigs.init();
        eigs.compute(Spectra::SortRule::LargestAlge, 10000, 1e-14);
        if (eigs.info() == Spectra::CompInfo::Successful) {
            values = eigs.eigenvalues();
            vectors = eigs.eigenvectors();
            done = true;
        }
    }
    if (!done) {
        Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(b);
        SS_CHECK(es.info() == Eigen::Success, "eigendecomposition failed in classical MDS");
        for (Eigen::Index k = 0; k < n_eig; ++k) {
            values(k) = es.eigenvalues()(n - 1 - k);
            vectors.col(k) = es.eigenvectors().col(n - 1 - k);
        }
    }

    // Pass 3: scale, then the sign rule of spec 10.h.
    for (Eigen::Index k = 0; k < n_eig; ++k) {
        Eigen::VectorXd axis = vectors.col(k) * std::sqrt(std::max(values(k), 0.0));
        Eigen::Index arg = 0;
        for (Eigen::Index i = 1; i < n; ++i)
            if (std::fabs(axis(i)) > std::fabs(axis(arg))) arg = i;
        if (axis(arg) < 0) axis = -axis;
        coords.col(k) = axis;
    }
    return coords;
}

Linkage parse_linkage(const std::string& text) {
    if (text == "average") return Linkage::Average;
    if (text == "complete") return Linkage::Complete;
    if (text == "single") return Linkage::Single;
    if (text == "ward") return Linkage::Ward;
    throw UsageError("linkage must be average, complete, single or ward, got '" + text + "'");
}

const char* to_string(Linkage linkage) {
    switch (linkage) {
        case Linkage::Average:
            return "average";
        case Linkage::Complete:
            return "complete";
        case Linkage::Single:
            return "single";
        case Linkage::Ward:
            return "ward";
    }
    return "?";
}

std::vector<Merge> linkage_tree(const Eigen::MatrixXd& d, Linkage linkage) {
    check_distance_matrix(d);
    const int n = static_cast<int>(d.rows());
    std::vector<Merge> merges;
    if (n < 2) return merges;
    merges.reserve(static_cast<size_t>(n - 1));

    // w(k, x) is the linkage distance between the clusters represented by k and x; columns are
    // read contiguously.
    Eigen::MatrixXd w = 0.5 * (d + d.transpose());  // [n, n]
    std::vector<int> size(static_cast<size_t>(n), 1);
    std::vector<char> active(static_cast<size_t>(n), 1);
    std::vector<int> chain;
    int first_active = 0;
    while (static_cast<int>(merges.size()) < n - 1) {
        if (chain.empty()) {
            while (!active[static_cast<size_t>(first_active)]) ++first_active;
            chain.push_back(first_active);
        }
        // Grow the chain of nearest neighbours until two clusters are each other's nearest.
        int x = 0;
        int y = 0;
        double best = 0;
        while (true) {
            x = chain.back();
            const int prev = chain.size() >= 2 ? chain[chain.size() - 2] : -1;
            // On ties prefer the previous chain element, so the chain always terminates.
            y = prev;
            best = prev >= 0 ? w(prev, x) : std::numeric_limits<double>::infinity();
            for (int k = 0; k < n; ++k) {
                if (k == x || !active[static_cast<size_t>(k)]) continue;
                if (w(k, x) < best) {
                    best = w(k, x);
                    y = k;
                }
            }
            if (y == prev) break;
            chain.push_back(y);
        }
        chain.pop_back();
        chain.pop_back();
        merges.push_back({std::min(x, y), std::max(x, y), best});

        // Lance-Williams update of the linkage (cluster.hpp) for the union keep + drop.
        const int keep = std::min(x, y);
        const int drop = std::max(x, y);
        const double sx = size[static_cast<size_t>(keep)];
        const double sy = size[static_cast<size_t>(drop)];
        const double dxy = best;
        for (int k = 0; k < n; ++k) {
            if (!active[static_cast<size_t>(k)] || k == keep || k == drop) continue;
            const double a = w(k, keep), b = w(k, drop);
            double v = 0;
            switch (linkage) {
                case Linkage::Average:
                    v = (sx * a + sy * b) / (sx + sy);
                    break;
                case Linkage::Complete:
                    v = std::max(a, b);
                    break;
                case Linkage::Single:
                    v = std::min(a, b);
                    break;
                case Linkage::Ward: {
                    const double sk = size[static_cast<size_t>(k)];
                    const double q =
                        ((sk + sx) * a * a + (sk + sy) * b * b - sk * dxy * dxy) / (sk + sx + sy);
                    v = std::sqrt(std::max(q, 0.0));
                    break;
                }
            }
            w(k, keep) = v;
            w(keep, k) = v;
        }
        size[static_cast<size_t>(keep)] += size[static_cast<size_t>(drop)];
        active[static_cast<size_t>(drop)] = 0;
    }
    // The chain finds merges out of height order; every linkage here is monotone, so sorting by
    // height (stable: a child merge found before its equal-height parent stays first) gives the
    // dendrogram's order.
    std::stable_sort(merges.begin(), merges.end(),
                     [](const Merge& p, const Merge& q) { return p.height < q.height; });
    return merges;
}

std::vector<int> cut_dendrogram(const std::vector<Merge>& merges, int n, int k) {
    SS_CHECK(n >= 1 && k >= 1 && k <= n, "cannot cut ", n, " items into ", k, " clusters");
    SS_CHECK(static_cast<int>(merges.size()) == n - 1, "dendrogram of ", n, " items has ",
             merges.size(), " merges");
    std::vector<int> parent(static_cast<size_t>(n));
    std::iota(parent.begin(), parent.end(), 0);
    auto find = [&parent](int i) {
        while (parent[static_cast<size_t>(i)] != i) {
            parent[static_cast<size_t>(i)] =
                parent[static_cast<size_t>(parent[static_cast<size_t>(i)])];
            i = parent[static_cast<size_t>(i)];
        }
        return i;
    };
    for (int m = 0; m < n - k; ++m) {
        const int ra = find(merges[static_cast<size_t>(m)].a);
        const int rb = find(merges[static_cast<size_t>(m)].b);
        SS_CHECK(ra != rb, "dendrogram merge ", m, " joins a cluster with itself");
        parent[static_cast<size_t>(std::max(ra, rb))] = std::min(ra, rb);
    }
    std::vector<int> labels(static_cast<size_t>(n));
    std::map<int, int> label_of_root;
    for (int i = 0; i < n; ++i) {
        const int r = find(i);
        auto it = label_of_root.emplace(r, static_cast<int>(label_of_root.size())).first;
        labels[static_cast<size_t>(i)] = it->second;
    }
    return labels;
}

std::vector<int> cluster_linkage(const Eigen::MatrixXd& d, int k, Linkage linkage) {
    return cut_dendrogram(linkage_tree(d, linkage), static_cast<int>(d.rows()), k);
}

int best_k_by_silhouette(const Eigen::MatrixXd& d, Linkage linkage,
                         std::vector<std::pair<int, double>>* scores) {
    const int n = static_cast<int>(d.rows());
    if (n < 3) return 0;
    const std::vector<Merge> tree = linkage_tree(d, linkage);
    double best = -std::numeric_limits<double>::infinity();
    int k = 0;
    for (int kk = 2; kk <= std::min(12, n - 1); ++kk) {
        const double s = mean_silhouette(d, cut_dendrogram(tree, n, kk));
        if (scores) scores->emplace_back(kk, s);
        if (s > best) best = s, k = kk;
    }
    return k;
}

double mean_silhouette(const Eigen::MatrixXd& d, const std::vector<int>& labels) {
    check_distance_matrix(d);
    const size_t n = labels.size();
    SS_CHECK(static_cast<Eigen::Index>(n) == d.rows(), "silhouette: ", n, " labels for ", d.rows(),
             " items");
    if (n == 0) return std::numeric_limits<double>::quiet_NaN();
    SS_CHECK(*std::min_element(labels.begin(), labels.end()) >= 0, "negative cluster label");
    const size_t n_clusters =
        static_cast<size_t>(*std::max_element(labels.begin(), labels.end())) + 1;
    std::vector<double> count(n_clusters, 0.0);
    for (int l : labels) count[static_cast<size_t>(l)] += 1;
    SS_CHECK(std::count_if(count.begin(), count.end(), [](double c) { return c > 0; }) >= 2,
             "silhouette needs at least 2 clusters");
    std::vector<double> sum(n_clusters);
    double total = 0;
    for (size_t i = 0; i < n; ++i) {
        std::fill(sum.begin(), sum.end(), 0.0);
        for (size_t j = 0; j < n; ++j)
            if (j != i)
                sum[static_cast<size_t>(labels[j])] +=
                    d(static_cast<Eigen::Index>(j), static_cast<Eigen::Index>(i));
        const size_t own = static_cast<size_t>(labels[i]);
        if (count[own] <= 1) continue;  // s(i) = 0 for a singleton
        const double a = sum[own] / (count[own] - 1);
        double b = std::numeric_limits<double>::infinity();
        for (size_t c = 0; c < n_clusters; ++c)
            if (c != own && count[c] > 0) b = std::min(b, sum[c] / count[c]);
        const double denom = std::max(a, b);
        if (denom > 0) total += (b - a) / denom;
    }
    return total / static_cast<double>(n);
}

double adjusted_rand_index(const std::vector<int>& a, const std::vector<int>& b) {
    SS_CHECK(a.size() == b.size(), "ARI of labelings of different lengths ", a.size(), " and ",
             b.size());
    const double n = static_cast<double>(a.size());
    std::map<std::pair<int, int>, double> cell;
    std::map<int, double> row;
    std::map<int, double> col;
    for (size_t i = 0; i < a.size(); ++i) {
        cell[{a[i], b[i]}] += 1;
        row[a[i]] += 1;
        col[b[i]] += 1;
    }
    auto pairs = [](double m) { return m * (m - 1) / 2; };
    double index = 0;
    for (const auto& [key, m] : cell) index += pairs(m);
    double sum_rows = 0;
    for (const auto& [key, m] : row) sum_rows += pairs(m);
    double sum_cols = 0;
    for (const auto& [key, m] : col) sum_cols += pairs(m);
    const double total_pairs = pairs(n);
    const double expected = total_pairs > 0 ? sum_rows * sum_cols / total_pairs : 0.0;
    const double max_index = 0.5 * (sum_rows + sum_cols);
    const double denom = max_index - expected;
    if (denom == 0) return 1.0;
    return (index - expected) / denom;
}

}  // namespace sinkscope::metrics
