// Figures of report.html, built from the tables a run directory holds (the files written by the
// metrics pipeline, the head analyses, the section 8 analyses and the value-space analysis).
// Each figure reads one table; tables that are absent are skipped, so a run with a subset of
// analyses still gets a report.
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/io/table.hpp"
#include "sinkscope/report/report.hpp"

namespace sinkscope::report {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// CSV table -> array of row objects (numbers stay numbers; non-finite values become null).
json table_rows(const fs::path& csv) {
    io::Table t = io::Table::read_csv(csv);
    json rows = json::array();
    for (const auto& r : t.rows()) {
        json o = json::object();
        for (size_t i = 0; i < r.size(); ++i) {
            const auto& name = t.columns()[i];
            if (auto d = std::get_if<double>(&r[i]))
                o[name] = std::isfinite(*d) ? json(*d) : json(nullptr);
            else if (auto s = std::get_if<std::string>(&r[i]))
                o[name] = *s;
            else
                o[name] = std::get<int64_t>(r[i]);
        }
        rows.push_back(std::move(o));
    }
    return rows;
}

json select(const json& rows, const std::function<bool(const json&)>& keep) {
    json out = json::array();
    for (const auto& r : rows)
        if (keep(r)) out.push_back(r);
    return out;
}

// A field of a row, null when the row lacks it (a hand-edited table may miss a column; reading a
// missing key through a const json's operator[] would be undefined behaviour).
const json& field(const json& r, const char* key) {
    static const json null_value;
    if (!r.is_object()) return null_value;
    const auto it = r.find(key);
    return it == r.end() ? null_value : *it;
}
// A run folder edited by hand (or not written by sinkscope): one line naming it.
InputError unexpected_structure(const fs::path& dir, const std::string& what) {
    return InputError(dir.string(), "run.json or frame.json has an unexpected structure: " + what);
}
double num(const json& r, const char* key) {
    const auto& v = field(r, key);
    return v.is_number() ? v.get<double>() : std::nan("");
}
std::string str(const json& r, const char* key) {
    const auto& v = field(r, key);
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number()) return io::format_number(v.get<double>());
    return "";
}
bool is(const json& r, const char* key, const std::string& value) { return str(r, key) == value; }
// Long-format "param" columns hold numbers (thresholds, eps, percentiles) as text or number.
double param(const json& r) {
    const auto& v = field(r, "param");
    if (v.is_number()) return v.get<double>();
    try {
        return std::stod(v.get<std::string>());
    } catch (...) {
        return std::nan("");
    }
}

namespace t = analysis::tables;
namespace m = analysis::tables::metric;

fs::path table_file(const fs::path& dir, const char* name) {
    return dir / (std::string(name) + ".csv");
}

// Bootstrap intervals (bootstrap.csv, --bootstrap N) attached to the rows of `table` they belong
// to (same layer, head, metric and param; value_space keys its param by convention), as ci_lo /
// ci_hi for the error bars of the line figures.
void attach_intervals(const fs::path& dir, const char* table, json& rows,
                      const char* param_key = "param") {
    const fs::path file = table_file(dir, t::kBootstrap.name);
    if (!fs::exists(file)) return;
    std::map<std::string, std::pair<double, double>> ci;
    auto key = [](const json& r, const char* pk) {
        return str(r, "layer") + "|" + str(r, "head") + "|" + str(r, "metric") + "|" + str(r, pk);
    };
    for (const auto& b : table_rows(file))
        if (is(b, "table", table)) ci[key(b, "param")] = {num(b, "ci_lo"), num(b, "ci_hi")};
    for (auto& r : rows) {
        const auto it = ci.find(key(r, param_key));
        if (it == ci.end() || !std::isfinite(it->second.first) || !std::isfinite(it->second.second))
            continue;
        r["ci_lo"] = it->second.first;
        r["ci_hi"] = it->second.second;
    }
}

