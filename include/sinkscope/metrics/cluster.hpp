// Head clustering (spec 4, 10.h): classical MDS, average-linkage agglomerative clustering,
// silhouette, and the adjusted Rand index between clusterings.
#pragma once

#include <vector>

#include <Eigen/Dense>

namespace sinkscope::metrics {

// Classical (Torgerson) MDS of an n x n distance matrix to `n_dims` dimensions:
// B = -1/2 J D.^2 J, coordinates = top eigenvectors scaled by sqrt(max(eigenvalue, 0)), in
// decreasing eigenvalue order. Spec 10.h: each axis is flipped so that its largest-|x| entry
// (first one on ties) is positive. Returns [n, n_dims].
Eigen::MatrixXd classical_mds(const Eigen::MatrixXd& d, int n_dims = 2);

// One merge of the dendrogram: the clusters holding heads `a` and `b` join at `height`.
struct Merge {
    int a;
    int b;
    double height;
};

// Average-linkage (UPGMA) agglomerative clustering of an n x n distance matrix: n - 1 merges
// in increasing height (ties keep the order in which they were found). Nearest-neighbour-chain
// algorithm with the Lance-Williams update: O(n^2) time and memory.
std::vector<Merge> average_linkage(const Eigen::MatrixXd& d);

// Flat clustering with k clusters from the first n - k merges; labels 0..k-1 numbered by the
// order in which clusters first appear over the heads.
std::vector<int> cut_dendrogram(const std::vector<Merge>& merges, int n, int k);

// average_linkage + cut_dendrogram.
std::vector<int> cluster_average_linkage(const Eigen::MatrixXd& d, int k);

// Mean silhouette over all points under distance d: s(i) = (b - a) / max(a, b), with s(i) = 0
// for a point alone in its cluster (and when a = b = 0). Needs at least 2 clusters.
double mean_silhouette(const Eigen::MatrixXd& d, const std::vector<int>& labels);

// Adjusted Rand index (Hubert & Arabie 1985) between two labelings of the same items:
// (index - expected) / (max - expected) from the contingency table; 1 when the denominator is 0
// (both partitions are all-in-one or both all-singletons, hence identical).
double adjusted_rand_index(const std::vector<int>& a, const std::vector<int>& b);

}  // namespace sinkscope::metrics
