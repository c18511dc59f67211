// The `sinkscope tables` command (paper_tables.hpp): finished run directories -> P1's result
// tables as CSV (the runs' numbers, unchanged), Markdown and LaTeX, tables.md/.tex and run.json.
// Reads run.json and CSV tables only (no torch).
#include "sinkscope/api/paper_tables.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <ostream>
#include <set>

#include "sinkscope/analysis/run_values.hpp"
#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/api/run_outputs.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/metrics/region_stats.hpp"

namespace sinkscope::api {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
namespace tables = analysis::tables;

// The tables, in the order of the files and of tables.md / tables.tex: P1's, then P2's (the
// reference-frame paper's region tables, its correlation-flip table and value space).
enum TableId {
    kReversal,
    kAri,
    kPruning,
    kEntropyCollapse,
    kRegime,
    kP2Topology,
    kP2Spectral,
    kP2KlReduction,
    kP2SinkConcentration,
    kP2Tokens,
    kP2Fisher,
    kP2CorrelationFlips,
    kP2ValueSpace
};

// The columns of every P2 region table: a quantity's region means with their intervals, the
// middle-to-early peak ratio, the early-vs-late Welch test, the trend and the fold change.
const std::vector<std::string> kRegionColumns = {
    "model",        "checkpoint", "metric",      "param",      "early",
    "early_lo",     "early_hi",   "middle",      "middle_lo",  "middle_hi",
    "late",         "late_lo",    "late_hi",     "peak_ratio", "welch_p_early_late",
    "spearman_rho", "spearman_p", "fold_change", "fold_p"};
const std::vector<report::TextInterval> kRegionIntervals = {{"early", "early_lo", "early_hi"},
                                                            {"middle", "middle_lo", "middle_hi"},
                                                            {"late", "late_lo", "late_hi"}};
// What each region table's caption says of its columns.
constexpr const char* kRegionCaption =
    " by layer region (mean over the region's layers [95% t-interval] of the per-layer means; "
    "peak ratio middle/early; Welch p early vs late; Spearman trend against the layer; fold "
    "change last/first layer with its paired-test p).";

std::vector<PaperTable> empty_tables() {
    auto make = [](std::string name, std::string caption, std::vector<std::string> columns,
                   std::vector<report::TextInterval> intervals, std::string source) {
        return PaperTable{{std::move(name), std::move(caption), std::move(intervals)},
                          io::Table(std::move(columns)),
                          std::move(source),
                          {}};
    };
    std::vector<PaperTable> t;
    t.push_back(make("p1_reversal",
                     "Reversal rates: the share of compared head triples on which the two "
                     "distances disagree, with its 95% interval (exact counts: no width).",
                     {"model", "checkpoint", "comparison", "metric", "rate", "ci_lo", "ci_hi",
                      "method", "n_compared"},
                     {{"rate", "ci_lo", "ci_hi"}},
                     "the model rows of analyze and metrics runs' reversal.csv"));
    t.push_back(make("p1_ari",
                     "Adjusted Rand index of the head clusterings with and without the sink "
                     "(js_keep vs js_drop, dA vs dA_perp; clark2019: the pipeline of Clark et al. "
                     "2019).",
                     {"model", "checkpoint", "pipeline", "first", "second", "ari", "k", "layers"},
                     {}, "the headline rows of ari.csv and clark2019_ari.csv"));
    t.push_back(make("p1_pruning",
                     "Head pruning: the measure after pruning by each channel, its inflation over "
                     "the unpruned model, and random pruning (mean [min, max] over seeds).",
                     {"model", "checkpoint", "channel", "sparsity", "measure", "value", "baseline",
                      "inflation", "random_mean", "random_std", "random_min", "random_max"},
                     {{"random_mean", "random_min", "random_max"}},
                     "prune runs' prune.csv and prune_random.csv"));
    t.push_back(make("p1_entropy_collapse",
                     "Entropy change between checkpoints split into the sink term and the content "
                     "term (nats, summed over rows), and the sink's share of it.",
                     {"model", "pair", "from", "to", "from_step", "to_step", "n_rows",
                      "delta_entropy", "sink_term", "content_term", "sink_share"},
                     {}, "the model rows of dynamics runs' entropy_split.csv"));
    t.push_back(make("p1_regime",
                     "Regime predictor: the regime predicted from the statistic with thresholds "
                     "lo and hi, and the regime measured.",
                     {"model", "checkpoint", "role", "statistic", "value", "lo", "hi", "predicted",
                      "outcome", "measured", "agreement"},
                     {}, "compare runs' regime.csv"));
    auto region = [&](std::string name, const std::string& what, std::string source) {
        t.push_back(make(std::move(name), what + kRegionCaption, kRegionColumns, kRegionIntervals,
                         std::move(source)));
    };
    region("p2_topology", "Persistent homology of the attention (topology.csv)",
           "analyze and metrics runs' regions.csv, table topology");
    region("p2_spectral", "Singular-value spectra of the attention (spectra.csv)",
           "analyze and metrics runs' regions.csv, table spectra");
    region("p2_kl_reduction", "KL reduction when the sinks are removed, per sink percentile t",
           "analyze and metrics runs' regions.csv, kl.csv's kl_reduction");
    region("p2_sink_concentration", "Sink concentration at t = 0.8 and t = 0.95",
           "analyze and metrics runs' regions.csv, kl.csv's sink concentration");
    region("p2_tokens", "Token specialisation (tokens.csv)",
           "analyze and metrics runs' regions.csv, table tokens");
    region("p2_fisher", "Layer Fisher norms (fisher.csv; param: the Fisher kind; no fold test)",
           "fisher runs' fisher.csv (per-layer rows)");
    t.push_back(make("p2_correlation_flips",
                     "Pearson r across the layers between the Fiedler value and each structure "
                     "metric, per graph threshold, and where its sign flips.",
                     {"model", "checkpoint", "partner", "tau", "r", "p", "sign_flip"}, {},
                     "analyze and metrics runs' graphs.csv (r_lambda2_*, p_lambda2_*, "
                     "sign_flip_lambda2_*)"));
    region("p2_value_space", "Value space (value_space.csv; no fold test)",
           "analyze runs' value_space.csv (per-layer rows)");
    return t;
}

// A count read back from a CSV (a double there): an integer cell, so the text tables show it
// whole; anything not integral stays as it was.
io::Cell count_cell(double v) {
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9e15) return int64_t(v);
    return v;
}
// A cell that may be empty (a step of a manifest that gives only labels).
io::Cell optional_count(const analysis::RunTable& t, size_t i, const std::string& column) {
    if (t.text(i, column).empty()) return std::string();
    return count_cell(t.num(i, column));
}

