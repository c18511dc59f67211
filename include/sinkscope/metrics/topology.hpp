// Persistent homology of attention (spec section 8 "Persistent homology", 10.j; compat
// semantics of topology.ipynb + ripser.py in PAPERS.md B.3). Vietoris-Rips up to dimension 1
// over Z/2: the principled construction computed from the distance matrix (rips.cpp), the compat
// one with GUDHI.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include <Eigen/Dense>

namespace sinkscope::metrics {

inline constexpr int k_betti_grid_points = 101;     // eps = 0, 0.01, ..., 1 (10.j)
inline constexpr double k_long_bar = 0.05;          // "bars with persistence > 0.05"
inline constexpr int64_t k_compat_max_tokens = 30;  // topology.ipynb downsampling

enum class Symmetrize { Max, Mean };

struct PersistenceBar {
    int dim = 0;
    double birth = 0;
    double death = std::numeric_limits<double>::infinity();  // inf: essential class
};

// Principled distance: d_ij = 1 - max(a_ij, a_ji) (or 1 - mean), zero diagonal. a: [n, n].
Eigen::MatrixXd symmetric_distance(const Eigen::MatrixXd& a, Symmetrize symmetrize);

// Rips persistence (dims 0 and 1) of a symmetric distance matrix with zero diagonal: vertices
// at 0, edges at d_ij, triangles at their longest edge. Bars of zero length are not reported;
// sorted by (dim, birth, death).
std::vector<PersistenceBar> rips_persistence(const Eigen::MatrixXd& dist);

// Sorts bars by (dim, birth, death): the order every diagram is reported in.
void sort_bars(std::vector<PersistenceBar>& bars);

// ripser.py on a non-symmetric matrix with a non-zero diagonal (B.3): vertex i is born at
// d_ii, only i < j gives an edge, of length d_ij, and exact zeros are dropped (no edge). An
// edge enters at max(d_ij, d_ii, d_jj) so the filtration stays valid. Zero-length bars dropped.
std::vector<PersistenceBar> ripser_sparse_persistence(const Eigen::MatrixXd& dist);

// np.linspace(0, n-1, k, dtype=int) (truncating cast); all of 0..n-1 when n <= k.
std::vector<int64_t> linspace_indices(int64_t n, int64_t k);

struct DiagramSummary {
    std::array<std::array<double, k_betti_grid_points>, 2> betti{};  // [dim][grid point]
    std::array<int64_t, 2> n_bars{};            // len(diagram): finite + essential (compat Betti)
    std::array<int64_t, 2> n_essential{};       // infinite bars (reported separately, 10.j)
    std::array<double, 2> total_persistence{};  // sum of death - birth over finite bars
    std::array<int64_t, 2> n_long{};            // finite bars with persistence > long_bar
    std::array<double, 2> mean_persistence{};   // over finite bars (NaN when none)
    std::array<double, 2> max_persistence{};    // over finite bars (NaN when none)
};

// Betti curves count bars with birth <= eps < death at eps = g / 100 (10.j).
DiagramSummary summarize_diagram(const std::vector<PersistenceBar>& bars,
                                 double long_bar = k_long_bar);

}  // namespace sinkscope::metrics
