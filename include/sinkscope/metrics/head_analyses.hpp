// Head-level analyses of P1 on precomputed head distance matrices: reversal rates (spec 3),
// MDS and clustering with ARI (spec 4), and the regime predictor (spec 7). One driver, one
// writer, one human summary; `sinkscope metrics` binds HeadAnalysisOptions to its flags.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Dense>

#include "sinkscope/metrics/cluster.hpp"
#include "sinkscope/metrics/regime.hpp"
#include "sinkscope/metrics/reversal.hpp"

namespace sinkscope::metrics {

// Keys of the head distance matrices (issue 2's accumulator output, spec 2). "dA_perp_drop" is
// optional: dA_perp computed on the drop-convention rows, used by the check comparison
// (identical to dA_perp by construction, so its flip rate must be 0); without it the check
// compares dA_perp with itself.
namespace head_matrix {
inline constexpr const char* kDA = "dA";
inline constexpr const char* kDAPerp = "dA_perp";
inline constexpr const char* kDAPerpDrop = "dA_perp_drop";
inline constexpr const char* kSinkTerm = "sink_term";
inline constexpr const char* kCosineKeep = "cosine_keep";
inline constexpr const char* kCosineDrop = "cosine_drop";
inline constexpr const char* kJsKeep = "js_keep";
inline constexpr const char* kJsDrop = "js_drop";
inline constexpr const char* kEuclideanKeep = "euclidean_keep";
inline constexpr const char* kEuclideanDrop = "euclidean_drop";
}  // namespace head_matrix

// Spec 10.h: the 8 clustered matrices, in output order.
const std::vector<std::string>& clustered_matrix_names();

// Which heads are compared (spec 2 "scope"): the reversal triples, the clustered sets and the
// regime rows.
enum class ReversalScope {
    Model,  // all heads of the model as one set (default)
    Layer,  // each layer's heads alone: triples, clustering and regime per layer; the
            // reversal rates also pooled over layers. Cross-layer distances are never read.
};
std::string scope_name(ReversalScope s);                      // "model", "layer"
ReversalScope parse_reversal_scope(const std::string& text);  // throws UsageError

// Every option of the head analyses; in-class defaults are the single source of defaults.
// CLI flags map 1:1: --k, --triples, --seed, --scope, --regime-lo, --regime-hi.
struct HeadAnalysisOptions {
    // --k: clusters used for every matrix. 0: the k in 2..12 (capped at n - 1) with the best
    // mean silhouette of the dA_perp clustering under dA_perp (spec 4; ties: smallest k).
    int k = 0;
    // --triples: 0 counts reversals EXACTLY over all triples (spec 3). N > 0 samples N distinct
    // triples uniformly without replacement (with --scope layer: N per layer; exact where fewer
    // exist) and reports a 95% Wilson interval with the finite population correction.
    int64_t triples = 0;
    // --seed: seed of the triple sampler (layer l uses seed + l + 1 with --scope layer).
    uint64_t seed = 0;
    // --scope: model (default) or layer.
    ReversalScope scope = ReversalScope::Model;
    // --linkage: the agglomerative clustering's linkage (spec 4: average by default).
    Linkage linkage = Linkage::Average;
    // --regime-lo / --regime-hi: spec 7 thresholds on rho.
    double regime_lo = kRegimeLo;
    double regime_hi = kRegimeHi;
    // Threads for exact counting (0: all cores); results do not depend on it.
    int n_threads = 0;
};

// One reversal rate (a row of reversal.csv).
struct ReversalRow {
    std::string scope;       // "model" or "layer"
    int layer = -1;          // -1: whole model, or pooled over layers with scope "layer"
    std::string comparison;  // "flip", "vs_content", "dA_vs_dA_perp", "check"
    std::string metric;      // "cosine", "js", "euclidean", "dA", "dA_perp"
    std::string first;       // matrix keys compared
    std::string second;
    std::string method;  // "exact" or "sampled"
    ReversalCounts counts;
    double rate = 0;   // counts.rate()
    double ci_lo = 0;  // exact: = rate; sampled: 95% Wilson score interval
    double ci_hi = 0;
};

// MDS and clustering of one distance matrix on one set of heads (all heads, or one layer's).
struct Clustering {
    std::string matrix;
    int layer = -1;              // -1: all heads (scope model); else the layer clustered alone
    int k = 0;                   // clusters asked for on this set
    std::vector<int> heads;      // [set] indices into head_labels of the clustered heads
    Eigen::MatrixXd mds;         // [set, 2], spec 10.h sign rule
    std::vector<int> labels;     // [set], 0..k-1
    double mean_silhouette = 0;  // under this matrix; NaN when k < 2
};

struct AriRow {
    std::string first;
    std::string second;
    double ari = 0;
    bool headline = false;  // JS-keep vs JS-drop, dA vs dA_perp (spec 4)
    int layer = -1;         // the clustered set: -1 all heads, else one layer (scope layer)
};

// Mean silhouette of the dA_perp clustering under dA_perp for one candidate k (spec 4).
struct SilhouetteChoice {
    int layer = -1;  // the clustered set, as in Clustering::layer
    int k = 0;
    double mean_silhouette = 0;
    bool selected = false;  // the k used for this set
};

struct RegimeRow {
    std::string scope;  // "model" or "layer"
    int layer = -1;
    double rho = 0;
    Regime predicted = Regime::Abstain;
    ReversalCounts flip;  // pooled over the cosine, JS and Euclidean flip comparisons (10.g)
    double flip_rate = 0;
    Regime measured = Regime::Abstain;
    std::string agreement;  // regime_agreement()
};

struct HeadAnalysisResults {
    HeadAnalysisOptions options;
    std::vector<std::pair<int, int>> head_labels;  // [head] -> (layer, head)
    std::vector<ReversalRow> reversal;
    int k = 0;  // scope model: k of the clustering; scope layer: --k (0: chosen per layer)
    bool k_selected = false;  // true when k came from the silhouette
    std::vector<SilhouetteChoice> k_silhouette;
    std::vector<Clustering> clusterings;  // per set (all heads, or layer by layer)
    std::vector<AriRow> ari;              // per set, headline pairs first
    // Scope model: the model row, then one row per layer (each with its own sink, 10.d).
    // Scope layer: one row per layer only (no cross-layer comparison exists to validate a model
    // rho against).
    std::vector<RegimeRow> regime;
};

// Runs every analysis on n x n head distance matrices keyed as in head_matrix (missing keys
// skip what needs them; dA_perp is needed to choose k). head_labels[i] = (layer, head) of
// matrix row i; layer_rho[l] is rho of layer l (may be empty); model_rho is the model-wide rho
// (spec 2, 10.g). With scope layer only within-layer entries are read (others may be NaN).
// `layer_matrices` (scope model): the same keys with the within-layer pairs computed with each
// layer's own sink (10.d; HeadResults::layer_distances), for the per-layer regime rows; empty:
// the within-layer blocks of `matrices` (right when every layer's sink is the model's).
// Throws UsageError for options that do not fit the data.
HeadAnalysisResults run_head_analyses(
    const std::map<std::string, Eigen::MatrixXd>& matrices,
    const std::vector<std::pair<int, int>>& head_labels, const std::vector<double>& layer_rho,
    double model_rho, const HeadAnalysisOptions& opts,
    const std::map<std::string, Eigen::MatrixXd>& layer_matrices = {});

}  // namespace sinkscope::metrics