struct RunDir {
    std::string shown;  // as given
    fs::path dir;
    json rec;
    std::string subcommand, model, checkpoint;
};

RunDir open_run(const std::string& given) {
    RunDir r{given, fs::path(given), json(), "", "", ""};
    r.rec = read_run_json(r.dir, given);
    const std::string file = (r.dir / "run.json").string();
    r.subcommand = io::json_string_or(r.rec, "subcommand", "", file);
    r.model = model_name(r.rec, r.dir);
    r.checkpoint = io::json_string_or(r.rec, "checkpoint", "", file);
    return r;
}

std::string csv(const std::string& table) {
    return table + ".csv";
}

bool has_column(const fs::path& file, const std::string& name) {
    const std::vector<std::string> c = io::Table::read_csv(file).columns();
    return std::find(c.begin(), c.end(), name) != c.end();
}

// reversal.csv: the model's rows (scope model, layer -1; a scope layer run's pooled rows, scope
// layer, layer -1), without the self-check.
void add_reversal(const RunDir& r, io::Table& out) {
    const analysis::RunTable t(r.dir, tables::kReversal);
    bool model_scope = false;
    for (size_t i = 0; i < t.size(); ++i)
        model_scope = model_scope || t.text(i, "scope") == "model";
    const std::string scope = model_scope ? "model" : "layer";
    for (size_t i = 0; i < t.size(); ++i) {
        if (t.text(i, "scope") != scope || t.num(i, "layer") != -1) continue;
        const std::string comparison = t.text(i, "comparison");
        if (comparison == "check") continue;
        out.add_row({r.model, r.checkpoint, comparison, t.text(i, "metric"), t.num(i, "rate"),
                     t.num(i, "ci_lo"), t.num(i, "ci_hi"), t.text(i, "method"),
                     count_cell(t.num(i, "n_compared"))});
    }
}

