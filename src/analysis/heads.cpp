// The head-level analyses (spec 3, 4, 7) on the finished compositional distance matrices:
// reversal rates, MDS and clustering with ARI, the regime predictor. Tables reversal, silhouette,
// clusters, ari, regime (each also .jsonl); arrays mds/<matrix>.npy ([head, 2] f64; scope layer:
// each layer's rows are its own MDS). Scope layer adds a leading `layer` column to silhouette
// and ari.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/metrics/head.hpp"
#include "sinkscope/metrics/head_analyses.hpp"

namespace sinkscope::analysis {

namespace {

namespace t = tables;
namespace hm = metrics::head_matrix;
using namespace metrics;

void head_analysis_tables(const HeadAnalysisResults& res, AnalysisOutput& out) {
    io::Table rev({"scope", "layer", "comparison", "metric", "first", "second", "method",
                   "n_triples", "n_examined", "n_tied", "n_compared", "n_disagree", "rate", "ci_lo",
                   "ci_hi", "ci_method", "seed"});
    for (const ReversalRow& r : res.reversal) {
        const bool sampled = r.method == "sampled";
        rev.add_row({r.scope, int64_t{r.layer}, r.comparison, r.metric, r.first, r.second, r.method,
                     r.counts.n_triples, r.counts.n_examined, r.counts.n_tied, r.counts.n_compared,
                     r.counts.n_disagree, r.rate, r.ci_lo, r.ci_hi,
                     std::string(sampled ? "wilson95_fpc" : "none"),
                     sampled ? static_cast<int64_t>(res.options.seed) : int64_t{-1}});
    }
    out.tables.push_back({t::kReversal, std::move(rev), true});

    // Scope layer: one clustered set per layer, named by a leading `layer` column.
    const bool per_layer = res.options.scope == ReversalScope::Layer;
    auto with_layer = [per_layer](int layer, std::vector<io::Cell> row) {
        if (per_layer) row.insert(row.begin(), int64_t{layer});
        return row;
    };
    auto columns = [per_layer](std::vector<std::string> names) {
        if (per_layer) names.insert(names.begin(), "layer");
        return names;
    };
    io::Table sil(columns({"matrix", "k", "mean_silhouette", "selected"}));
    for (const SilhouetteChoice& c : res.k_silhouette)
        sil.add_row(with_layer(c.layer, {std::string(hm::kDAPerp), int64_t{c.k}, c.mean_silhouette,
                                         int64_t{c.selected}}));
    for (const Clustering& c : res.clusterings)
        sil.add_row(with_layer(c.layer, {c.matrix, int64_t{c.k}, c.mean_silhouette, int64_t{1}}));
    out.tables.push_back({t::kSilhouette, std::move(sil), true});

    io::Table clu({"matrix", "layer", "head", "cluster", "k", "mds_x", "mds_y"});
    for (const Clustering& c : res.clusterings)
        for (size_t i = 0; i < c.labels.size(); ++i) {
            const auto& label = res.head_labels[static_cast<size_t>(c.heads[i])];
            clu.add_row({c.matrix, int64_t{label.first}, int64_t{label.second},
                         int64_t{c.labels[i]}, int64_t{c.k}, c.mds(static_cast<Eigen::Index>(i), 0),
                         c.mds(static_cast<Eigen::Index>(i), 1)});
        }
    out.tables.push_back({t::kClusters, std::move(clu), true});

    auto k_of = [&res](int layer) {
        for (const Clustering& c : res.clusterings)
            if (c.layer == layer) return c.k;
        return res.k;
    };
    io::Table ari(columns({"first", "second", "ari", "headline", "k"}));
    for (const AriRow& a : res.ari)
        ari.add_row(with_layer(
            a.layer, {a.first, a.second, a.ari, int64_t{a.headline}, int64_t{k_of(a.layer)}}));
    out.tables.push_back({t::kAri, std::move(ari), true});

    io::Table reg({"scope", "layer", "rho", "regime_lo", "regime_hi", "predicted", "flip_compared",
                   "flip_disagree", "flip_rate", "unsafe_flip_rate", "measured", "agreement"});
    for (const RegimeRow& r : res.regime)
        reg.add_row({r.scope, int64_t{r.layer}, r.rho, res.options.regime_lo, res.options.regime_hi,
                     regime_name(r.predicted), r.flip.n_compared, r.flip.n_disagree, r.flip_rate,
                     kUnsafeFlipRate, regime_name(r.measured), r.agreement});
    out.tables.push_back({t::kRegime, std::move(reg), true});

    // One [head, 2] array per matrix; in scope layer each layer's rows hold its own MDS (heads
    // of a layer too small to cluster stay NaN).
    std::map<std::string, std::vector<double>> mds;
    const auto n_heads = static_cast<int64_t>(res.head_labels.size());
    for (const Clustering& c : res.clusterings) {
        auto it = mds.find(c.matrix);
        if (it == mds.end())
            it =
                mds.emplace(c.matrix, std::vector<double>(static_cast<size_t>(n_heads * 2),
                                                          std::numeric_limits<double>::quiet_NaN()))
                    .first;
        for (Eigen::Index i = 0; i < c.mds.rows(); ++i)  // C order [head, axis]
            for (Eigen::Index k = 0; k < 2; ++k)
                it->second[static_cast<size_t>(c.heads[static_cast<size_t>(i)] * 2 + k)] =
                    c.mds(i, k);
    }
    for (const auto& [name, values] : mds)
        out.arrays.emplace_back("mds/" + name + ".npy", io::make_npy_f64({n_heads, 2}, values));
}

std::string head_analysis_summary(const HeadAnalysisResults& res) {
    std::ostringstream out;
    out.precision(3);
    const auto& o = res.options;
    const std::string scope = scope_name(o.scope);
    // --triples N samples where fewer than N triples would be all of them: exact elsewhere.
    const bool sampled = std::any_of(res.reversal.begin(), res.reversal.end(),
                                     [](const ReversalRow& r) { return r.method == "sampled"; });
    out << "head analyses: " << res.head_labels.size() << " heads, reversal "
        << (sampled
                ? "sampled (" + std::to_string(o.triples) + " distinct triples" +
                      (o.scope == ReversalScope::Layer ? " per layer" : "") + ", seed " +
                      std::to_string(o.seed) + ", 95% Wilson CI with finite population correction)"
            : o.triples > 0 ? "exact over all triples (--triples " + std::to_string(o.triples) +
                                  " is at least their number)"
                            : std::string("exact over all triples"))
        << ", scope " << scope << "\n";
    auto line = [&](const std::string& comparison, const std::string& title) {
        bool any = false;
        for (const ReversalRow& r : res.reversal) {
            if (r.comparison != comparison || r.layer != -1) continue;
            if (!any) out << "  " << title << ":";
            out << " " << r.metric << " " << r.rate;
            if (r.method == "sampled") out << " [" << r.ci_lo << ", " << r.ci_hi << "]";
            any = true;
        }
        if (any) out << "\n";
    };
    line("flip", "flip rate keep vs drop");
    line("vs_content", "keep vs dA_perp");
    line("dA_vs_dA_perp", "dA vs dA_perp");
    if (o.scope == ReversalScope::Model && res.k > 0) {
        out << "  clusters: k = " << res.k
            << (res.k_selected ? " (best mean silhouette under dA_perp)" : " (given)") << "\n";
        for (const AriRow& a : res.ari)
            if (a.headline)
                out << "  ARI " << a.first << " vs " << a.second << ": " << a.ari << "\n";
    }
    if (o.scope == ReversalScope::Layer && !res.clusterings.empty()) {
        // One clustering per layer: k per layer, headline ARIs as means over the layers.
        std::map<int, int> k_by_layer;
        for (const Clustering& c : res.clusterings) k_by_layer[c.layer] = c.k;
        out << "  clusters per layer: k =";
        for (const auto& [layer, k] : k_by_layer) out << " " << k;
        out << (o.k > 0 ? " (given)" : " (best mean silhouette under dA_perp)") << "\n";
        std::map<std::pair<std::string, std::string>, std::pair<double, int>> headline;
        for (const AriRow& a : res.ari)
            if (a.headline) {
                auto& [sum, n] = headline[{a.first, a.second}];
                sum += a.ari, ++n;
            }
        for (const auto& [pair, acc] : headline)
            out << "  ARI " << pair.first << " vs " << pair.second << " (mean over "
                << count_of(acc.second, "layer") << "): " << console_number(acc.first / acc.second)
                << "\n";
    }
    std::map<std::string, int> agreement;  // layer rows of scope layer
    for (const RegimeRow& r : res.regime) {
        if (r.scope != "model") {
            if (o.scope == ReversalScope::Layer) ++agreement[r.agreement];
            continue;
        }
        out << "  rho " << r.rho << " -> predicted " << regime_name(r.predicted) << " (lo "
            << o.regime_lo << ", hi " << o.regime_hi << "); pooled flip rate " << r.flip_rate
            << " -> " << regime_name(r.measured) << " (" << r.agreement << ")\n";
    }
    if (!agreement.empty()) {
        out << "  regime per layer (layer rho vs the layer's pooled flip rate):";
        for (const auto& [what, n] : agreement) out << " " << n << " " << what;
        out << "\n";
    }
    return out.str();
}

}  // namespace

AnalysisOutput head_analyses_output(const HeadAnalysisResults& ha) {
    AnalysisOutput out;
    head_analysis_tables(ha, out);
    const HeadAnalysisOptions& hopts = ha.options;
    out.record["head_analyses"] = {
        {"k", ha.k},
        {"k_selected_by_silhouette", ha.k_selected},
        {"triples", hopts.triples == 0 ? "exact" : std::to_string(hopts.triples)},
        {"seed", hopts.seed},
        {"scope", scope_name(hopts.scope)},
        {"regime_lo", hopts.regime_lo},
        {"regime_hi", hopts.regime_hi},
        {"clustering", std::string(to_string(hopts.linkage)) + " linkage"},
        {"ties", "relative 1e-12 (spec 10.f)"}};
    out.summary = head_analysis_summary(ha);
    return out;
}

namespace {

// A head distance needs rows with keys besides the sink (spec 2: JS and cosine of the
// renormalised non-sink rows): inputs too short for any (T <= 2, or every row under
// --min-parts) leave distances undefined, which the head analyses would refuse as a broken
// invariant. Said here as what it is, naming the input.
void check_defined(const std::map<std::string, Eigen::MatrixXd>& matrices,
                   const std::vector<std::pair<int, int>>& labels, bool within_layers,
                   const AnalysisContext& ctx) {
    for (const auto& [name, d] : matrices)
        for (size_t a = 0; a < labels.size(); ++a)
            for (size_t b = 0; b < labels.size(); ++b) {
                if (within_layers && labels[a].first != labels[b].first) continue;
                if (std::isfinite(d(Eigen::Index(a), Eigen::Index(b)))) continue;
                throw InputError(ctx.origin,
                                 "head distance " + name +
                                     " is undefined: no row of the inputs has enough visible "
                                     "keys besides the sink (inputs of 1 or 2 tokens, or every "
                                     "row under --min-parts " +
                                     std::to_string(ctx.options->head.min_parts) + ")");
            }
}

class Heads final : public Analysis {
public:
    explicit Heads(const AnalysisContext& c) : ctx_(c) {}
    void add(const InputView&, PerInputValues*) override {}  // reads compositional's results
    void merge(const Analysis&) override {}
    void save(BinaryWriter& w) const override { w.tag("heads"); }
    void load(BinaryReader& r) override { r.expect_tag("heads"); }

