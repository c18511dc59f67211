// Head clustering (spec 4, 10.h): classical MDS, agglomerative clustering (average linkage by
// default; complete, single and Ward on request), silhouette, and the adjusted Rand index
// between clusterings.
#pragma once

#include <string>
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

// Linkage of agglomerative clustering: the distance between a cluster k and the union of
// clusters i and j (sizes n_k, n_i, n_j), by the Lance-Williams update of each:
//   average (UPGMA)  (n_i d(k,i) + n_j d(k,j)) / (n_i + n_j)
//   complete         max(d(k,i), d(k,j))
//   single           min(d(k,i), d(k,j))
//   ward             sqrt(((n_k + n_i) d(k,i)^2 + (n_k + n_j) d(k,j)^2 - n_k d(i,j)^2)
//                         / (n_k + n_i + n_j))
// (Ward's update on the distances themselves, as scipy.cluster.hierarchy.linkage applies it to
// any distance matrix; its heights are in the distance's unit.)
enum class Linkage { Average, Complete, Single, Ward };
Linkage parse_linkage(const std::string& text);  // average | complete | single | ward
const char* to_string(Linkage linkage);

// Agglomerative clustering of an n x n distance matrix under `linkage`: n - 1 merges in
// increasing height (ties keep the order in which they were found). Nearest-neighbour-chain
// algorithm with the Lance-Williams update (every linkage above is reducible, so the chain finds
// the same merges as the greedy closest-pair algorithm): O(n^2) time and memory.
std::vector<Merge> linkage_tree(const Eigen::MatrixXd& d, Linkage linkage);
inline std::vector<Merge> average_linkage(const Eigen::MatrixXd& d) {
    return linkage_tree(d, Linkage::Average);
}

// Flat clustering with k clusters from the first n - k merges; labels 0..k-1 numbered by the
// order in which clusters first appear over the heads.
std::vector<int> cut_dendrogram(const std::vector<Merge>& merges, int n, int k);

// linkage_tree + cut_dendrogram.
std::vector<int> cluster_linkage(const Eigen::MatrixXd& d, int k, Linkage linkage);
inline std::vector<int> cluster_average_linkage(const Eigen::MatrixXd& d, int k) {
    return cluster_linkage(d, k, Linkage::Average);
}

// Spec 4's choice of k: the k in 2..min(12, n - 1) whose flat clustering under `linkage` has the
// best mean silhouette under d (ties: the smallest k); 0 when n < 3. `scores` (may be null)
// receives (k, mean silhouette) for every k tried, in order.
int best_k_by_silhouette(const Eigen::MatrixXd& d, Linkage linkage,
                         std::vector<std::pair<int, double>>* scores = nullptr);

// Mean silhouette over all points under distance d: s(i) = (b - a) / max(a, b), with s(i) = 0
// for a point alone in its cluster (and when a = b = 0). Needs at least 2 clusters.
double mean_silhouette(const Eigen::MatrixXd& d, const std::vector<int>& labels);

// Adjusted Rand index (Hubert & Arabie 1985) between two labelings of the same items:
// (index - expected) / (max - expected) from the contingency table; 1 when the denominator is 0
// (both partitions are all-in-one or both all-singletons, hence identical).
double adjusted_rand_index(const std::vector<int>& a, const std::vector<int>& b);

}  // namespace sinkscope::metrics