// ari.csv's headline rows (a scope layer run: each pair's mean over the layers with a value) and
// clark2019_ari.csv's js_keep / js_drop row.
void add_ari(const RunDir& r, io::Table& out) {
    const analysis::RunTable t(r.dir, tables::kAri);
    if (t.present() && !has_column(r.dir / csv(tables::kAri), "layer")) {
        for (size_t i = 0; i < t.size(); ++i)
            if (t.num(i, "headline") == 1)
                out.add_row({r.model, r.checkpoint, std::string("sinkscope"), t.text(i, "first"),
                             t.text(i, "second"), t.num(i, "ari"), count_cell(t.num(i, "k")),
                             std::string("all")});
    } else if (t.present()) {
        struct Mean {
            double sum = 0;
            int64_t n = 0, n_layers = 0;
            std::set<double> k;
        };
        std::vector<std::pair<std::string, std::string>> order;
        std::map<std::pair<std::string, std::string>, Mean> mean;
        for (size_t i = 0; i < t.size(); ++i) {
            if (t.num(i, "headline") != 1) continue;
            const std::pair<std::string, std::string> key{t.text(i, "first"), t.text(i, "second")};
            if (!mean.count(key)) order.push_back(key);
            Mean& m = mean[key];
            ++m.n_layers;
            m.k.insert(t.num(i, "k"));
            if (std::isfinite(t.num(i, "ari"))) m.sum += t.num(i, "ari"), ++m.n;
        }
        for (const auto& key : order) {
            const Mean& m = mean[key];
            const std::string layers =
                "mean over " +
                (m.n == m.n_layers ? std::to_string(m.n)
                                   : std::to_string(m.n) + " of " + std::to_string(m.n_layers)) +
                " layers";
            out.add_row({r.model, r.checkpoint, std::string("sinkscope"), key.first, key.second,
                         m.n > 0 ? m.sum / double(m.n) : std::nan(""),
                         m.k.size() == 1 ? count_cell(*m.k.begin()) : io::Cell(std::string()),
                         layers});
        }
    }
    const analysis::RunTable c(r.dir, tables::kClark2019Ari.name);
    for (size_t i = 0; i < c.size(); ++i)
        if (c.text(i, "first") == "js_keep" && c.text(i, "second") == "js_drop")
            out.add_row({r.model, r.checkpoint, std::string("clark2019"), c.text(i, "first"),
                         c.text(i, "second"), c.num(i, "ari"), count_cell(c.num(i, "k")),
                         std::string("all")});
}

// prune.csv's channel points against the unpruned model (the `none` row) and the random
// baseline of prune_random.csv at the same sparsity (empty cells without one).
void add_pruning(const RunDir& r, io::Table& out) {
    const analysis::RunTable t(r.dir, tables::kPrune.name);
    const analysis::RunTable rnd(r.dir, tables::kPruneRandom.name);
    double baseline = std::nan("");
    for (size_t i = 0; i < t.size(); ++i)
        if (t.text(i, "method") == "none") baseline = t.num(i, "value");
    for (size_t i = 0; i < t.size(); ++i) {
        const std::string method = t.text(i, "method");
        if (method == "none" || method == "random") continue;
        const double sparsity = t.num(i, "sparsity"), value = t.num(i, "value");
        std::vector<io::Cell> random(4, std::string());
        for (size_t j = 0; j < rnd.size(); ++j)
            if (rnd.num(j, "sparsity") == sparsity)
                random = {rnd.num(j, "mean"), rnd.num(j, "std"), rnd.num(j, "min"),
                          rnd.num(j, "max")};
        std::vector<io::Cell> row = {r.model,  r.checkpoint,         method,
                                     sparsity, t.text(i, "measure"), value,
                                     baseline, value / baseline};
        row.insert(row.end(), random.begin(), random.end());
        out.add_row(std::move(row));
    }
}

