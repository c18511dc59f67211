// Head clustering (spec 4, 10.h): ARI, classical MDS, the linkages, silhouette, and k choice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/cluster.hpp"
#include "sinkscope/metrics/head_analyses.hpp"
#include "synthetic_attention.hpp"
#include "testing.hpp"

using namespace sinkscope::metrics;
namespace testutil = sinkscope::testutil;

namespace {

Eigen::MatrixXd pairwise_euclidean(const Eigen::MatrixXd& x) {  // x: [point, dim]
    const Eigen::Index n = x.rows();
    Eigen::MatrixXd d(n, n);  // [point, point]
    for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < n; ++j) d(i, j) = (x.row(i) - x.row(j)).norm();
    return d;
}

// Four well-separated Gaussian blobs of `per` points each in the plane; truth[i] = blob of i.
Eigen::MatrixXd planted_blobs(int per, std::vector<int>& truth, std::mt19937_64& rng) {
    const double centers[4][2] = {{0, 0}, {10, 0}, {0, 10}, {10, 10}};
    std::normal_distribution<double> z(0.0, 0.5);
    Eigen::MatrixXd x(4 * per, 2);  // [point, dim]
    truth.clear();
    for (int c = 0; c < 4; ++c)
        for (int i = 0; i < per; ++i) {
            x(c * per + i, 0) = centers[c][0] + z(rng);
            x(c * per + i, 1) = centers[c][1] + z(rng);
            truth.push_back(c);
        }
    return x;
}

// Reference UPGMA: merge the closest pair of clusters by the mean of the original pairwise
// distances between their members (no Lance-Williams), n - 1 times; returns merge heights.
std::vector<double> naive_upgma_heights(const Eigen::MatrixXd& d) {
    std::vector<std::vector<int>> clusters;
    for (int i = 0; i < d.rows(); ++i) clusters.push_back({i});
    std::vector<double> heights;
    while (clusters.size() > 1) {
        double best = std::numeric_limits<double>::infinity();
        size_t bi = 0, bj = 0;
        for (size_t i = 0; i < clusters.size(); ++i)
            for (size_t j = i + 1; j < clusters.size(); ++j) {
                double s = 0;
                for (int a : clusters[i])
                    for (int b : clusters[j]) s += d(a, b);
                s /= static_cast<double>(clusters[i].size() * clusters[j].size());
                if (s < best) best = s, bi = i, bj = j;
            }
        heights.push_back(best);
        clusters[bi].insert(clusters[bi].end(), clusters[bj].begin(), clusters[bj].end());
        clusters.erase(clusters.begin() + static_cast<std::ptrdiff_t>(bj));
    }
    return heights;
}

}  // namespace

// ARI is 1 for identical partitions and for the same partition under other label names.
TEST(Ari, IdenticalAndPermutationInvariant) {
    const std::vector<int> a = {0, 0, 1, 1, 1, 2, 2, 0, 3, 3};
    EXPECT_EQ(adjusted_rand_index(a, a), 1.0);
    std::vector<int> renamed;
    for (int x : a) renamed.push_back((x * 3 + 7) % 4 + 10);  // a bijection of label names
    EXPECT_WITHIN(adjusted_rand_index(a, renamed), 1.0, testutil::kFewOps);
    const std::vector<int> b = {1, 0, 1, 2, 1, 2, 0, 0, 3, 2};
    std::vector<int> b_renamed;
    for (int x : b) b_renamed.push_back(3 - x);
    const double ab = adjusted_rand_index(a, b);
    EXPECT_LT(ab, 1.0);
    EXPECT_WITHIN(adjusted_rand_index(renamed, b_renamed), ab, testutil::kFewOps);
    EXPECT_WITHIN(adjusted_rand_index(b, a), ab, testutil::kFewOps);
}