// Sink_eps (spec 8.q): each head's mean attention to the key, with the share above eps.
void sink_eps_figure(const fs::path& dir, ReportContent& c) {
    if (!fs::exists(table_file(dir, t::kSinkEps.name))) return;
    const json rows = table_rows(table_file(dir, t::kSinkEps.name));
    const json alpha = select(rows, [](const json& r) { return is(r, "metric", "alpha"); });
    std::string share = "not available";
    for (const auto& r : rows)
        if (is(r, "metric", "sink_eps") && num(r, "layer") < 0)
            share = io::format_number(num(r, "value")) + " (" + str(r, "convention") + ")";
    c.figures.push_back({"Sinks", "Sink_eps: mean attention to the first position per head",
                         "alpha = mean attention of the queries that see the key (param) to it, "
                         "averaged over inputs; Sink_eps, the share of heads with alpha > eps "
                         "(Gu et al. 2025, spec 8.q), is " +
                             share + ".",
                         heatmap_spec(alpha, "head", "layer", "value", "alpha")});
}

void sinks_section(const fs::path& dir, ReportContent& c) {
    sink_eps_figure(dir, c);
    if (!fs::exists(table_file(dir, t::kHeads.name))) return;
    json heads = table_rows(table_file(dir, t::kHeads.name));
    json mass = select(heads, [](const json& r) { return is(r, "metric", m::kSinkMass); });
    c.figures.push_back({"Sinks", "Sink mass per head",
                         "Mean attention mass on the sink position (spec 1) over the rows each head "
                         "used; layer by head.",
                         heatmap_spec(mass, "head", "layer", "value", "sink mass")});
    // Entropy identity H = H_b(s) + (1-s) H(pi) holds per row, so its means split exactly.
    std::map<int64_t, std::array<double, 3>> per_layer;  // sum H, sum Hb, count
    for (const auto& r : heads) {
        const double layer = num(r, "layer");  // a hand-edited table may hold anything here
        if (!(std::fabs(layer) < 1e9)) continue;
        const auto l = int64_t(layer);
        if (is(r, "metric", m::kEntropy)) per_layer[l][0] += num(r, "value"), per_layer[l][2] += 1;
        if (is(r, "metric", m::kBinarySinkEntropy)) per_layer[l][1] += num(r, "value");
    }
    json ent = json::array();
    for (const auto& [l, s] : per_layer) {
        if (s[2] == 0) continue;
        ent.push_back({{"layer", l}, {"term", "sink: H_b(s)"}, {"nats", s[1] / s[2]}});
        ent.push_back({{"layer", l}, {"term", "content: (1-s) H(pi)"}, {"nats", (s[0] - s[1]) / s[2]}});
    }
    c.figures.push_back({"Sinks", "Entropy decomposition per layer",
                         "Mean row entropy split exactly into the binary sink term and the content "
                         "term (spec 1 entropy identity), averaged over the heads of each layer.",
                         stacked_bar_spec(ent, "layer", "nats", "term")});
}