// entropy_split.csv's model rows (layer -1): every consecutive pair and the first-to-last one.
void add_entropy_split(const RunDir& r, io::Table& out) {
    const analysis::RunTable t(r.dir, tables::kEntropySplit.name);
    for (size_t i = 0; i < t.size(); ++i) {
        if (t.num(i, "layer") != -1) continue;
        const std::string model = t.text(i, "model");
        out.add_row({model.empty() ? r.model : model, t.text(i, "pair"), t.text(i, "from"),
                     t.text(i, "to"), optional_count(t, i, "from_step"),
                     optional_count(t, i, "to_step"), count_cell(t.num(i, "n_rows")),
                     t.num(i, "delta_entropy"), t.num(i, "sink_term"), t.num(i, "content_term"),
                     t.num(i, "sink_share")});
    }
}

// compare's regime.csv: one row per model.
void add_regime(const RunDir& r, io::Table& out) {
    const analysis::RunTable t(r.dir, tables::kRegime);
    for (size_t i = 0; i < t.size(); ++i)
        out.add_row({t.text(i, "model"), t.text(i, "checkpoint"), t.text(i, "role"),
                     t.text(i, "statistic"), t.num(i, "value"), t.num(i, "lo"), t.num(i, "hi"),
                     t.text(i, "predicted"), t.text(i, "outcome"), t.text(i, "measured"),
                     t.text(i, "agreement")});
}

// One P2 region-table row from a quantity's statistics by (region, statistic).
void add_region_row(const RunDir& r, const std::string& metric, const std::string& param,
                    const std::map<std::pair<std::string, std::string>, double>& v,
                    io::Table& out) {
    auto at = [&v](const char* region, const char* statistic) {
        const auto it = v.find({region, statistic});
        return it == v.end() ? std::nan("") : it->second;
    };
    out.add_row({r.model, r.checkpoint, metric, param, at("early", "mean"), at("early", "ci_lo"),
                 at("early", "ci_hi"), at("middle", "mean"), at("middle", "ci_lo"),
                 at("middle", "ci_hi"), at("late", "mean"), at("late", "ci_lo"),
                 at("late", "ci_hi"), at("middle/early", "peak_ratio"), at("early-late", "welch_p"),
                 at("all", "spearman_rho"), at("all", "spearman_p"),
                 at("first-last", "fold_change"), at("first-last", "fold_p")});
}

// regions.csv's quantities of `table` whose metric `keep` accepts (with their param), as rows.
void add_regions(const RunDir& r, const std::string& table,
                 bool (*keep)(const std::string& metric, const std::string& param),
                 io::Table& out) {
    const analysis::RunTable t(r.dir, tables::kRegions.name);
    std::vector<std::pair<std::string, std::string>> order;
    std::map<std::pair<std::string, std::string>,
             std::map<std::pair<std::string, std::string>, double>>
        stats;
    for (size_t i = 0; i < t.size(); ++i) {
        if (t.text(i, "table") != table) continue;
        const std::pair<std::string, std::string> key{t.text(i, "metric"), t.text(i, "param")};
        if (!keep(key.first, key.second)) continue;
        if (!stats.count(key)) order.push_back(key);
        stats[key][{t.text(i, "region"), t.text(i, "statistic")}] = t.num(i, "value");
    }
    for (const auto& key : order) add_region_row(r, key.first, key.second, stats[key], out);
}

