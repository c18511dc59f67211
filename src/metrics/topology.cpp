// Persistent homology of attention (spec 8, 10.j; PAPERS.md B.3): the compat construction with
// GUDHI, distances, diagram summaries. The principled Rips persistence is rips.cpp.
#include "sinkscope/metrics/topology.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>  // GUDHI's Persistent_cohomology.h uses std::cout without it
#include <tuple>

#include <gudhi/Persistent_cohomology.h>
#include <gudhi/Simplex_tree.h>

#include "sinkscope/core/error.hpp"

namespace sinkscope::metrics {
namespace {

// GUDHI's fast-persistence options store float filtrations; attention distances need double.
struct DoublePersistenceOptions : Gudhi::Simplex_tree_options_fast_persistence {
    typedef double Filtration_value;
};
using SimplexTree = Gudhi::Simplex_tree<DoublePersistenceOptions>;
using FieldZp = Gudhi::persistent_cohomology::Field_Zp;
using Cohomology = Gudhi::persistent_cohomology::Persistent_cohomology<SimplexTree, FieldZp>;
using Vertex = SimplexTree::Vertex_handle;

// Expands a 1-skeleton to triangles (needed for H1 deaths) and reads the bars over Z/2.
std::vector<PersistenceBar> flag_persistence(SimplexTree& st) {
    st.expansion(2);
    st.make_filtration_non_decreasing();
    st.initialize_filtration();
    Cohomology pcoh(st);
    pcoh.init_coefficients(2);
    pcoh.compute_persistent_cohomology(0.0);  // intervals of length <= 0 are dropped
    std::vector<PersistenceBar> bars;
    for (int dim = 0; dim <= 1; ++dim) {
        for (const auto& [birth, death] : pcoh.intervals_in_dimension(dim)) {
            PersistenceBar bar;
            bar.dim = dim;
            bar.birth = birth;
            bar.death = std::isinf(death) ? std::numeric_limits<double>::infinity() : death;
            bars.push_back(bar);
        }
    }
    sort_bars(bars);
    return bars;
}

}  // namespace

void sort_bars(std::vector<PersistenceBar>& bars) {
    std::sort(bars.begin(), bars.end(), [](const PersistenceBar& x, const PersistenceBar& y) {
        return std::tie(x.dim, x.birth, x.death) < std::tie(y.dim, y.birth, y.death);
    });
}

Eigen::MatrixXd symmetric_distance(const Eigen::MatrixXd& a, Symmetrize symmetrize) {
    SS_CHECK(a.rows() == a.cols(), "distance of a non-square matrix");
    Eigen::MatrixXd sym = symmetrize == Symmetrize::Max ? a.cwiseMax(a.transpose()).eval()
                                                        : (0.5 * (a + a.transpose())).eval();
    Eigen::MatrixXd d = (1.0 - sym.array()).matrix();  // [n, n]
    d.diagonal().setZero();
    return d;
}

std::vector<PersistenceBar> ripser_sparse_persistence(const Eigen::MatrixXd& dist) {
    const auto n = static_cast<Vertex>(dist.rows());
    SS_CHECK(dist.cols() == dist.rows(), "distance matrix is not square");
    SimplexTree st;
    for (Vertex v = 0; v < n; ++v) st.insert_simplex({v}, dist(v, v));
    for (Vertex i = 0; i < n; ++i) {
        for (Vertex j = i + 1; j < n; ++j) {
            if (dist(i, j) == 0.0) continue;  // scipy COO drops exact zeros: no edge
            const double f = std::max({dist(i, j), dist(i, i), dist(j, j)});
            st.insert_simplex({i, j}, f);
        }
    }
    return flag_persistence(st);
}

std::vector<int64_t> linspace_indices(int64_t n, int64_t k) {
    std::vector<int64_t> idx;
    if (n <= k) {
        for (int64_t i = 0; i < n; ++i) idx.push_back(i);
        return idx;
    }
    // numpy: y = arange(k) * ((n - 1) / (k - 1)), last element set to n - 1, then truncated.
    const double step = static_cast<double>(n - 1) / static_cast<double>(k - 1);
    for (int64_t i = 0; i < k; ++i)
        idx.push_back(i == k - 1 ? n - 1 : static_cast<int64_t>(static_cast<double>(i) * step));
    return idx;
}

DiagramSummary summarize_diagram(const std::vector<PersistenceBar>& bars, double long_bar) {
    DiagramSummary s;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::array<int64_t, 2> n_finite{};
    s.mean_persistence = {nan, nan};
    s.max_persistence = {nan, nan};
    for (const auto& b : bars) {
        if (b.dim < 0 || b.dim > 1) continue;
        const auto d = static_cast<size_t>(b.dim);
        ++s.n_bars[d];
        for (int g = 0; g < k_betti_grid_points; ++g) {
            const double eps = g / 100.0;
            if (b.birth <= eps && eps < b.death) s.betti[d][g] += 1;
        }
        if (std::isinf(b.death)) {
            ++s.n_essential[d];
            continue;
        }
        const double p = b.death - b.birth;
        s.total_persistence[d] += p;
        if (p > long_bar) ++s.n_long[d];
        s.max_persistence[d] = n_finite[d] == 0 ? p : std::max(s.max_persistence[d], p);
        ++n_finite[d];
    }
    for (size_t d = 0; d < 2; ++d)
        if (n_finite[d] > 0) s.mean_persistence[d] = s.total_persistence[d] / n_finite[d];
    return s;
}

}  // namespace sinkscope::metrics
