// Figures of report.html, built from the tables a run directory holds (the files written by the
// metrics pipeline, the head analyses, the reference-frame analyses and the value-space analysis).
// Each figure reads one table; tables that are absent are skipped, so a run with a subset of
// analyses still gets a report.
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
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

// figures_compare.cpp: the figures of a `sinkscope compare` directory (none for other runs).
void compare_section(const std::filesystem::path& dir, ReportContent& c);

using nlohmann::json;
namespace fs = std::filesystem;

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

namespace {

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
bool is(const json& r, const char* key, const std::string& value) {
    return str(r, key) == value;
}
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

// Three significant digits for the numbers printed in notes (the tables hold every digit).
std::string sig3(double v) {
    if (!std::isfinite(v)) return "n/a";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
}
std::string sig3(const json& r, const char* key) {
    const double v = num(r, key);
    return std::isfinite(v) ? sig3(v) : str(r, key);
}

// Where a reader finds the definitions (the report is read without the specification).
constexpr const char* kGlossary = " Definitions: docs/metrics.md.";

// Per layer, the mean over the layer's heads of one heads.csv metric.
std::map<int64_t, double> layer_means(const json& heads, const char* metric) {
    std::map<int64_t, std::pair<double, int>> acc;
    for (const auto& r : heads) {
        const double layer = num(r, "layer"), v = num(r, "value");
        // a hand-edited table may hold anything in these cells
        if (!is(r, "metric", metric) || !(std::fabs(layer) < 1e9) || !std::isfinite(v)) continue;
        auto& [sum, n] = acc[int64_t(layer)];
        sum += v, ++n;
    }
    std::map<int64_t, double> out;
    for (const auto& [l, sn] : acc) out[l] = sn.first / sn.second;
    return out;
}

// Sink_eps (Gu et al. 2025): each head's mean attention to the sink key, and the share of heads
// above eps.
void sink_eps_figure(const fs::path& dir, ReportContent& c) {
    if (!fs::exists(table_file(dir, t::kSinkEps.name))) return;
    const json rows = table_rows(table_file(dir, t::kSinkEps.name));
    const json alpha = select(rows, [](const json& r) { return is(r, "metric", "alpha"); });
    std::string share = "not available";
    for (const auto& r : rows)
        if (is(r, "metric", m::kSinkEps) && num(r, "layer") < 0)
            share = sig3(r, "value") + " (" + str(r, "convention") + ")";
    HeatmapOptions fixed;
    fixed.lo = 0, fixed.hi = 1;  // a probability, as the sink-mass map
    c.figures.push_back(
        {"Sinks", "Sink_eps: heads whose mean attention to the sink key exceeds eps",
         "Each cell is a head's alpha, the mean attention of the queries that see the sink key to "
         "it, averaged over inputs (sink_eps.csv). Sink_eps, the share of heads with alpha above "
         "eps (Gu et al. 2025), is " +
             share +
             ". A model with sinks has many cells above eps; the colour scale is fixed to 0-1." +
             kGlossary,
         heatmap_spec(alpha, "head", "layer", "value", {"head", "layer", "alpha (share)"}, fixed)});
}

void sinks_section(const fs::path& dir, ReportContent& c) {
    sink_eps_figure(dir, c);
    if (fs::exists(table_file(dir, t::kHeads.name))) {
        json heads = table_rows(table_file(dir, t::kHeads.name));
        json mass = select(heads, [](const json& r) { return is(r, "metric", m::kSinkMass); });
        HeatmapOptions fixed;
        fixed.lo = 0, fixed.hi = 1;  // a probability: the same colours mean the same in every run
        c.figures.push_back(
            {"Sinks", "Sink mass per head",
             std::string("Mean attention each head puts on the sink token (heads.csv sink_mass, "
                         "over the rows with at least min_parts visible keys). Bright cells are "
                         "sink heads; a layer that is bright across its heads is a sink layer. The "
                         "colour scale is fixed to 0-1, so reports of different runs compare.") +
                 kGlossary,
             heatmap_spec(mass, "head", "layer", "value", {"head", "layer", "sink mass (share)"},
                          fixed)});
        // H(p) = H_b(s) + (1-s) H(pi) holds per row, so the head means of the two terms stack to
        // the mean entropy exactly; both come from their own columns.
        const auto hb = layer_means(heads, m::kBinarySinkEntropy);
        const auto weighted = layer_means(heads, m::kContentEntropyWeighted);
        json ent = json::array();
        for (const auto& [l, v] : hb) {
            ent.push_back({{"layer", l}, {"term", "sink: H_b(s)"}, {"nats", v}, {"order", 0}});
            if (weighted.count(l))
                ent.push_back({{"layer", l},
                               {"term", "content: (1-s) H(pi)"},
                               {"nats", weighted.at(l)},
                               {"order", 1}});
        }
        if (!ent.empty()) {
            // With --bootstrap: the interval of each layer's mean entropy (bootstrap.csv, heads,
            // head -1) on top of its bar, which the two terms add up to.
            json totals = json::array();
            for (const auto& [l, v] : hb)
                totals.push_back({{"layer", l}, {"head", -1}, {"metric", m::kEntropy}});
            attach_intervals(dir, t::kHeads.name, totals);
            totals = select(totals, [](const json& r) { return r.contains("ci_lo"); });
            c.figures.push_back(
                {"Sinks", "Entropy decomposition per layer",
                 std::string("Mean row entropy (heads.csv entropy) split exactly into the sink "
                             "term binary_sink_entropy and the content term "
                             "content_entropy_weighted, averaged over the heads of each layer. A "
                             "short content bar means the heads look at few tokens besides the "
                             "sink; a tall sink bar means the sink takes a middling share. With "
                             "--bootstrap, the error bar is the interval of the layer's mean "
                             "entropy (bootstrap.csv, head -1).") +
                     kGlossary,
                 stacked_bar_spec(ent, "layer", "nats", "term",
                                  {"layer", "mean row entropy (nats)", "term"}, totals)});
        }
    }
    if (fs::exists(table_file(dir, t::kSinkByPosition.name))) {
        json rows = table_rows(table_file(dir, t::kSinkByPosition.name));
        for (auto& r : rows) r["layer"] = "layer " + str(r, "layer");
        c.figures.push_back(
            {"Sinks", "Sink mass against query position",
             std::string("Mean attention on the sink by query position, over heads and inputs "
                         "(sink_by_position.csv), one line per layer. A flat line means the sink "
                         "takes the same share at every length; a trend means the sink mass of a "
                         "run depends on how long its inputs are. Positions that few inputs reach "
                         "are noisier (n_rows).") +
                 kGlossary,
             line_spec(rows, "position", "sink_mass", "layer",
                       {"query position (tokens from the start)", "sink mass (share of attention)",
                        "layer"})});
    }
}

void compositional_section(const fs::path& dir, ReportContent& c) {
    const std::string sec = "Compositional geometry (Aitchison)";
    if (fs::exists(table_file(dir, t::kDispersion.name))) {
        json disp = table_rows(table_file(dir, t::kDispersion.name));
        json bars = json::array();
        for (const auto& r : disp) {
            if (!is(r, "scope", "layer")) continue;
            bars.push_back({{"layer", num(r, "layer")},
                            {"part", "content C_perp"},
                            {"dispersion", num(r, "c_perp")},
                            {"order", 0}});
            bars.push_back({{"layer", num(r, "layer")},
                            {"part", "sink V_b"},
                            {"dispersion", num(r, "v_b")},
                            {"order", 1}});
        }
        c.figures.push_back(
            {sec, "Distance decomposition per layer",
             std::string("How different the heads of a layer are (mean squared Aitchison "
                         "distance to their mean), split into what the content keys contribute "
                         "(C_perp) and what the sink alone contributes (V_b). When V_b is a large "
                         "share (rho = V_b / total, dispersion.csv) head comparisons are driven "
                         "by the sink.") +
                 kGlossary,
             stacked_bar_spec(bars, "layer", "dispersion", "part",
                              {"layer", "dispersion (squared Aitchison units, nats²)", "part"})});
    }
    if (fs::exists(table_file(dir, t::kReversal))) {
        json rev = table_rows(table_file(dir, t::kReversal));
        json bars = select(rev, [](const json& r) {
            return is(r, "scope", "model") && num(r, "layer") < 0 && !is(r, "comparison", "check");
        });
        for (auto& r : bars) {
            const std::string cmp = str(r, "comparison"), metric = str(r, "metric");
            r["comparison"] = cmp == "flip"         ? metric + ": with vs without sink"
                              : cmp == "vs_content" ? metric + " with sink vs dA_perp"
                                                    : metric + " vs dA_perp";
        }
        c.figures.push_back(
            {sec, "Reversal rates",
             std::string("Share of head triples (a, b, c) whose verdict 'is b or c closer to a' "
                         "flips between two distances: the same metric with and without the sink, "
                         "a metric with the sink against the content-only Aitchison distance "
                         "dA_perp, and dA against dA_perp. High rates mean the sink decides which "
                         "heads look alike. Ties are left out.") +
                 kGlossary,
             hbar_spec(bars, "comparison", "rate",
                       {"share of triples that flip", "comparison", ""})});
    }
    if (fs::exists(table_file(dir, t::kFailureGeometry.name))) {
        // Median and the 5-95% band of each distance per sink-mass bin, one panel per metric,
        // keep and drop as two series (bins without pairs are left out).
        json pts = json::array();
        for (const auto& r : table_rows(table_file(dir, t::kFailureGeometry.name))) {
            if (!(num(r, "n_pairs") > 0)) continue;
            const std::string m = str(r, "matrix");
            const size_t cut = m.rfind('_');
            const bool classical = m != "dA" && m != "dA_perp";
            pts.push_back({{"sink mass", 0.5 * (num(r, "bin_lo") + num(r, "bin_hi"))},
                           {"distance", num(r, "median")},
                           {"ci_lo", num(r, "q05")},
                           {"ci_hi", num(r, "q95")},
                           {"convention", classical ? m.substr(cut + 1) : m},
                           {"metric", classical ? m.substr(0, cut) : std::string("Aitchison")}});
        }
        c.figures.push_back(
            {sec, "Where classical metrics stop separating heads",
             std::string("For every pair of heads, its distance against the pair's sink mass "
                         "(mean of the two heads'): the median per sink-mass bin, with the band "
                         "holding 90% of the pairs (failure_geometry.csv). A band that narrows "
                         "towards 0 as the sink mass grows is a metric that can no longer tell "
                         "those heads apart; 'drop' (sink removed) and dA_perp keep them "
                         "apart.") +
                 kGlossary,
             panel_line_spec(pts, "sink mass", "distance", "convention", "metric",
                             {"pair sink mass (bin centre)", "", "convention"})});
    }
    if (fs::exists(table_file(dir, t::kClusters))) {
        json clu = table_rows(table_file(dir, t::kClusters));
        json pts = select(clu, [](const json& r) {
            static const std::set<std::string> shown = {"dA", "dA_perp", "js_keep", "js_drop"};
            return shown.count(str(r, "matrix")) > 0;
        });
        for (auto& r : pts) {
            r["label"] = str(r, "layer") + "." + str(r, "head");
            r["cluster"] = str(r, "cluster");
        }
        c.figures.push_back(
            {sec, "Head maps with and without the sink",
             std::string("Classical multidimensional scaling of the distances between heads, "
                         "one map per distance, points labelled layer.head (where labels would "
                         "overlap, hover a point for it) and coloured by cluster; both axes share "
                         "one scale, so distances on the map read the "
                         "same in every direction. dA and js_keep include the sink, dA_perp and "
                         "js_drop do not: heads that move between clusters are grouped by their "
                         "sink.") +
                 kGlossary,
             map_spec(pts, "mds_x", "mds_y", "cluster", "matrix", "label",
                      {"MDS axis 1 (distance units)", "MDS axis 2 (distance units)", "cluster"})});
    }
    if (fs::exists(table_file(dir, t::kAri))) {
        json ari = table_rows(table_file(dir, t::kAri));
        // Symmetric: ARI(a, b) = ARI(b, a); both halves of the matrix are drawn.
        json cells = json::array();
        for (const auto& r : ari) {
            cells.push_back(
                {{"first", str(r, "first")}, {"second", str(r, "second")}, {"ari", num(r, "ari")}});
            cells.push_back(
                {{"first", str(r, "second")}, {"second", str(r, "first")}, {"ari", num(r, "ari")}});
        }
        HeatmapOptions ari_scale;
        ari_scale.lo = -1, ari_scale.hi = 1, ari_scale.scheme = "redblue";
        c.figures.push_back(
            {sec, "Agreement of clusterings (ARI)",
             std::string("Adjusted Rand Index between the head clusterings of every pair of "
                         "distances: 1 = the same clusters, 0 = chance agreement. Look at js_keep "
                         "vs js_drop and dA vs dA_perp: a low value means removing the sink "
                         "regroups the heads.") +
                 kGlossary,
             heatmap_spec(cells, "second", "first", "ari", {"distance", "distance", "ARI"},
                          ari_scale)});
    }
    if (fs::exists(table_file(dir, t::kRegime))) {
        json reg = table_rows(table_file(dir, t::kRegime));
        for (const auto& r : reg)
            if (is(r, "scope", "model"))
                c.notes.push_back("Regime predictor: rho = " + sig3(r, "rho") + " -> " +
                                  str(r, "predicted") + "; measured flip rate " +
                                  sig3(r, "flip_rate") + " -> " + str(r, "measured") + " (" +
                                  str(r, "agreement") + ")." + kGlossary);
    }
}

// The signature verdict in words: each signature's reading and the types it is consistent with.
std::string signature_note(const json& v, const json& f) {
    auto plain = [](const json& j) { return j.is_string() ? j.get<std::string>() : io::brief(j); };
    std::string text =
        "Signature verdict: " + plain(v.value("verdict", json("?"))) + ", margin " +
        (v.contains("margin") && v["margin"].is_number() ? sig3(v["margin"].get<double>())
                                                         : std::string("?")) +
        " (the rule alone: " + plain(f.value("rule_verdict", json("?"))) +
        "; frame_signatures.csv). Signatures:";
    for (const auto& s : v.value("signatures", json::array())) {
        if (!s.is_object()) continue;
        std::string with;
        const json weights = s.value("consistent_with", json::object());
        if (weights.is_object())
            for (const auto& [type, w] : weights.items())
                with += (with.empty() ? "" : ", ") + type + " " +
                        (w.is_number() ? sig3(w.get<double>()) : plain(w));
        text += " " + plain(s.value("signature", json("?"))) + " = " +
                plain(s.value("reading", json("?"))) + " -> " +
                (with.empty() ? std::string("not counted") : with) + ";";
    }
    return text;
}

// sink_geometry.csv: per layer the mean over heads, with the heads' range as bars (their
// distribution), of the sink's key-norm ratio and of the queries' cosines with the sink's key and
// with the other keys.
void sink_geometry_figures(const fs::path& dir, ReportContent& c) {
    if (!fs::exists(table_file(dir, t::kSinkGeometry.name))) return;
    const json rows = table_rows(table_file(dir, t::kSinkGeometry.name));
    auto points = [&](std::initializer_list<const char*> metrics) {
        std::map<std::pair<std::string, int64_t>, std::array<double, 3>> by;  // mean, min, max
        for (const auto& r : rows) {
            const std::string metric = str(r, "metric");
            const double layer = num(r, "layer"), v = num(r, "value");
            if (std::find_if(metrics.begin(), metrics.end(),
                             [&](const char* m) { return metric == m; }) == metrics.end() ||
                !(layer >= 0 && layer < 1e9) || !std::isfinite(v))
                continue;
            const double inf = std::numeric_limits<double>::infinity();
            auto& e = by.try_emplace({metric, int64_t(layer)},
                                     std::array<double, 3>{std::nan(""), inf, -inf})
                          .first->second;
            if (num(r, "head") < 0)
                e[0] = v;
            else
                e[1] = std::min(e[1], v), e[2] = std::max(e[2], v);
        }
        json pts = json::array();
        for (const auto& [key, e] : by)
            if (std::isfinite(e[0]) && e[1] <= e[2])
                pts.push_back({{"series", key.first},
                               {"layer", key.second},
                               {"value", e[0]},
                               {"ci_lo", e[1]},
                               {"ci_hi", e[2]}});
        return pts;
    };
    const std::string sec = "Reference frames";
    c.figures.push_back(
        {sec, "Sink key norm",
         std::string("The key norm at each layer's sink position divided by the mean norm of "
                     "the other keys: the mean over heads, the bars the heads' range. Below 1: "
                     "the sink's key is shorter than the others (after any rotary embedding).") +
             kGlossary,
         line_spec(points({"key_norm_ratio"}), "layer", "value", "series",
                   {"layer", "key norm ratio (sink / others)", "quantity"})});
    c.figures.push_back(
        {sec, "Query-key cosine with the sink",
         std::string("Mean cosine of the queries with the sink's key and with the other visible "
                     "keys: the mean over heads, the bars the heads' range.") +
             kGlossary,
         line_spec(points({"qk_cosine_sink", "qk_cosine_others"}), "layer", "value", "series",
                   {"layer", "cosine (query, key)", "keys"})});
    // Models with a slot outside the tokens (softmax_one's zero logit, train --kv-bias).
    if (const json slot = points({"slot_mass"}); !slot.empty())
        c.figures.push_back(
            {sec, "Attention outside the tokens",
             std::string("The weight each row gives the slot outside the tokens (the zero logit "
                         "of softmax_one, the learnable key/value slot of train --kv-bias): 1 - "
                         "the row's sum over the tokens, the mean over rows and heads, the bars "
                         "the heads' range. The other analyses read the rows without it "
                         "(closed).") +
                 kGlossary,
             line_spec(slot, "layer", "value", "series", {"layer", "slot mass", "quantity"})});
}

void frames_section(const fs::path& dir, ReportContent& c) {
    const std::string sec = "Reference frames";
    if (fs::exists(dir / t::kFrameFile)) {
        const json f = io::read_json_file(dir / t::kFrameFile);
        auto number = [&](const char* k) {
            if (!f.contains(k)) return std::string("?");
            return f[k].is_number() ? sig3(f[k].get<double>()) : io::brief(f[k]);
        };
        c.notes.push_back("Reference-frame type: " + f.value("verdict", std::string("?")) +
                          " (share of first-position anchors in middle and late layers " +
                          number("share_first_mid_late") + ", mean reference count " +
                          number("mean_reference_count") +
                          "; rule: " + f.value("rule", std::string("")) + ").");
        if (f.contains("signature_verdict") && f["signature_verdict"].is_object())
            c.notes.push_back(signature_note(f["signature_verdict"], f));
        json bars = json::array();
        const json layers = f.value("layers", json::array());
        if (!layers.is_array())
            throw unexpected_structure(dir, "frame.json 'layers' is not a list");
        for (const auto& l : layers) {
            if (!l.is_object())
                throw unexpected_structure(dir, "an entry of frame.json 'layers' is not an object");
            int order = 0;
            for (const char* k : {"first", "last", "other"})
                bars.push_back({{"layer", field(l, "layer")},
                                {"anchor", k},
                                {"anchors", field(l, k)},
                                {"order", order++}});
        }
        c.figures.push_back(
            {sec, "Frame-type evidence: anchor position per layer",
             std::string("Number of (input, head) pairs whose most attended key (the anchor) is "
                         "the first position, the last position or another one. Mostly 'first' "
                         "in the middle and late layers means one global reference frame.") +
                 kGlossary,
             stacked_bar_spec(bars, "layer", "anchors", "anchor",
                              {"layer", "(input, head) pairs", "anchor position"})});
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
        const double nan = std::nan("");
        const std::map<std::string, PanelAxis> panels = {
            {m::kDensity, {"density (share of edges)", 0, 1}},
            {m::kLambda2, {"lambda2 (algebraic connectivity)", nan, nan}},
            {m::kLaplacianGap, {"Laplacian gap lambda3 - lambda2", nan, nan}},
            {m::kStarCombined, {"star-likeness (0-1)", 0, 1}},
            {m::kGini, {"Gini of in-degrees (0-1)", 0, 1}},
            {m::kCentralization, {"in-degree centralization (0-1)", 0, 1}}};
        c.figures.push_back(
            {sec, "Graph metrics vs threshold",
             std::string("Graphs of the head-averaged attention per layer, keeping the edges "
                         "above each threshold: density, connectivity (lambda2, Laplacian gap), "
                         "star-likeness, Gini and centralization of the in-degrees. A sink shows "
                         "as high centralization and star-likeness that persist to large "
                         "thresholds.") +
                 kGlossary,
             panel_line_spec(pts, "threshold", "value", "layer", "metric",
                             {"edge threshold tau (log scale)", "", "layer"}, true, panels)});
        // The threshold correlation map: r(lambda2, M) across layers at each threshold.
        const std::string prefix = m::kFiedlerR;
        json corr = select(g, [&](const json& r) {
            return num(r, "layer") < 0 && num(r, "head") < 0 &&
                   str(r, "metric").rfind(prefix, 0) == 0 && std::isfinite(num(r, "value"));
        });
        for (auto& r : corr)
            r["threshold"] = param(r), r["with"] = str(r, "metric").substr(prefix.size());
        if (!corr.empty())
            c.figures.push_back(
                {sec, "Fiedler value against graph structure, per threshold",
                 std::string("Pearson's r across the layers between lambda2 (algebraic "
                             "connectivity) and each structure metric, at every edge threshold; "
                             "graphs.csv also gives its p-value and the thresholds where its sign "
                             "flips (sign_flip_lambda2_*).") +
                     kGlossary,
                 line_spec(corr, "threshold", "value", "with",
                           {"edge threshold tau (log scale)", "Pearson r across layers (-1 to 1)",
                            "lambda2 with"},
                           true)});
    }
    if (fs::exists(table_file(dir, t::kBetti))) {
        json b = table_rows(table_file(dir, t::kBetti));
        json pts = select(b, [](const json& r) { return num(r, "head") < 0; });
        for (auto& r : pts) r["eps"] = param(r), r["layer"] = "layer " + str(r, "layer");
        const std::map<std::string, PanelAxis> panels = {
            {"betti0", {"Betti 0 (connected components)"}}, {"betti1", {"Betti 1 (loops)"}}};
        c.figures.push_back(
            {sec, "Betti curves per layer",
             std::string("Number of connected components (Betti 0) and loops (Betti 1) of the "
                         "tokens joined when their attention distance is below eps, mean over "
                         "inputs. Components that merge early mean tokens attend to each other "
                         "strongly.") +
                 kGlossary,
             panel_line_spec(pts, "eps", "value", "layer", "metric",
                             {"distance threshold eps (1 - attention)", "", "layer"}, false,
                             panels)});
    }
    if (fs::exists(table_file(dir, t::kKl))) {
        json k = table_rows(table_file(dir, t::kKl));
        json pts = select(k, [](const json& r) { return is(r, "metric", m::kKlReduction); });
        attach_intervals(dir, t::kKl, pts);
        for (auto& r : pts) r["percentile"] = "t = " + str(r, "param");
        c.figures.push_back(
            {sec, "KL reduction on sink removal per layer",
             std::string("How much closer the heads get to their average when the sink keys (those "
                         "receiving attention at or above the t-percentile) are removed: KL before "
                         "minus after, mean over heads. Positive: the heads disagree mainly about "
                         "the sinks.") +
                 kGlossary,
             line_spec(pts, "layer", "value", "percentile",
                       {"layer", "KL reduction (nats)", "sink percentile"})});
    }
    if (fs::exists(table_file(dir, t::kSpectra))) {
        json s = table_rows(table_file(dir, t::kSpectra));
        json pts = select(s, [](const json& r) { return num(r, "head") < 0; });
        const std::map<std::string, PanelAxis> panels = {
            {"sigma1_sq", {"sigma1² (largest squared singular value)"}},
            {"stable_rank", {"stable rank"}},
            {"participation_ratio", {"participation ratio"}},
            {"mp_ks", {"KS distance to the MP law", 0, 1}}};
        c.figures.push_back(
            {sec, "Random-matrix spectra per layer",
             std::string("Singular values of the head-averaged attention: the largest one, the "
                         "effective ranks, and how far the rest is from a random matrix's "
                         "spectrum. A dominant sigma1² with a stable rank near 1 is a rank-one "
                         "(sink) pattern.") +
                 kGlossary,
             panel_line_spec(pts, "layer", "value", "convention", "metric",
                             {"layer", "", "convention"}, false, panels)});
    }
    if (fs::exists(table_file(dir, t::kEntropy))) {
        // Per layer: the entropy of the head-averaged attention (head -1) and the mean of the
        // heads' own entropies; the first is at least the second (entropy is concave).
        const json e = table_rows(table_file(dir, t::kEntropy));
        json pts = json::array();
        const auto per_layer = [&](bool averaged, const char* series) {
            const json rows = select(e, [&](const json& r) {
                return (num(r, "head") < 0) == averaged && num(r, "layer") >= 0;
            });
            for (const auto& [l, v] : layer_means(rows, "entropy_all_rows"))
                pts.push_back({{"layer", l}, {"value", v}, {"series", series}});
        };
        per_layer(true, "head-averaged attention");
        per_layer(false, "mean over heads");
        c.figures.push_back(
            {sec, "Attention entropy per layer",
             std::string("Mean over all rows of the row entropy (entropy.csv entropy_all_rows): "
                         "of the head-averaged attention, and the mean of the heads' own "
                         "entropies. Low entropy means concentrated attention (a strong sink "
                         "gives entropy near 0); a large gap between the two lines means the "
                         "heads attend to different keys.") +
                 kGlossary,
             line_spec(pts, "layer", "value", "series",
                       {"layer", "row entropy (nats)", "entropy of"})});
    }
    if (fs::exists(table_file(dir, t::kTokens))) {
        json rows = table_rows(table_file(dir, t::kTokens));
        // Per head: the share of inputs whose top key is first / last / other; per layer the
        // mean over heads is the share of (input, head) pairs, and the three sum to 1.
        std::map<std::pair<int64_t, std::string>, std::pair<double, int>> acc;
        for (const auto& r : rows) {
            const std::string metric = str(r, "metric");
            const double layer = num(r, "layer"), v = num(r, "value");
            if (metric.rfind("share_", 0) != 0 || num(r, "head") < 0 || !(std::fabs(layer) < 1e9) ||
                !std::isfinite(v))
                continue;
            auto& [sum, n] = acc[{int64_t(layer), metric.substr(6)}];
            sum += v, ++n;
        }
        json bars = json::array();
        for (const auto& [key, sn] : acc)
            bars.push_back({{"layer", key.first},
                            {"top key", key.second},
                            {"share", sn.first / sn.second},
                            {"order", key.second == "first"  ? 0
                                      : key.second == "last" ? 1
                                                             : 2}});
        c.figures.push_back(
            {sec, "Token specialisation",
             std::string("Share of (input, head) pairs of each layer whose top key (the key with "
                         "the largest mean attention) is the first position, the last position "
                         "or another one. Per-key counts are in token_keys.csv.") +
                 kGlossary,
             stacked_bar_spec(bars, "layer", "share", "top key",
                              {"layer", "share of (input, head) pairs", "top key"})});
    }
    if (fs::exists(table_file(dir, t::kValueSpace.name))) {
        json v = table_rows(table_file(dir, t::kValueSpace.name));
        json pts = select(v, [](const json& r) {
            return (is(r, "metric", m::kRelativeMagnitude) ||
                    is(r, "metric", "directional_influence")) &&
                   num(r, "head") < 0;  // the layer's value; value-space heads have rows too
        });
        attach_intervals(dir, t::kValueSpace.name, pts, "convention");
        for (auto& r : pts) r["series"] = str(r, "metric") + " (" + str(r, "convention") + ")";
        c.figures.push_back(
            {sec, "Value-space magnitudes",
             std::string("Share of each query's attention output carried by the reference "
                         "tokens: relative magnitude and directional influence, in the "
                         "hidden-state and value spaces. Near 1: the output is mostly the "
                         "reference tokens' values.") +
                 kGlossary,
             line_spec(pts, "layer", "value", "series",
                       {"layer", "share of the attention output", "quantity (space)"})});
    }
    sink_geometry_figures(dir, c);
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
         line_spec(pts, "sparsity", measure, "series",
                   {"sparsity (share of heads removed)", measure, "pruning"})});
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
    c.figures.push_back(
        {sec, "Fisher trace per layer by component",
         "Sum of the diagonal Fisher over each layer's tensors, stacked by what "
         "the tensor is (attention q/k/v/o, mlp, norm).",
         stacked_bar_spec(
             parts, "layer", "fisher", "component",
             {"layer", "Fisher trace (sum of mean squared gradients, nats²)", "component"})});
    c.figures.push_back({sec, "Attention share of the Fisher trace per layer",
                         "F_attention / (F_attention + F_mlp): how much of the layer's "
                         "sensitivity sits in attention rather than in the MLP.",
                         line_spec(shares, "layer", "attention share", "",
                                   {"layer", "attention share of the Fisher trace", ""})});
    c.figures.push_back(
        {sec, "Fisher trace per head",
         "Each head's rows of q, k, v and its columns of the output projection "
         "(a key/value head shared by g query heads counts 1/g for each).",
         heatmap_spec(heads, "head", "layer", "value", {"head", "layer", "trace, nats²"})});
}