bool any_quantity(const std::string&, const std::string&) {
    return true;
}
void add_topology(const RunDir& r, io::Table& out) {
    add_regions(r, tables::kTopology, any_quantity, out);
}
void add_spectral(const RunDir& r, io::Table& out) {
    add_regions(r, tables::kSpectra, any_quantity, out);
}
void add_kl_reduction(const RunDir& r, io::Table& out) {
    add_regions(
        r, tables::kKl,
        [](const std::string& m, const std::string&) { return m == tables::metric::kKlReduction; },
        out);
}
void add_sink_concentration(const RunDir& r, io::Table& out) {
    add_regions(
        r, tables::kKl,
        [](const std::string& m, const std::string& p) {
            return (m == tables::metric::kSinkConcentration ||
                    m == tables::metric::kSinkConcentrationPercent) &&
                   (p == "0.8" || p == "0.95");
        },
        out);
}
void add_tokens(const RunDir& r, io::Table& out) {
    add_regions(r, tables::kTokens, any_quantity, out);
}

// A long table's per-layer rows (layer >= 0, head -1) summarised by region here, with
// metrics::summarize_regions over thirds of the layers it has (no per-input values: no fold
// test): the Fisher norms of a fisher run, value space of an analyze run.
void add_long_regions(const RunDir& r, const std::string& name, io::Table& out) {
    const analysis::RunTable t(r.dir, name);
    std::vector<std::pair<std::string, std::string>> order;
    std::map<std::pair<std::string, std::string>, std::map<int64_t, double>> series;
    int64_t n_layers = 0;
    for (size_t i = 0; i < t.size(); ++i) {
        if (t.num(i, "head") != -1 || t.num(i, "layer") < 0) continue;
        const std::pair<std::string, std::string> key{t.text(i, "metric"), t.text(i, "convention")};
        if (!series.count(key)) order.push_back(key);
        const auto layer = static_cast<int64_t>(t.num(i, "layer"));
        series[key][layer] = t.num(i, "value");
        n_layers = std::max(n_layers, layer + 1);
    }
    const metrics::LayerRegions g = metrics::layer_regions_thirds(n_layers);
    for (const auto& key : order) {
        std::vector<int64_t> layers;
        std::vector<double> values;
        for (const auto& [l, v] : series[key]) layers.push_back(l), values.push_back(v);
        const metrics::RegionSummary m = metrics::summarize_regions(layers, values, g, 0.95);
        std::map<std::pair<std::string, std::string>, double> v;
        for (int k = 0; k < metrics::k_regions; ++k) {
            const char* region = metrics::region_name(static_cast<metrics::Region>(k));
            v[{region, "mean"}] = m.region[size_t(k)].mean;
            v[{region, "ci_lo"}] = m.region[size_t(k)].lo;
            v[{region, "ci_hi"}] = m.region[size_t(k)].hi;
        }
        v[{"middle/early", "peak_ratio"}] = m.peak_ratio;
        v[{"early-late", "welch_p"}] = m.welch[1].p;
        v[{"all", "spearman_rho"}] = m.trend.r;
        v[{"all", "spearman_p"}] = m.trend.p;
        v[{"first-last", "fold_change"}] = m.fold_change;
        add_region_row(r, key.first, key.second, v, out);
    }
}
void add_fisher(const RunDir& r, io::Table& out) {
    add_long_regions(r, tables::kFisher.name, out);
}
void add_value_space(const RunDir& r, io::Table& out) {
    add_long_regions(r, tables::kValueSpace.name, out);
}