void compositional_section(const fs::path& dir, ReportContent& c) {
    const std::string sec = "Compositional geometry (Aitchison)";
    if (fs::exists(table_file(dir, t::kDispersion.name))) {
        json disp = table_rows(table_file(dir, t::kDispersion.name));
        json bars = json::array();
        for (const auto& r : disp) {
            if (!is(r, "scope", "layer")) continue;
            bars.push_back({{"layer", num(r, "layer")}, {"part", "content C_perp"}, {"value", num(r, "c_perp")}, {"rho", num(r, "rho")}});
            bars.push_back({{"layer", num(r, "layer")}, {"part", "sink V_b"}, {"value", num(r, "v_b")}, {"rho", num(r, "rho")}});
        }
        c.figures.push_back({sec, "Distance decomposition per layer",
                             "Total Aitchison dispersion of the heads of a layer split into content "
                             "dispersion C_perp and sink dispersion V_b (spec 2); rho = V_b / total.",
                             stacked_bar_spec(bars, "layer", "value", "part")});
    }
    if (fs::exists(table_file(dir, t::kReversal))) {
        json rev = table_rows(table_file(dir, t::kReversal));
        json bars = select(rev, [](const json& r) {
            return is(r, "scope", "model") && num(r, "layer") < 0 && !is(r, "comparison", "check");
        });
        for (auto& r : bars) r["comparison_metric"] = str(r, "metric") + " " + str(r, "comparison");
        c.figures.push_back({sec, "Reversal rates",
                             "Share of head triples whose 'which head is closer' verdict flips: "
                             "keep vs drop of the same metric (flip), keep vs dA_perp (vs_content), "
                             "dA vs dA_perp (spec 3; ties excluded, 10.f).",
                             bar_spec(bars, "comparison_metric", "rate")});
    }
    if (fs::exists(table_file(dir, t::kClusters))) {
        json clu = table_rows(table_file(dir, t::kClusters));
        json pts = select(clu, [](const json& r) {
            static const std::set<std::string> shown = {"dA", "dA_perp", "js_keep", "js_drop"};
            return shown.count(str(r, "matrix")) > 0;
        });
        for (auto& r : pts) {
            r["label"] = "L" + str(r, "layer") + "H" + str(r, "head");
            r["cluster"] = str(r, "cluster");
        }
        c.figures.push_back({sec, "Head maps with and without the sink",
                             "Classical MDS of the head distance matrices (spec 4), coloured by "
                             "average-linkage cluster: dA and js_keep include the sink, dA_perp and "
                             "js_drop do not.",
                             scatter_spec(pts, "mds_x", "mds_y", "cluster", "matrix")});
    }
    if (fs::exists(table_file(dir, t::kAri))) {
        json ari = table_rows(table_file(dir, t::kAri));
        for (auto& r : ari) r["pair"] = str(r, "first") + " vs " + str(r, "second");
        c.figures.push_back({sec, "Agreement of clusterings (ARI)",
                             "Adjusted Rand Index between the clusterings of every pair of matrices; "
                             "the first bars are the headline pairs JS keep vs drop and dA vs dA_perp.",
                             bar_spec(ari, "pair", "ari")});
    }
    if (fs::exists(table_file(dir, t::kRegime))) {
        json reg = table_rows(table_file(dir, t::kRegime));
        for (const auto& r : reg)
            if (is(r, "scope", "model"))
                c.notes.push_back("Regime predictor (spec 7): rho = " + str(r, "rho") + " -> " +
                                  str(r, "predicted") + "; measured flip rate " +
                                  str(r, "flip_rate") + " -> " + str(r, "measured") + " (" +
                                  str(r, "agreement") + ").");
    }
}