// `sinkscope dynamics` (trajectory.csv, entropy_split.csv): the analyses over training steps,
// the entropy change split into its sink and content parts (spec 6), spectra over training.
void dynamics_section(const fs::path& dir, ReportContent& c) {
    const fs::path traj_file = table_file(dir, t::kTrajectory.name),
                   split_file = table_file(dir, t::kEntropySplit.name);
    if (!fs::exists(traj_file)) return;
    const std::string sec = "Across checkpoints";
    json rows = table_rows(traj_file);
    // x: the training step when every checkpoint has one (log axis), else the manifest order.
    bool steps = true;
    std::map<std::string, double> order;
    for (const auto& r : rows) {
        steps = steps && num(r, "step") > 0;
        order.emplace(str(r, "checkpoint"), double(order.size()));
    }
    for (auto& r : rows) r["x"] = steps ? num(r, "step") : order[str(r, "checkpoint")];
    const std::string x_title = steps ? "training step (log scale)" : "checkpoint (manifest order)";
    // The sink's geometry (sink_geometry.csv's model values) has a figure of its own, beside
    // Sink_eps: when the sink formed.
    static const std::set<std::string> kGeometry = {
        "key_norm_sink",    "key_norm_others",  "key_norm_ratio", "qk_cosine_sink",
        "qk_cosine_others", "qk_cosine_excess", "slot_mass"};
    const json model_level = select(rows, [](const json& r) {
        const std::string m = str(r, "metric");
        return num(r, "layer") < 0 && str(r, "param") != "spectra" && m != "rho" &&
               !kGeometry.count(m);
    });
    // Each panel's y axis names its quantity and unit (docs/metrics.md).
    static const std::map<std::string, std::string> kUnits = {
        {"sink_mass", "sink mass s (share of attention)"},
        {"entropy", "row entropy H (nats)"},
        {"binary_sink_entropy", "sink part H_b(s) (nats)"},
        {"content_entropy_weighted", "content part (1 - s) H(pi) (nats)"},
        {"content_entropy", "content entropy H(pi) (nats)"},
        {"sink_eps", "Sink_eps (share of heads)"},
        {"flip_rate", "flip rate (share of triples)"},
        {"stable_rank", "stable rank (dimensionless)"},
        {"participation_ratio", "participation ratio (dimensionless)"},
        {"mp_ks", "KS distance to the MP law (0-1)"}};
    std::map<std::string, PanelAxis> axes;
    json panels = json::array();
    for (json r : model_level) {
        const std::string metric = str(r, "metric");
        if (!str(r, "param").empty()) r["metric"] = metric + " (" + str(r, "param") + ")";
        if (const auto u = kUnits.find(metric); u != kUnits.end())
            axes[str(r, "metric")].title = u->second;
        panels.push_back(r);
    }
    for (const auto& [metric, title] : kUnits) axes[metric].title = title;
    c.figures.push_back(
        {sec, "The model's sink and entropy over training",
         "Means over every row of every layer and head, one panel per quantity: sink mass s, row "
         "entropy H, its sink part H_b(s) and content part (1 - s) H(pi), the content entropy "
         "H(pi), Sink_eps and the flip rates of the classical metrics (trajectory.csv)." +
             std::string(kGlossary),
         panel_line_spec(panels, "x", "value", "", "metric", {x_title, "", ""}, steps, axes)});
    // The emergence curve: Sink_eps, then the sink's key norm (absolute and against the other
    // keys') and the queries' cosine with its key (absolute and in excess of the other keys').
    json emergence = json::array();
    std::map<std::string, PanelAxis> emergence_axes;
    bool geometry = false;
    for (const auto& [metric, title] : std::vector<std::pair<std::string, std::string>>{
             {"sink_eps", "Sink_eps (share of heads)"},
             {"key_norm_sink", "sink key norm ||k_s||"},
             {"key_norm_ratio", "key norm ratio (sink / others)"},
             {"qk_cosine_sink", "cosine (query, sink key)"},
             {"qk_cosine_excess", "cosine excess (sink - others)"},
             {"slot_mass", "slot mass (attention outside the tokens)"}})
        for (json r : rows) {
            if (num(r, "layer") >= 0 || !is(r, "metric", metric)) continue;
            geometry = geometry || metric != "sink_eps";
            r["metric"] = metric == "sink_eps" ? "Sink_eps (" + str(r, "param") + ")" : metric;
            emergence_axes[str(r, "metric")].title = title;
            emergence.push_back(r);
        }
    if (geometry)
        c.figures.push_back(
            {sec, "When the sink formed",
             "Per checkpoint: Sink_eps (the share of heads whose mean attention to position 0 "
             "exceeds eps) and, at each layer's sink position, the key norm ||k_s||, its ratio to "
             "the mean norm of the other keys, the queries' mean cosine with the sink's key and "
             "its excess over their cosine with the other keys, means over the heads of every "
             "layer (trajectory.csv, from each checkpoint's sink_geometry.csv; queries and keys "
             "after any rotary embedding), and for a model with a slot outside the tokens "
             "(softmax_one, train --kv-bias) the weight the slot takes. Gu et al. (ICLR 2025) "
             "find that a first-token sink acts as a key bias: a small key norm and a high "
             "query-key cosine." +
                 std::string(kGlossary),
             panel_line_spec(emergence, "x", "value", "", "metric", {x_title, "", ""}, steps,
                             emergence_axes)});
    const json sink_layers = select(
        rows, [](const json& r) { return is(r, "metric", "sink_mass") && num(r, "layer") >= 0; });
    c.figures.push_back(
        {sec, "Sink mass per layer over training",
         "Mean attention of each layer's rows to the sink (trajectory.csv).",
         line_spec(sink_layers, "x", "value", "layer", {x_title, "sink mass", "layer"}, steps)});
    const json spectra = select(rows, [](const json& r) {
        return is(r, "param", "spectra") && num(r, "layer") >= 0 && !is(r, "metric", "sigma1_sq");
    });
    if (!spectra.empty())
        c.figures.push_back(
            {sec, "Random-matrix spectra over training",
             "Head-averaged per layer: stable rank, participation ratio of the squared singular "
             "values, and the KS distance of their bulk from the Marchenko-Pastur law.",
             panel_line_spec(spectra, "x", "value", "layer", "metric", {x_title, "", "layer"},
                             steps, axes)});
    if (!fs::exists(split_file)) return;
    // Consecutive pairs in training order (the file's order is not), then the first-to-last
    // pair, at the end and named as such.
    json pairs = select(table_rows(split_file), [](const json& r) { return num(r, "layer") < 0; });
    std::stable_sort(pairs.begin(), pairs.end(), [](const json& a, const json& b) {
        const bool wa = !is(a, "pair", "consecutive"), wb = !is(b, "pair", "consecutive");
        if (wa != wb) return wb;
        return num(a, "from_step") < num(b, "from_step");
    });
    json bars = json::array();
    for (const json& r : pairs) {
        const std::string pair = str(r, "from") + " → " + str(r, "to") +
                                 (is(r, "pair", "consecutive") ? "" : " (first to last)");
        bars.push_back(
            {{"pair", pair}, {"term", "sink"}, {"nats", num(r, "sink_term")}, {"order", 0}});
        bars.push_back(
            {{"pair", pair}, {"term", "content"}, {"nats", num(r, "content_term")}, {"order", 1}});
    }
    c.figures.push_back(
        {sec, "Entropy change split into sink and content parts",
         "For each pair of checkpoints (consecutive, and first to last), the change of row "
         "entropy summed over the rows present at both, split exactly into a sink part (the sink "
         "mass moved) and a content part (the spread among the other keys changed); the two "
         "bars add up to the measured change (entropy_split.csv).",
         stacked_bar_spec(bars, "pair", "nats", "term",
                          {"checkpoints", "entropy change (nats)", ""})});
}
}  // namespace