// Hand-computed Hubert-Arabie values: contingency [[2,1,0],[0,1,2]] gives (2 - 6*3/15) /
// (4.5 - 1.2) = 8/33; [[2,0,0],[0,1,1]] gives (1 - 1/3) / (1.5 - 1/3) = 4/7; one cluster against
// all singletons gives 0.
TEST(Ari, HandComputedExamples) {
    EXPECT_WITHIN(adjusted_rand_index({0, 0, 0, 1, 1, 1}, {0, 0, 1, 1, 2, 2}), 8.0 / 33.0,
                  testutil::kFewOps);
    EXPECT_WITHIN(adjusted_rand_index({0, 0, 1, 1}, {0, 0, 1, 2}), 4.0 / 7.0, testutil::kFewOps);
    EXPECT_WITHIN(adjusted_rand_index({0, 0, 0, 0}, {0, 1, 2, 3}), 0.0, testutil::kFewOps);
}

// Independent random partitions of 1,000 items have ARI near 0.
TEST(Ari, IndependentRandomPartitionsNearZero) {
    std::mt19937_64 rng(17);
    std::uniform_int_distribution<int> five(0, 4);
    std::uniform_int_distribution<int> three(0, 2);
    std::vector<int> a, b;
    for (int i = 0; i < 1000; ++i) a.push_back(five(rng)), b.push_back(three(rng));
    EXPECT_LT(std::fabs(adjusted_rand_index(a, b)), 0.05);
}

// Classical MDS recovers a planted 2-D configuration up to rotation/reflection (orthogonal
// Procrustes error within its float64 bound), on the dense path (30 points) and the Lanczos path
// (300 points); each axis obeys the 10.h sign rule.
TEST(Mds, RecoversPlantedConfiguration) {
    std::mt19937_64 rng(9);
    std::normal_distribution<double> z(0.0, 1.0);
    for (int n : {30, 300}) {
        SCOPED_TRACE(n);
        Eigen::MatrixXd x(n, 2);  // [point, dim], anisotropic so the axes are well defined
        for (int i = 0; i < n; ++i) x(i, 0) = 3.0 * z(rng), x(i, 1) = z(rng);
        const Eigen::MatrixXd y = classical_mds(pairwise_euclidean(x), 2);  // [point, axis]
        ASSERT_EQ(y.rows(), n);
        ASSERT_EQ(y.cols(), 2);
        const Eigen::MatrixXd xc = x.rowwise() - x.colwise().mean();
        Eigen::JacobiSVD<Eigen::MatrixXd> svd(y.transpose() * xc,
                                              Eigen::ComputeFullU | Eigen::ComputeFullV);
        const Eigen::MatrixXd r = svd.matrixU() * svd.matrixV().transpose();
        // Coordinates from eigenvectors of B (double-centred squared distances, ||B|| ~ 10 n):
        // error ~ n 2^-53 ||B|| / gap * max|x| with gap = lambda_2 - lambda_3 ~ n (planted 2-D
        // data), ~1e-12, and the Lanczos stopping rule (1e-14 relative residual / gap) adds ~1e-13
        // at n = 300: 1e-8 leaves room for the sqrt(lambda) scaling of near-degenerate axes.
        EXPECT_ERROR_WITHIN((y * r - xc).cwiseAbs().maxCoeff(), 1e-8);
        for (int k = 0; k < 2; ++k) {
            Eigen::Index arg;
            y.col(k).cwiseAbs().maxCoeff(&arg);
            EXPECT_GT(y(arg, k), 0.0);
        }
    }
}

// Average linkage matches a direct UPGMA (means over original distances) merge by merge.
TEST(AverageLinkage, MatchesNaiveUpgma) {
    std::mt19937_64 rng(21);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    Eigen::MatrixXd x(15, 3);
    for (int i = 0; i < 15; ++i)
        for (int j = 0; j < 3; ++j) x(i, j) = u(rng);
    const Eigen::MatrixXd d = pairwise_euclidean(x);
    const std::vector<Merge> merges = average_linkage(d);
    const std::vector<double> ref = naive_upgma_heights(d);
    ASSERT_EQ(merges.size(), ref.size());
    for (size_t m = 0; m < ref.size(); ++m)
        EXPECT_WITHIN(merges[m].height, ref[m], testutil::kF64SumRel)
            << m;  // means of <= 105 distances <= 1.7
}