// graphs.csv's threshold correlation map: per structure metric and threshold, r and p, and the
// threshold pair of a sign flip that ends at this threshold.
void add_correlation_flips(const RunDir& r, io::Table& out) {
    const analysis::RunTable t(r.dir, tables::kGraphs);
    const std::string r_prefix = tables::metric::kFiedlerR, p_prefix = tables::metric::kFiedlerP,
                      flip_prefix = tables::metric::kFiedlerSignFlip;
    std::vector<std::pair<std::string, std::string>> order;  // (partner, tau)
    std::map<std::pair<std::string, std::string>, double> rs, ps;
    std::map<std::pair<std::string, std::string>, std::string> flips;
    for (size_t i = 0; i < t.size(); ++i) {
        if (t.num(i, "layer") != -1 || t.num(i, "head") != -1) continue;
        const std::string m = t.text(i, "metric"), p = t.text(i, "param");
        if (m.starts_with(r_prefix)) {
            order.emplace_back(m.substr(r_prefix.size()), p);
            rs[order.back()] = t.num(i, "value");
        } else if (m.starts_with(p_prefix)) {
            ps[{m.substr(p_prefix.size()), p}] = t.num(i, "value");
        } else if (m.starts_with(flip_prefix)) {
            const auto arrow = p.find("->");
            if (arrow != std::string::npos)
                flips[{m.substr(flip_prefix.size()), p.substr(arrow + 2)}] = p;
        }
    }
    for (const auto& key : order) {
        const auto p = ps.find(key);
        const auto f = flips.find(key);
        out.add_row({r.model, r.checkpoint, key.first, count_cell(std::stod(key.second)), rs[key],
                     p == ps.end() ? std::nan("") : p->second,
                     f == flips.end() ? std::string() : f->second});
    }
}

// Adds a run's rows to `table` with `add`; when it gave any, records the run, and those of
// `files` (what `add` reads) that the run has.
void add_from(const RunDir& r, PaperTable& table, const std::vector<std::string>& files,
              void (*add)(const RunDir&, io::Table&), PaperTablesInput::Run& run) {
    const size_t before = table.table.size();
    add(r, table.table);
    if (table.table.size() == before) return;
    table.runs.push_back(r.shown);
    for (const std::string& f : files) {
        std::error_code ec;
        if (fs::exists(r.dir / f, ec)) run.files.push_back(f);
    }
}

std::string p1_markdown(const std::vector<PaperTable>& tables,
                        const std::vector<std::string>& runs) {
    std::string md = "# P1 and P2 result tables\n\nWritten by `sinkscope tables` from";
    for (size_t i = 0; i < runs.size(); ++i)
        md += (i ? ", " : " ") + report::markdown_escape(runs[i]);
    md += ".\n";
    for (const PaperTable& t : tables)
        if (!t.table.empty()) md += "\n" + report::markdown_table(t.table, t.format);
    return md;
}

std::string p1_latex(const std::vector<PaperTable>& tables) {
    std::string tex =
        "% P1 and P2 result tables written by `sinkscope tables`; they need "
        "\\usepackage{booktabs}.\n";
    for (const PaperTable& t : tables)
        if (!t.table.empty()) tex += "\n" + report::latex_table(t.table, t.format);
    return tex;
}

}  // namespace

std::vector<PaperTable> collect_paper_tables(const std::vector<std::string>& runs,
                                             PaperTablesInput& input) {
    std::vector<PaperTable> t = empty_tables();
    for (const std::string& given : runs) {
        const RunDir r = open_run(given);
        PaperTablesInput::Run run{given, r.subcommand, r.model, {}, false};
        if (r.subcommand == "analyze" || r.subcommand == "metrics") {
            add_from(r, t[kReversal], {csv(tables::kReversal)}, add_reversal, run);
            add_from(r, t[kAri], {csv(tables::kAri), csv(tables::kClark2019Ari.name)}, add_ari,
                     run);
            const std::string regions = csv(tables::kRegions.name);
            add_from(r, t[kP2Topology], {regions}, add_topology, run);
            add_from(r, t[kP2Spectral], {regions}, add_spectral, run);
            add_from(r, t[kP2KlReduction], {regions}, add_kl_reduction, run);
            add_from(r, t[kP2SinkConcentration], {regions}, add_sink_concentration, run);
            add_from(r, t[kP2Tokens], {regions}, add_tokens, run);
            add_from(r, t[kP2CorrelationFlips], {csv(tables::kGraphs)}, add_correlation_flips, run);
            add_from(r, t[kP2ValueSpace], {csv(tables::kValueSpace.name)}, add_value_space, run);
        } else if (r.subcommand == "fisher") {
            add_from(r, t[kP2Fisher], {csv(tables::kFisher.name)}, add_fisher, run);
        } else if (r.subcommand == "prune") {
            add_from(r, t[kPruning], {csv(tables::kPrune.name), csv(tables::kPruneRandom.name)},
                     add_pruning, run);
        } else if (r.subcommand == "dynamics") {
            add_from(r, t[kEntropyCollapse], {csv(tables::kEntropySplit.name)}, add_entropy_split,
                     run);
        } else if (r.subcommand == "compare") {
            add_from(r, t[kRegime], {csv(tables::kRegime)}, add_regime, run);
        } else {
            run.skipped = true;
            input.warnings.push_back(given + " is a '" + printable(r.subcommand, 40) +
                                     "' run; tables reads analyze, metrics, prune, dynamics, "
                                     "compare and fisher runs: skipped");
        }
        input.runs.push_back(std::move(run));
    }
    return t;
}