namespace {
std::vector<FigureSection>& sections() {
    static std::vector<FigureSection> s = {sinks_section,  compositional_section, frames_section,
                                           prune_section,  fisher_section,        dynamics_section,
                                           compare_section};
    return s;
}
}  // namespace

const std::vector<FigureSection>& figure_sections() {
    return sections();
}

void register_figure_section(FigureSection section) {
    sections().push_back(std::move(section));
}

ReportContent collect_report(const fs::path& run_dir) {
    ReportContent c;
    // The folder's final name: a run renders its report while still staged as
    // "<name>.partial[-pid]" (core/output_dir.hpp).
    std::string name = fs::absolute(run_dir).filename().string();
    if (const size_t at = name.rfind(".partial"); at != std::string::npos && at > 0)
        name.resize(at);
    c.title = "sinkscope report: " + name;
    try {
        if (fs::exists(run_dir / "run.json")) {
            c.run = io::read_json_file(run_dir / "run.json");
            if (c.run.contains("model") && c.run["model"].contains("path"))
                c.title = "sinkscope report: " + c.run["model"]["path"].get<std::string>();
        }
        for (const FigureSection& section : figure_sections()) section(run_dir, c);
    } catch (const json::exception& e) {
        throw unexpected_structure(run_dir, printable(e.what()));
    }
    // str() reads a field of any type (json::value would throw on a non-string "mode"). Runs
    // written before the key was named ref_frame call it p2.
    const json& now = field(c.run, "ref_frame");
    const json& frame = now.is_null() ? field(c.run, "p2") : now;
    if (is(frame, "mode", "ruscio2025"))
        c.notes.push_back(
            "Compat mode ruscio2025: reference-frame numbers follow the released notebooks; "
            "on causal models their Betti numbers only count tokens." +
            std::string(kGlossary));
    return c;
}

}  // namespace sinkscope::report