// Every linkage's merge heights equal a naive agglomeration that evaluates each cluster
// distance from its definition over the original points (not the Lance-Williams update):
// single = closest pair, complete = farthest pair, average = mean pair, Ward = the increase of
// the within-cluster sum of squares in distance form, sqrt(2 n_i n_j / (n_i + n_j)) times the
// distance between the centroids (points in R^3, where Ward's update is exact); and the flat
// clusterings at every k are those of the naive merges.
TEST(Linkage, EveryLinkageMatchesItsDefinition) {
    std::mt19937_64 rng(33);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const int n = 14;
    Eigen::MatrixXd x(n, 3);  // [point, dim]
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < 3; ++j) x(i, j) = u(rng);
    const Eigen::MatrixXd d = pairwise_euclidean(x);
    for (Linkage method : {Linkage::Average, Linkage::Complete, Linkage::Single, Linkage::Ward}) {
        auto between = [&](const std::vector<int>& a, const std::vector<int>& b) {
            if (method == Linkage::Ward) {
                Eigen::RowVectorXd ca = Eigen::RowVectorXd::Zero(3), cb = ca;
                for (int i : a) ca += x.row(i) / static_cast<double>(a.size());
                for (int i : b) cb += x.row(i) / static_cast<double>(b.size());
                const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
                return std::sqrt(2 * na * nb / (na + nb)) * (ca - cb).norm();
            }
            double lo = std::numeric_limits<double>::infinity(), hi = 0, sum = 0;
            for (int i : a)
                for (int j : b)
                    lo = std::min(lo, d(i, j)), hi = std::max(hi, d(i, j)), sum += d(i, j);
            if (method == Linkage::Single) return lo;
            if (method == Linkage::Complete) return hi;
            return sum / static_cast<double>(a.size() * b.size());
        };
        std::vector<std::vector<int>> clusters;
        for (int i = 0; i < n; ++i) clusters.push_back({i});
        std::vector<double> heights;
        std::vector<std::vector<int>> partitions;  // [k] labels of the naive clustering
        while (clusters.size() > 1) {
            double best = std::numeric_limits<double>::infinity();
            size_t bi = 0, bj = 0;
            for (size_t i = 0; i < clusters.size(); ++i)
                for (size_t j = i + 1; j < clusters.size(); ++j) {
                    const double v = between(clusters[i], clusters[j]);
                    if (v < best) best = v, bi = i, bj = j;
                }
            heights.push_back(best);
            clusters[bi].insert(clusters[bi].end(), clusters[bj].begin(), clusters[bj].end());
            clusters.erase(clusters.begin() + static_cast<std::ptrdiff_t>(bj));
            std::vector<int> labels(n);
            for (size_t c = 0; c < clusters.size(); ++c)
                for (int i : clusters[c]) labels[static_cast<size_t>(i)] = static_cast<int>(c);
            partitions.push_back(labels);
        }
        const std::vector<Merge> merges = linkage_tree(d, method);
        ASSERT_EQ(merges.size(), heights.size());
        for (size_t m = 0; m < heights.size(); ++m)
            // single / complete: the same distances, exact; average: means of <= 49 distances
            // <= 1.7 in two orders (kF64SumRel). Ward: each of <= 12 updates rounds ~6
            // operations on squared heights whose terms sum to <= 2 n dmax^2 ~ 100, so the
            // squared height is within 12 * 6 * 2^-53 * 100 ~ 8e-13 and the height (>= 0.05
            // here) within that / (2 * 0.05) ~ 1e-11; 1e-10 allows the naive centroids' own
            // rounding.
            EXPECT_WITHIN(merges[m].height, heights[m],
                          method == Linkage::Ward ? 1e-10 : testutil::kF64SumRel)
                << to_string(method) << " merge " << m;
        for (int k = 1; k < n; ++k)  // partitions[m] has n - 1 - m clusters
            EXPECT_EQ(adjusted_rand_index(cluster_linkage(d, k, method),
                                          partitions[static_cast<size_t>(n - 1 - k)]),
                      1.0)
                << to_string(method) << " k " << k;
    }
    EXPECT_EQ(parse_linkage("ward"), Linkage::Ward);
    EXPECT_THROW(parse_linkage("centroid"), sinkscope::UsageError);
}