    AnalysisOutput finish(const FinishContext& context) override {
        const HeadResults& r = context.result(kCompositionalResult);
        std::map<std::string, Eigen::MatrixXd> matrices(r.distances.begin(), r.distances.end());
        std::vector<std::pair<int, int>> labels;
        for (const auto& h : r.heads) labels.emplace_back(int(h.layer), int(h.head));
        std::vector<double> layer_rho;
        for (const auto& d : r.layers) layer_rho.push_back(d.rho);
        const HeadAnalysisOptions& hopts = ctx_.options->head_analyses;
        // Per-layer regime rows take each layer's sink for rho and flips alike (10.d).
        std::map<std::string, Eigen::MatrixXd> layer_matrices(r.layer_distances.begin(),
                                                              r.layer_distances.end());
        check_defined(matrices, labels, hopts.scope == ReversalScope::Layer, ctx_);
        check_defined(layer_matrices, labels, true, ctx_);
        const HeadAnalysisResults ha =
            run_head_analyses(matrices, labels, layer_rho, r.model.rho, hopts, layer_matrices);
        return head_analyses_output(ha);
    }

private:
    AnalysisContext ctx_;
};

}  // namespace

// compare: the pooled flip rate of the model row of regime.csv (spec 7) and the model-scope
// reversal rates (spec 3), param comparison/metric.
void heads_compare_values(const RunFiles& dir, std::vector<RunValue>& out) {
    if (RunTable g(dir, t::kRegime); g.present())
        for (size_t i = 0; i < g.size(); ++i)
            if (g.text(i, "scope") == "model")
                out.push_back({-1, "flip_rate", "pooled", g.num(i, "flip_rate")});
    if (RunTable v(dir, t::kReversal); v.present())
        for (size_t i = 0; i < v.size(); ++i)
            if (v.text(i, "scope") == "model")
                out.push_back({-1, "reversal_rate",
                               v.text(i, "comparison") + "/" + v.text(i, "metric"),
                               v.num(i, "rate")});
}

// dynamics: each layer's (and the model's) flip rate per classical metric (reversal.csv) and rho
// (regime.csv).
void heads_trajectory_values(const RunFiles& dir, std::vector<RunValue>& out) {
    if (RunTable v(dir, t::kReversal); v.present())
        for (size_t i = 0; i < v.size(); ++i)
            if (v.text(i, "comparison") == "flip")
                out.push_back({int64_t(v.num(i, "layer")), "flip_rate", v.text(i, "metric"),
                               v.num(i, "rate")});
    if (RunTable g(dir, t::kRegime); g.present())
        for (size_t i = 0; i < g.size(); ++i)
            out.push_back({int64_t(g.num(i, "layer")), "rho", "", g.num(i, "rho")});
}

std::unique_ptr<Analysis> make_heads(const AnalysisContext& c) {
    return std::make_unique<Heads>(c);
}

}  // namespace sinkscope::analysis