void frames_section(const fs::path& dir, ReportContent& c) {
    const std::string sec = "Reference frames (section 8)";
    if (fs::exists(dir / t::kFrameFile)) {
        const json f = io::read_json_file(dir / t::kFrameFile);
        c.notes.push_back(
            "Reference-frame type: " + f.value("verdict", std::string("?")) +
            " (share of first-position anchors in middle and late layers " +
            (f.contains("share_first_mid_late") ? io::brief(f["share_first_mid_late"]) : "?") +
            ", mean reference count " +
            (f.contains("mean_reference_count") ? io::brief(f["mean_reference_count"]) : "?") +
            "; rule: " + f.value("rule", std::string("")) + ").");
        json bars = json::array();
        const json layers = f.value("layers", json::array());
        if (!layers.is_array())
            throw unexpected_structure(dir, "frame.json 'layers' is not a list");
        for (const auto& l : layers) {
            if (!l.is_object())
                throw unexpected_structure(dir, "an entry of frame.json 'layers' is not an object");
            for (const char* k : {"first", "last", "other"})
                bars.push_back(
                    {{"layer", field(l, "layer")}, {"anchor", k}, {"count", field(l, k)}});
        }
        c.figures.push_back({sec, "Frame-type evidence: anchor position per layer",
                             "Number of (input, head) anchors whose top key is the first position, the "
                             "last position or another position (spec 8, 10.n).",
                             stacked_bar_spec(bars, "layer", "count", "anchor")});
    }
    if (fs::exists(table_file(dir, t::kGraphs))) {
        json g = table_rows(table_file(dir, t::kGraphs));
        json pts = select(g, [](const json& r) {
            static const std::set<std::string> shown = {m::kDensity,        m::kLambda2,
                                                        m::kStarCombined,   m::kGini,
                                                        m::kCentralization, m::kLaplacianGap};
            return num(r, "head") < 0 && num(r, "layer") >= 0 && shown.count(str(r, "metric"));
        });
        attach_intervals(dir, t::kGraphs, pts);
        for (auto& r : pts) r["threshold"] = param(r), r["layer"] = "layer " + str(r, "layer");
        c.figures.push_back({sec, "Graph metrics vs threshold",
                             "Thresholded head-averaged attention graphs per layer (spec 8, 10.i): "
                             "density, algebraic connectivity, Laplacian gap, star-likeness, Gini, "
                             "centralization.",
                             facet_line_spec(pts, "threshold", "value", "layer", "metric", true)});
    }
    if (fs::exists(table_file(dir, t::kBetti))) {
        json b = table_rows(table_file(dir, t::kBetti));
        json pts = select(b, [](const json& r) { return num(r, "head") < 0; });
        for (auto& r : pts) r["eps"] = param(r), r["layer"] = "layer " + str(r, "layer");
        c.figures.push_back({sec, "Betti curves per layer",
                             "Number of bars alive at each filtration value of the Vietoris-Rips "
                             "complex on the attention distance (spec 8, 10.j), mean over inputs.",
                             facet_line_spec(pts, "eps", "value", "layer", "metric", false)});
    }
    if (fs::exists(table_file(dir, t::kKl))) {
        json k = table_rows(table_file(dir, t::kKl));
        json pts = select(k, [](const json& r) { return is(r, "metric", m::kKlReduction); });
        attach_intervals(dir, t::kKl, pts);
        for (auto& r : pts) r["percentile"] = "t = " + str(r, "param");
        c.figures.push_back({sec, "KL reduction on sink removal per layer",
                             "Mean over heads of KL(head || head average) before minus after removing "
                             "the sink set S_t (spec 8); positive: heads agree more without sinks.",
                             line_spec(pts, "layer", "value", "percentile")});
    }
    if (fs::exists(table_file(dir, t::kSpectra))) {
        json s = table_rows(table_file(dir, t::kSpectra));
        json pts = select(s, [](const json& r) {
            static const std::set<std::string> shown = {"stable_rank", "participation_ratio", "mp_ks",
                                                        "spectral_gap", "eig_participation_ratio"};
            return num(r, "head") < 0 && shown.count(str(r, "metric"));
        });
        c.figures.push_back({sec, "Random-matrix spectra per layer",
                             "Singular-value statistics of the head-averaged attention (spec 8, 10.l).",
                             facet_line_spec(pts, "layer", "value", "convention", "metric", false)});
    }
    if (fs::exists(table_file(dir, t::kTokens))) {
        json t = table_rows(table_file(dir, t::kTokens));
        json bars = select(t, [](const json& r) { return str(r, "metric").rfind("share_", 0) == 0; });
        c.figures.push_back({sec, "Token specialisation",
                             "Share of heads whose top key (largest column mean) is the first, last "
                             "or another position, per layer (spec 8, 10.m).",
                             stacked_bar_spec(bars, "layer", "value", "metric")});
    }
    if (fs::exists(table_file(dir, t::kValueSpace.name))) {
        json v = table_rows(table_file(dir, t::kValueSpace.name));
        json pts = select(v, [](const json& r) {
            return is(r, "metric", m::kRelativeMagnitude) ||
                   is(r, "metric", "directional_influence");
        });
        attach_intervals(dir, t::kValueSpace.name, pts, "convention");
        for (auto& r : pts) r["series"] = str(r, "metric") + " (" + str(r, "convention") + ")";
        c.figures.push_back({sec, "Value-space magnitudes",
                             "Share of each query's attention output carried by the reference tokens: "
                             "relative magnitude and directional influence, in the hidden-state and "
                             "true-V spaces (spec 8).",
                             line_spec(pts, "layer", "value", "series")});
    }
}

// `sinkscope prune` (prune.csv, prune_random.csv): the pruned model's score against sparsity, one
// line per channel, the random baseline as its mean with min-max bars; sparsity 0 is the
// unpruned model in every series.
void prune_section(const fs::path& dir, ReportContent& c) {
    if (!fs::exists(table_file(dir, t::kPrune.name))) return;
    const json rows = table_rows(table_file(dir, t::kPrune.name));
    if (rows.empty()) return;
    const std::string measure = str(rows[0], "measure");
    double unpruned = std::nan("");
    for (const auto& r : rows)
        if (is(r, "method", "none")) unpruned = num(r, "value");
    json pts = json::array();
    std::set<std::string> series;
    for (const auto& r : rows) {
        const std::string method = str(r, "method");
        if (method == "none" || method == "random") continue;
        pts.push_back(
            {{"series", method}, {"sparsity", num(r, "sparsity")}, {measure, num(r, "value")}});
        series.insert(method);
    }
    const std::string random = "random (mean)";
    if (fs::exists(table_file(dir, t::kPruneRandom.name)))
        for (const auto& r : table_rows(table_file(dir, t::kPruneRandom.name))) {
            pts.push_back({{"series", random},
                           {"sparsity", num(r, "sparsity")},
                           {measure, num(r, "mean")},
                           {"ci_lo", num(r, "min")},
                           {"ci_hi", num(r, "max")}});
            series.insert(random);
        }
    for (const auto& s : series)
        pts.push_back({{"series", s}, {"sparsity", 0.0}, {measure, unpruned}});
    c.figures.push_back(
        {"Pruning", "Pruned model against sparsity",
         measure + " of the model after removing the most redundant heads (greedy: the head "
                   "nearest to another surviving head under each channel goes first), against "
                   "random pruning of as many heads (mean over the seeds, bars from the lowest to "
                   "the highest "
                   "seed). Sparsity 0 is the unpruned model. A channel "
                   "below the random band removes heads the model needs less than random ones.",
         line_spec(pts, "sparsity", measure, "series")});
}