// Cutting at k = 4 recovers four well-separated planted clusters exactly, and the mean
// silhouette of the truth matches the library's value computed from the definition.
TEST(AverageLinkage, RecoversPlantedClusters) {
    std::mt19937_64 rng(4);
    std::vector<int> truth;
    const Eigen::MatrixXd d = pairwise_euclidean(planted_blobs(8, truth, rng));
    const std::vector<int> labels = cluster_average_linkage(d, 4);
    EXPECT_EQ(adjusted_rand_index(labels, truth), 1.0);
    EXPECT_EQ(*std::max_element(labels.begin(), labels.end()), 3);
    EXPECT_EQ(labels[0], 0);  // labels numbered by first appearance
}

// Silhouette of points 0, 1, 10, 11 split {0,1} {10,11}: s = 9.5/10.5 for the outer points and
// 8.5/9.5 for the inner ones; a singleton contributes 0.
TEST(Silhouette, HandComputed) {
    Eigen::MatrixXd x(4, 1);
    x << 0, 1, 10, 11;
    const Eigen::MatrixXd d = pairwise_euclidean(x);
    EXPECT_WITHIN(mean_silhouette(d, {0, 0, 1, 1}), (9.5 / 10.5 + 8.5 / 9.5) / 2,
                  testutil::kFewOps);
    // {0,1}, {10}, {11}: points 0 and 1 as before but b from the nearer singleton cluster.
    EXPECT_WITHIN(mean_silhouette(d, {0, 0, 1, 2}), (9.0 / 10.0 + 8.0 / 9.0) / 4,
                  testutil::kFewOps);
}

// The driver picks k = 4 by best mean silhouette under dA_perp for four planted clusters and
// uses it for every matrix; ARI rows put the headline pairs first.
TEST(HeadAnalyses, ChoosesKBySilhouetteAndListsHeadlinePairsFirst) {
    std::mt19937_64 rng(8);
    std::vector<int> truth;
    const Eigen::MatrixXd blobs = pairwise_euclidean(planted_blobs(6, truth, rng));
    std::map<std::string, Eigen::MatrixXd> m;
    for (const std::string& name : clustered_matrix_names()) m[name] = blobs;
    // unrelated distances for js_drop, [head, head]
    m[head_matrix::kJsDrop] = testutil::random_distance_matrix(24, rng, 1.0, 2.0);
    std::vector<std::pair<int, int>> labels;
    for (int i = 0; i < 24; ++i) labels.emplace_back(i / 4, i % 4);
    const auto res = run_head_analyses(m, labels, {}, 0.3, HeadAnalysisOptions{});
    EXPECT_TRUE(res.k_selected);
    EXPECT_EQ(res.k, 4);
    ASSERT_EQ(res.clusterings.size(), 8u);
    EXPECT_EQ(adjusted_rand_index(res.clusterings[1].labels, truth), 1.0);  // dA_perp
    ASSERT_GE(res.ari.size(), 2u);
    EXPECT_EQ(res.ari[0].first, "js_keep");
    EXPECT_EQ(res.ari[0].second, "js_drop");
    EXPECT_TRUE(res.ari[0].headline);
    EXPECT_LT(res.ari[0].ari, 0.5);
    EXPECT_EQ(res.ari[1].first, "dA");
    EXPECT_EQ(res.ari[1].second, "dA_perp");
    EXPECT_EQ(res.ari[1].ari, 1.0);
    EXPECT_EQ(res.ari.size(), 28u);  // all 8 choose 2 pairs, each once
}
