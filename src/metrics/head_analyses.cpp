// Driver of the head-level analyses (spec 3, 4, 7): reversal rates, MDS + clustering + ARI,
// regime predictor; tables and a human summary.
#include "sinkscope/metrics/head_analyses.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/cluster.hpp"

namespace sinkscope::metrics {

namespace hm = head_matrix;

const std::vector<std::string>& clustered_matrix_names() {
    static const std::vector<std::string> names = {
        hm::kDA,     hm::kDAPerp, hm::kCosineKeep,    hm::kCosineDrop,
        hm::kJsKeep, hm::kJsDrop, hm::kEuclideanKeep, hm::kEuclideanDrop};
    return names;
}

std::string scope_name(ReversalScope s) {
    return s == ReversalScope::Model ? "model" : "layer";
}

ReversalScope parse_reversal_scope(const std::string& text) {
    if (text == "model") return ReversalScope::Model;
    if (text == "layer") return ReversalScope::Layer;
    throw UsageError("scope must be 'model' or 'layer', got '" + text + "'");
}

namespace {

// Spec 3 comparisons, in table order.
struct ComparisonSpec {
    const char* comparison;
    const char* metric;
    const char* first;
    const char* second;
};
const std::vector<ComparisonSpec>& comparison_specs() {
    static const std::vector<ComparisonSpec> specs = {
        {"flip", "cosine", hm::kCosineKeep, hm::kCosineDrop},
        {"flip", "js", hm::kJsKeep, hm::kJsDrop},
        {"flip", "euclidean", hm::kEuclideanKeep, hm::kEuclideanDrop},
        {"vs_content", "cosine", hm::kCosineKeep, hm::kDAPerp},
        {"vs_content", "js", hm::kJsKeep, hm::kDAPerp},
        {"vs_content", "euclidean", hm::kEuclideanKeep, hm::kDAPerp},
        {"dA_vs_dA_perp", "dA", hm::kDA, hm::kDAPerp},
        {"check", "dA_perp", hm::kDAPerp, hm::kDAPerpDrop},
    };
    return specs;
}

// The comparisons whose matrices are present, with the matrix list they index.
struct ComparisonSet {
    std::vector<const Eigen::MatrixXd*> matrices;
    std::vector<MatrixPair> pairs;
    std::vector<ReversalRow> templates;  // names filled, counts empty
};

ComparisonSet make_comparisons(const std::map<std::string, Eigen::MatrixXd>& matrices,
                               bool flips_only) {
    ComparisonSet set;
    std::map<std::string, int> index;
    auto index_of = [&](const std::string& key) {
        auto it = index.find(key);
        if (it != index.end()) return it->second;
        set.matrices.push_back(&matrices.at(key));
        return index[key] = static_cast<int>(set.matrices.size()) - 1;
    };
    for (const ComparisonSpec& c : comparison_specs()) {
        if (flips_only && std::string(c.comparison) != "flip") continue;
        std::string second = c.second;
        if (second == hm::kDAPerpDrop && !matrices.count(second)) second = hm::kDAPerp;
        if (!matrices.count(c.first) || !matrices.count(second)) continue;
        set.pairs.push_back({index_of(c.first), index_of(second)});
        ReversalRow row;
        row.comparison = c.comparison;
        row.metric = c.metric;
        row.first = c.first;
        row.second = second;
        set.templates.push_back(row);
    }
    return set;
}

// Counts of every comparison in `set` over the triples of `heads` (all when empty).
std::vector<ReversalCounts> count(const ComparisonSet& set, const std::vector<int>& heads,
                                  const HeadAnalysisOptions& opts, uint64_t seed) {
    if (set.pairs.empty()) return {};
    const int64_t n_heads =
        heads.empty() ? static_cast<int64_t>(set.matrices[0]->rows()) : std::ssize(heads);
    // A sample as large as the population is the exact count (spec 3: sampling without
    // replacement would examine every triple once), by the faster exact method.
    if (opts.triples > 0 && opts.triples < count_triples(n_heads))
        return count_reversals_sampled(set.matrices, set.pairs, opts.triples, seed, heads);
    return count_reversals_exact(set.matrices, set.pairs, heads, opts.n_threads);
}

// The row of `counts`: sampled when they examined fewer triples than exist (their interval then
// Wilson's with the finite population correction), exact otherwise (interval = the rate).
ReversalRow finish_row(ReversalRow row, const std::string& scope, int layer,
                       const ReversalCounts& counts) {
    row.scope = scope;
    row.layer = layer;
    row.method = counts.n_examined < counts.n_triples ? "sampled" : "exact";
    row.counts = counts;
    row.rate = counts.rate();
    const RateInterval ci = sampled_rate_interval(counts);
    row.ci_lo = ci.lo;
    row.ci_hi = ci.hi;
    return row;
}

// Heads of each layer, by the layer value of the labels.
std::map<int, std::vector<int>> heads_by_layer(const std::vector<std::pair<int, int>>& labels) {
    std::map<int, std::vector<int>> out;
    for (size_t i = 0; i < labels.size(); ++i) out[labels[i].first].push_back(static_cast<int>(i));
    return out;
}

// Reversal rows of one scope for the comparisons in `set`.
std::vector<ReversalRow> reversal_rows(const ComparisonSet& set,
                                       const std::vector<std::pair<int, int>>& labels,
                                       ReversalScope scope, const HeadAnalysisOptions& opts) {
    std::vector<ReversalRow> rows;
    if (scope == ReversalScope::Model) {
        const auto counts = count(set, {}, opts, opts.seed);
        for (size_t q = 0; q < counts.size(); ++q)
            rows.push_back(finish_row(set.templates[q], "model", -1, counts[q]));
        return rows;
    }
    std::vector<ReversalCounts> pooled(set.pairs.size());
    for (const auto& [layer, heads] : heads_by_layer(labels)) {
        const auto counts = count(set, heads, opts, opts.seed + static_cast<uint64_t>(layer) + 1);
        for (size_t q = 0; q < counts.size(); ++q) {
            rows.push_back(finish_row(set.templates[q], "layer", layer, counts[q]));
            pooled[q] += counts[q];
        }
    }
    for (size_t q = 0; q < set.pairs.size(); ++q)
        rows.push_back(finish_row(set.templates[q], "layer", -1, pooled[q]));
    return rows;
}

// Spec 10.g: the flip counts pooled over cosine, JS and Euclidean.
ReversalCounts pooled_flip(const std::vector<ReversalRow>& rows, const std::string& scope,
                           int layer) {
    ReversalCounts total;
    for (const ReversalRow& r : rows)
        if (r.comparison == "flip" && r.scope == scope && r.layer == layer) total += r.counts;
    return total;
}

RegimeRow make_regime_row(const std::string& scope, int layer, double rho,
                          const ReversalCounts& flip, const HeadAnalysisOptions& opts) {
    RegimeRow row;
    row.scope = scope;
    row.layer = layer;
    row.rho = rho;
    row.predicted = predict_regime(rho, opts.regime_lo, opts.regime_hi);
    row.flip = flip;
    row.flip_rate = flip.rate();
    row.measured = measured_regime(row.flip_rate);
    row.agreement = regime_agreement(row.predicted, row.flip_rate);
    return row;
}

// Entries of d among `heads` (all when empty) are finite.
bool finite_among(const Eigen::MatrixXd& d, const std::vector<int>& heads) {
    if (heads.empty()) return d.allFinite();
    for (int a : heads)
        for (int b : heads)
            if (!std::isfinite(d(a, b))) return false;
    return true;
}

// `d` restricted to `heads` (a copy).
Eigen::MatrixXd restrict(const Eigen::MatrixXd& d, const std::vector<int>& heads) {
    const auto m = static_cast<Eigen::Index>(heads.size());
    Eigen::MatrixXd out(m, m);  // [set, set]
    for (Eigen::Index i = 0; i < m; ++i)
        for (Eigen::Index j = 0; j < m; ++j)
            out(i, j) = d(heads[static_cast<size_t>(i)], heads[static_cast<size_t>(j)]);
    return out;
}

// `d` restricted to `heads`: `d` itself when `heads` is every head in order (scope model: no
// 8 MB copy per clustered matrix at 1,024 heads), else restrict()'s copy, held in `copy`.
const Eigen::MatrixXd& restricted(const Eigen::MatrixXd& d, const std::vector<int>& heads,
                                  Eigen::MatrixXd& copy) {
    bool all = static_cast<Eigen::Index>(heads.size()) == d.rows();
    for (size_t i = 0; all && i < heads.size(); ++i) all = heads[i] == static_cast<int>(i);
    if (all) return d;
    copy = restrict(d, heads);
    return copy;
}

// The sets of heads compared with each other (spec 2 "scope"): (layer, heads), layer -1 = all.
std::vector<std::pair<int, std::vector<int>>> head_sets(
    const std::vector<std::pair<int, int>>& labels, ReversalScope scope) {
    std::vector<std::pair<int, std::vector<int>>> sets;
    if (scope == ReversalScope::Model) {
        std::vector<int> all(labels.size());
        for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
        sets.emplace_back(-1, std::move(all));
    } else {
        for (auto& [layer, heads] : heads_by_layer(labels)) sets.emplace_back(layer, heads);
    }
    return sets;
}

void check_inputs(const std::map<std::string, Eigen::MatrixXd>& matrices,
                  const std::map<std::string, Eigen::MatrixXd>& layer_matrices,
                  const std::vector<std::pair<int, int>>& head_labels,
                  const HeadAnalysisOptions& opts) {
    const Eigen::Index n = static_cast<Eigen::Index>(head_labels.size());
    const auto sets = head_sets(head_labels, opts.scope);
    // Scope layer reads only within-layer pairs (the accumulator leaves the others NaN).
    auto check = [&](const std::map<std::string, Eigen::MatrixXd>& ms, const auto& sets_read,
                     const char* what) {
        for (const auto& [name, d] : ms) {
            SS_CHECK(d.rows() == n && d.cols() == n, what, " ", name, " is ", d.rows(), " x ",
                     d.cols(), " for ", n, " heads");
            for (const auto& [layer, heads] : sets_read)
                SS_CHECK(finite_among(d, heads), what, " ", name, " has non-finite entries",
                         layer >= 0 ? detail::concat(" inside layer ", layer) : std::string());
        }
    };
    check(matrices, sets, "head distance matrix");
    check(layer_matrices, head_sets(head_labels, ReversalScope::Layer),
          "per-layer-sink distance matrix");
    std::set<std::pair<int, int>> seen(head_labels.begin(), head_labels.end());
    SS_CHECK(seen.size() == head_labels.size(), "duplicate (layer, head) labels");
    if (opts.k < 0) throw UsageError(detail::concat("k must be >= 0, got ", opts.k));
    size_t smallest = static_cast<size_t>(n);
    for (const auto& set : sets) smallest = std::min(smallest, set.second.size());
    if (opts.k > 0 && static_cast<size_t>(opts.k) > smallest)
        throw UsageError(detail::concat("k ", opts.k, " exceeds the number of heads ",
                                        opts.scope == ReversalScope::Layer ? "of a layer (" : "(",
                                        smallest, ")"));
    if (opts.triples < 0)
        throw UsageError(detail::concat("triples must be >= 0, got ", opts.triples));
    check_regime_thresholds(opts.regime_lo, opts.regime_hi);
}

// Spec 4, 10.h on one set of heads: k (given, or by the dA_perp silhouette), MDS and clustering
// of every clustered matrix restricted to the set, and the ARI of every pair, headline first.
// Returns the k used (0: the set is too small to cluster).
int cluster_set(const std::map<std::string, Eigen::MatrixXd>& matrices, int layer,
                const std::vector<int>& heads, const HeadAnalysisOptions& opts,
                HeadAnalysisResults& res) {
    const int n = static_cast<int>(heads.size());
    int k = 0;
    if (opts.k > 0) {
        k = opts.k;
    } else if (matrices.count(hm::kDAPerp) && n >= 3) {
        Eigen::MatrixXd copy;
        const Eigen::MatrixXd& d = restricted(matrices.at(hm::kDAPerp), heads, copy);
        std::vector<std::pair<int, double>> scores;
        k = best_k_by_silhouette(d, opts.linkage, &scores);
        const size_t first = res.k_silhouette.size();
        for (const auto& [kk, s] : scores) res.k_silhouette.push_back({layer, kk, s, false});
        for (size_t i = first; i < res.k_silhouette.size(); ++i)
            res.k_silhouette[i].selected = res.k_silhouette[i].k == k;
    }
    if (k == 0) return 0;
    const size_t first = res.clusterings.size();
    for (const std::string& name : clustered_matrix_names()) {
        auto it = matrices.find(name);
        if (it == matrices.end()) continue;
        Eigen::MatrixXd copy;
        const Eigen::MatrixXd& d = restricted(it->second, heads, copy);
        Clustering c;
        c.matrix = name;
        c.layer = layer;
        c.k = k;
        c.heads = heads;
        c.mds = classical_mds(d, 2);
        c.labels = cluster_linkage(d, k, opts.linkage);
        const int n_clusters = *std::max_element(c.labels.begin(), c.labels.end()) + 1;
        c.mean_silhouette = n_clusters >= 2 ? mean_silhouette(d, c.labels)
                                            : std::numeric_limits<double>::quiet_NaN();
        res.clusterings.push_back(std::move(c));
    }
    // ARI between every pair of this set's clusterings, headline pairs first.
    const std::vector<Clustering> set(res.clusterings.begin() + static_cast<std::ptrdiff_t>(first),
                                      res.clusterings.end());
    auto find_clustering = [&set](const std::string& name) -> const Clustering* {
        for (const Clustering& c : set)
            if (c.matrix == name) return &c;
        return nullptr;
    };
    const std::vector<std::pair<std::string, std::string>> headline = {{hm::kJsKeep, hm::kJsDrop},
                                                                       {hm::kDA, hm::kDAPerp}};
    for (const auto& [x, y] : headline) {
        const Clustering* cx = find_clustering(x);
        const Clustering* cy = find_clustering(y);
        if (cx && cy)
            res.ari.push_back({x, y, adjusted_rand_index(cx->labels, cy->labels), true, layer});
    }
    for (size_t i = 0; i < set.size(); ++i)
        for (size_t j = i + 1; j < set.size(); ++j) {
            const std::string& x = set[i].matrix;
            const std::string& y = set[j].matrix;
            if (std::find(headline.begin(), headline.end(), std::make_pair(x, y)) != headline.end())
                continue;
            res.ari.push_back(
                {x, y, adjusted_rand_index(set[i].labels, set[j].labels), false, layer});
        }
    return k;
}

}  // namespace

HeadAnalysisResults run_head_analyses(
    const std::map<std::string, Eigen::MatrixXd>& matrices,
    const std::vector<std::pair<int, int>>& head_labels, const std::vector<double>& layer_rho,
    double model_rho, const HeadAnalysisOptions& opts,
    const std::map<std::string, Eigen::MatrixXd>& layer_matrices) {
    check_inputs(matrices, layer_matrices, head_labels, opts);
    HeadAnalysisResults res;
    res.options = opts;
    res.head_labels = head_labels;

    // Pass 1: reversal rates of the requested scope (spec 3).
    const ComparisonSet all = make_comparisons(matrices, false);
    res.reversal = reversal_rows(all, head_labels, opts.scope, opts);

    // Pass 2: clustering (spec 4, 10.h) of each set of the scope (spec 2): all heads, or each
    // layer alone (its own k unless --k is given).
    for (const auto& [layer, heads] : head_sets(head_labels, opts.scope)) {
        const int k = cluster_set(matrices, layer, heads, opts, res);
        if (opts.scope == ReversalScope::Model) res.k = k;
    }
    if (opts.scope == ReversalScope::Layer) res.k = opts.k;
    res.k_selected = opts.k == 0 && !res.k_silhouette.empty();

    // Pass 3: regime predictor (spec 7, 10.g). Rho and the flip rate of a row use the same sink
    // (10.d): the model row the model-wide one; a layer row its layer's, i.e. in scope model the
    // within-layer triples of `layer_matrices` (when given), in scope layer the reversal rows.
    std::vector<ReversalRow> layer_rows;
    if (opts.scope == ReversalScope::Model) {
        res.regime.push_back(
            make_regime_row("model", -1, model_rho, pooled_flip(res.reversal, "model", -1), opts));
        if (!layer_rho.empty()) {
            const ComparisonSet flips =
                make_comparisons(layer_matrices.empty() ? matrices : layer_matrices, true);
            layer_rows = reversal_rows(flips, head_labels, ReversalScope::Layer, opts);
        }
    } else {
        layer_rows = res.reversal;
    }
    for (size_t l = 0; l < layer_rho.size(); ++l) {
        const int layer = static_cast<int>(l);
        res.regime.push_back(make_regime_row("layer", layer, layer_rho[l],
                                             pooled_flip(layer_rows, "layer", layer), opts));
    }
    return res;
}

}  // namespace sinkscope::metrics