void run_tables_command(const PaperTablesOptions& o, std::ostream& log) {
    if (o.runs.empty()) throw UsageError("tables needs at least one run directory");
    if (o.out.empty()) throw UsageError("--out must not be empty");
    check_output_dir(o.out, o.overwrite);
    // Read everything first: nothing is written unless every run reads whole.
    PaperTablesInput input;
    const std::vector<PaperTable> t = collect_paper_tables(o.runs, input);
    for (const std::string& given : o.runs) {
        std::error_code ec;
        if (fs::exists(o.out, ec) && fs::equivalent(o.out, given, ec))
            throw UsageError("--out " + o.out.string() + " is one of the runs read");
    }
    for (const auto& w : input.warnings) std::cerr << "sinkscope: warning: " << w << "\n";
    if (std::all_of(t.begin(), t.end(), [](const PaperTable& x) { return x.table.empty(); }))
        throw UsageError(
            "tables: none of the runs given holds a row of P1's or P2's tables (they come "
            "from analyze, metrics, prune, dynamics, compare and fisher runs)");

    io::RunRecord record(o.command_line, 1);  // reads and writes tables on one thread
    OutputDir out(o.out, o.overwrite);
    json written = json::array(), not_written = json::array();
    for (const PaperTable& x : t) {
        const std::string& name = x.format.name;
        if (x.table.empty()) {
            not_written.push_back({{"name", name}, {"source", x.source}});
            continue;
        }
        x.table.write(out.staging(), name, false);
        write_file_atomic(out.file(name + ".md"), report::markdown_table(x.table, x.format));
        write_file_atomic(out.file(name + ".tex"), report::latex_table(x.table, x.format));
        written.push_back({{"name", name},
                           {"rows", x.table.size()},
                           {"files", {name + ".csv", name + ".md", name + ".tex"}},
                           {"runs", x.runs},
                           {"source", x.source}});
    }
    write_file_atomic(out.file("tables.md"), p1_markdown(t, o.runs));
    write_file_atomic(out.file("tables.tex"), p1_latex(t));
    json runs = json::array();
    for (const PaperTablesInput::Run& r : input.runs)
        runs.push_back({{"path", r.path},
                        {"subcommand", r.subcommand},
                        {"model", r.model},
                        {"files", r.files},
                        {"skipped", r.skipped}});
    record.set("subcommand", "tables");
    record.set("inputs", o.runs);
    record.set("runs", runs);
    record.set("tables", written);
    record.set("not_written", not_written);
    record.set("warnings", input.warnings);
    record.set("text_tables", {{"significant_digits", report::TextTableFormat{}.digits},
                               {"interval", "value [lo, hi]"}});
    record.write(out.staging());
    out.commit();

    for (const PaperTable& x : t) {
        if (x.table.empty())
            log << x.format.name << ": not written (no rows: it comes from " << x.source << ")\n";
        else
            log << x.format.name << ": " << count_of(int64_t(x.table.size()), "row") << " from "
                << count_of(int64_t(x.runs.size()), "run") << " -> "
                << (o.out / x.format.name).string() << ".{csv,md,tex}\n";
    }
    log << "wrote " << o.out.string() << "\n";
}

}  // namespace sinkscope::api