// `sinkscope fisher` (fisher.csv): the Fisher trace per layer stacked by component, the
// attention share per layer, and the per-head trace as a layer x head heat map.
void fisher_section(const fs::path& dir, ReportContent& c) {
    const fs::path file = table_file(dir, t::kFisher.name);
    if (!fs::exists(file)) return;
    const json rows = table_rows(file);
    if (rows.empty()) return;
    const std::string sec = "Fisher information";
    const std::string prefix = m::kFisherPrefix;
    const std::string kind = str(rows[0], "convention");
    json parts = json::array(), shares = json::array(), heads = json::array();
    for (const auto& r : rows) {
        const std::string metric = str(r, "metric");
        const double layer = num(r, "layer"), head = num(r, "head");
        if (head >= 0) {
            if (metric == m::kFisherHead) heads.push_back(r);
        } else if (layer >= 0 && metric == m::kAttentionShare) {
            shares.push_back({{"layer", layer}, {"attention share", num(r, "value")}});
        } else if (layer >= 0 && metric.rfind(prefix, 0) == 0 && metric != m::kFisherAttention &&
                   metric != m::kFisherLayerTotal) {
            parts.push_back({{"layer", layer},
                             {"component", metric.substr(prefix.size())},
                             {"fisher", num(r, "value")}});
        }
    }
    c.notes.push_back("Fisher information (" + kind +
                      "): mean over samples of the squared gradient of each sample's mean NLL, "
                      "summed over a tensor's elements (run.json definitions).");
    c.figures.push_back({sec, "Fisher trace per layer by component",
                         "Sum of the diagonal Fisher over each layer's tensors, stacked by what "
                         "the tensor is (attention q/k/v/o, mlp, norm).",
                         stacked_bar_spec(parts, "layer", "fisher", "component")});
    c.figures.push_back({sec, "Attention share of the Fisher trace per layer",
                         "F_attention / (F_attention + F_mlp): how much of the layer's "
                         "sensitivity sits in attention rather than in the MLP.",
                         line_spec(shares, "layer", "attention share", "")});
    c.figures.push_back({sec, "Fisher trace per head",
                         "Each head's rows of q, k, v and its columns of the output projection "
                         "(a key/value head shared by g query heads counts 1/g for each).",
                         heatmap_spec(heads, "head", "layer", "value", "Fisher trace")});
}

}  // namespace

ReportContent collect_report(const fs::path& run_dir) {
    ReportContent c;
    c.title = "sinkscope report: " + fs::absolute(run_dir).filename().string();
    try {
        if (fs::exists(run_dir / "run.json")) {
            c.run = io::read_json_file(run_dir / "run.json");
            if (c.run.contains("model") && c.run["model"].contains("path"))
                c.title = "sinkscope report: " + c.run["model"]["path"].get<std::string>();
        }
        sinks_section(run_dir, c);
        compositional_section(run_dir, c);
        frames_section(run_dir, c);
        prune_section(run_dir, c);
        fisher_section(run_dir, c);
    } catch (const json::exception& e) {
        throw unexpected_structure(run_dir, printable(e.what()));
    }
    if (c.run.contains("p2") && c.run["p2"].is_object() &&
        c.run["p2"].value("mode", "") == "ruscio2025")
        c.notes.push_back("Compat mode ruscio2025: section 8 numbers follow the released notebooks; "
                          "on causal models their Betti numbers only count tokens (PAPERS.md B.3).");
    return c;
}

}  // namespace sinkscope::report
