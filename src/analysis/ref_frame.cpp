// The reference-frame analyses (graphs, topology, kl, spectra, entropy, tokens, frame and the
// other members of metrics::ref_frame::members()), each a registry row served by this adapter
// over metrics::RefFrameAccumulator restricted to that analysis. Tables <analysis>.csv (topology
// adds betti, tokens token_keys), arrays diagrams/*.npy, frame.json; run.json "ref_frame" holds the
// conventions (spec 8, 10.i-10.r).
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/metrics/ref_frame.hpp"
#include "sinkscope/metrics/region_stats.hpp"

namespace sinkscope::analysis {

namespace {

namespace t = tables;
using namespace metrics;

// The signature verdict: its table (frame_signatures.csv) and its summary in frame.json.
void frame_signatures(const RefFrameResults& results, nlohmann::json& f, AnalysisOutput& out) {
    const FrameReading& reading = results.frame_reading;
    io::Table table(t::kFrameSignatures.columns);
    nlohmann::json listed = nlohmann::json::array();
    for (const FrameSignature& s : reading.signatures) {
        nlohmann::json weights;
        for (size_t type = 0; type < 3; ++type)
            if (s.weight[type] > 0) weights[frame_type_name(k_frame_types[type])] = s.weight[type];
        listed.push_back({{"signature", s.name},
                          {"reading", s.reading},
                          {"consistent_with", s.measured ? weights : nlohmann::json::object()}});
        std::vector<io::Cell> row{
            results.model, results.checkpoint, s.name,      int64_t{s.measured ? 1 : 0},
            s.value,       s.reading,          s.prediction};
        for (size_t type = 0; type < 3; ++type) row.emplace_back(s.weight[type]);
        table.add_row(std::move(row));
    }
    out.tables.push_back({t::kFrameSignatures.name, std::move(table), false});
    nlohmann::json scores;
    for (size_t type = 0; type < 3; ++type)
        scores[frame_type_name(k_frame_types[type])] = reading.scores[type];
    f["signature_verdict"] = {{"verdict", frame_type_name(reading.verdict)},
                              {"margin", reading.margin},
                              {"signatures_measured", reading.n_measured},
                              {"scores", scores},
                              {"min_margin", results.config.constants.frame_min_margin},
                              {"signatures", listed},
                              {"table", std::string(t::kFrameSignatures.name) + ".csv"}};
}

void ref_frame_tables(const RefFrameResults& results, AnalysisOutput& out) {
    const std::string mode = results.config.mode();
    std::map<std::string, io::Table> tables;
    // Compat graphs.csv says in n_skipped for how many inputs the notebook skipped the cell
    // (10.r); value is then the mean over the n inputs that have it, NaN when n = 0.
    auto with_skipped = [&](const std::string& table) {
        return results.config.compat && table == "graphs";
    };
    for (const auto& [k, s] : results.stats) {
        auto it = tables.find(k.table);
        if (it == tables.end()) {
            std::vector<std::string> columns = t::kRefFrameColumns;
            if (with_skipped(k.table)) columns.emplace_back("n_skipped");
            it = tables.emplace(k.table, io::Table(columns)).first;
        }
        if (with_skipped(k.table))
            it->second.add_row({results.model, results.checkpoint, k.layer, k.head, k.metric,
                                k.param, mode, s.mean(), s.std(), s.n, s.n_nonfinite, s.n_skipped});
        else
            it->second.add_row({results.model, results.checkpoint, k.layer, k.head, k.metric,
                                k.param, mode, s.mean(), s.std(), s.n, s.n_nonfinite});
    }
    for (auto& [name, table] : tables) out.tables.push_back({name, std::move(table), false});

    if (!results.top_keys.empty()) {
        io::Table keys(t::kTokenKeys.columns);
        for (const auto& [lh, counts] : results.top_keys) {
            int64_t total = 0;
            for (const auto& kv : counts) total += kv.second;
            for (const auto& [key, cnt] : counts)
                keys.add_row({results.model, results.checkpoint, lh.first, lh.second, key, cnt,
                              static_cast<double>(cnt) / static_cast<double>(total), mode});
        }
        out.tables.push_back({t::kTokenKeys.name, std::move(keys), false});
    }

    if (!results.diagrams.empty()) {
        for (const auto& d : results.diagrams) {
            std::vector<double> flat;  // [k, 3]: dim, birth, death (inf: essential)
            for (const auto& b : d.bars) {
                flat.push_back(b.dim);
                flat.push_back(b.birth);
                flat.push_back(b.death);
            }
            const std::string name = "input" + std::to_string(d.input) + "_layer" +
                                     std::to_string(results.config.layer_id(d.layer)) +
                                     (d.head < 0 ? "_avg" : "_head" + std::to_string(d.head)) +
                                     ".npy";
            out.arrays.emplace_back(
                "diagrams/" + name,
                io::make_npy_f64({static_cast<int64_t>(d.bars.size()), 3}, flat));
        }
    }

    if (results.config.runs("frame") && results.frame.n_layers > 0) {
        nlohmann::json f;
        const auto& e = results.frame;
        f["convention"] = mode;
        f["verdict"] = frame_type_name(results.verdict);
        f["share_first_mid_late"] = e.share_first_mid_late();
        const double mrc = e.mean_reference_count();
        f["mean_reference_count"] =
            std::isfinite(mrc) ? nlohmann::json(mrc) : nlohmann::json("nan");
        // Model layer indices (--layers analyses some layers only: RefFrameConfig::layer_id).
        const RefFrameConfig& c = results.config;
        f["mid_late_first_layer"] = c.model_layer_count(e.n_layers) / 3;
        nlohmann::json layers = nlohmann::json::array();
        const auto modal = e.modal_classes();
        for (int64_t l = 0; l < e.n_layers; ++l) {
            const auto k = static_cast<size_t>(l);
            layers.push_back({{"layer", c.layer_id(l)},
                              {"first", e.first[k]},
                              {"last", e.last[k]},
                              {"other", e.other[k]},
                              {"modal", position_class_name(modal[k])}});
        }
        f["layers"] = layers;
        const auto& kc = results.config.constants;
        f["rule"] =
            "centralized: share_first_mid_late >= " + format_number(kc.centralized_share_first) +
            " and mean_reference_count < " + format_number(kc.centralized_max_reference_count) +
            "; bidirectional: some layer modal first and another modal last; else "
            "distributed (docs/user_guide.md, --frame-share-first)";
        f["verdict_from"] = kc.frame_verdict;
        f["rule_verdict"] = frame_type_name(results.rule_verdict);
        frame_signatures(results, f, out);
        out.texts.emplace_back(t::kFrameFile, f.dump(2) + "\n");
    }
}

nlohmann::json ref_frame_conventions(const RefFrameResults& results) {
    const RefFrameConfig& c = results.config;
    nlohmann::json j;
    j["mode"] = c.mode();
    j["analyses"] = c.analyses;
    j["per_head"] = c.per_head;
    j["symmetrize"] = c.symmetrize == Symmetrize::Max ? "max" : "mean";
    j["kl_rows"] = c.compat ? "compat (B.5 rows)" : c.kl_all_rows ? "all" : "paired";
    j["topology_max_tokens"] = c.topology_max_tokens;
    // Direct sink mass key (10.k): a fixed position, or resolved per input (sinks.csv).
    const SinkPolicy sink =
        resolve_auto(c.sink, results.any_causal ? Masking::Causal : Masking::Bidirectional);
    if (sink.kind == SinkPolicy::Kind::First || sink.kind == SinkPolicy::Kind::Position)
        j["sink_position"] = sink.kind == SinkPolicy::Kind::First ? 0 : sink.position;
    else
        j["sink_position"] = to_string(sink) + ": resolved per input" +
                             (sink.kind == SinkPolicy::Kind::Bos ? "" : " and layer") +
                             " (sinks.csv)";
    j["graph_thresholds"] = c.constants.graph_thresholds;
    j["graph_degree_self_loops"] = c.compat ? "counted (notebook)" : "ignored (10.i)";
    if (c.compat)
        j["graph_cells_skipped"] =
            "only the density where the input's density is outside [0.05, 0.95] and layer % 4 "
            "!= 0 (10.r); n_skipped counts them";
    j["dense_eigensolver_max_nodes"] = k_dense_eigen_max_nodes;
    j["effective_density"] = {c.constants.effective_density_lo, c.constants.effective_density_hi};
    j["sink_percentiles"] = c.constants.sink_percentiles;
    j["betti_grid"] = "101 points eps = g/100, bar alive when birth <= eps < death";
    j["long_bar_persistence"] = c.constants.long_bar;
    j["specialised"] = {{"share", c.constants.specialised_share},
                        {"min_inputs", c.constants.specialised_min_inputs}};
    j["saved_diagram_inputs"] = k_saved_diagram_inputs;
    j["frame_mean_reference_count_layers"] = "layers >= floor(L/3)";
    j["spectra_per_head"] = c.per_head;
    j["input_count"] = results.n_inputs;
    if (c.compat) {
        j["topology"] =
            "1 - A (fp32, head average) on linspace(0, n-1, 30) tokens, upper "
            "triangle edges, vertex births from the diagonal, exact zeros dropped, "
            "Betti = len(diagram) (n_bars_dim*)";
        j["kl"] =
            "raw rows over all keys, rows linspace(0, n-1, 20) when n > 20, all heads; "
            "concentration: first 4 heads, percent";
        j["spectra"] =
            "eigenvalues of A (causal: diagonal), gap |l1|/|l2|, eigenvalue PR, "
            "top-10 MP(0.99) KL";
        j["entropy"] =
            "head average: entries > 100 FLT_EPSILON renormalised; per head: "
            "-sum A log2(A + 1e-10) over the matrix";
    } else {
        j["topology"] =
            "d = 1 - sym(A) with zero diagonal, Vietoris-Rips dim <= 1 over Z/2 "
            "(GUDHI, edge collapse)";
        j["kl"] =
            "closed rows, visible keys, all heads and rows; rows without visible "
            "non-sink keys excluded";
        j["spectra"] =
            "sigma^2 from the Gram matrix; bulk = sigma^2 without the largest, "
            "divided by its mean; KS vs MP(gamma = 1) on [0, 4]";
        j["entropy"] = "closed rows, nats, mean over rows";
    }
    j["warnings"] = results.warnings;
    return j;
}

// Mean over layers of a head-average metric (summary lines).
double layer_mean(const RefFrameResults& r, const std::string& table, const std::string& metric,
                  const std::string& param) {
    double acc = 0;
    int64_t cnt = 0;
    for (const auto& [k, s] : r.stats)
        if (k.table == table && k.metric == metric && k.param == param && k.head == -1 &&
            k.layer >= 0 && std::isfinite(s.mean())) {
            acc += s.mean();
            ++cnt;
        }
    return cnt > 0 ? acc / static_cast<double>(cnt) : std::nan("");
}

// The region and trend statistics (regions.csv; metrics/region_stats.hpp, docs/metrics.md) of
// every per-layer (head -1) quantity of these tables.
const std::vector<std::string>& region_tables() {
    static const std::vector<std::string> names = {t::kGraphs,
                                                   t::kTopology,
                                                   t::kKl,
                                                   t::kSpectra,
                                                   t::kEntropy,
                                                   t::kTokens,
                                                   t::metric::kAttentionStats};
    return names;
}

// The model layers `first` to `last` as the layers column shows them ("" when none).
std::string layer_range(int64_t first, int64_t last) {
    if (last < first) return "";
    return first == last ? std::to_string(first)
                         : std::to_string(first) + "-" + std::to_string(last);
}

// The layers of each region of a model of `regions.n_layers` layers.
std::string region_layers(const LayerRegions& g, Region r) {
    const int64_t L = g.n_layers;
    switch (r) {
        case Region::Early:
            return layer_range(0, std::min(g.middle_begin, L) - 1);
        case Region::Middle:
            return layer_range(std::min(g.middle_begin, L), std::min(g.late_begin, L) - 1);
        case Region::Late:
            return layer_range(std::min(g.late_begin, L), L - 1);
    }
    return "";
}

LayerRegions regions_of(const RefFrameResults& r, const std::pair<int64_t, int64_t>& bounds) {
    const int64_t L = r.config.model_layer_count(r.n_layers);
    return bounds.first < 0 ? layer_regions_thirds(L)
                            : layer_regions(L, bounds.first, bounds.second);
}

void add_region_rows(const RefFrameResults& r, const LayerRegions& g, double level,
                     io::Table& out) {
    const std::string mode = r.config.mode();
    // (table, metric, param) -> the layers (input index, ascending) and their statistics.
    std::map<std::tuple<std::string, std::string, std::string>,
             std::vector<std::pair<int64_t, const RefFrameStat*>>>
        series;
    const auto& names = region_tables();
    for (const auto& [k, s] : r.stats)
        if (k.head == -1 && k.layer >= 0 &&
            std::find(names.begin(), names.end(), k.table) != names.end())
            series[{k.table, k.metric, k.param}].emplace_back(k.layer, &s);
    for (const auto& [key, layers] : series) {
        // Named references: clang before 16 cannot capture structured bindings in a lambda.
        const std::string& table = std::get<0>(key);
        const std::string& metric = std::get<1>(key);
        const std::string& param = std::get<2>(key);
        auto row = [&](const std::string& region, const std::string& span, const char* statistic,
                       double value) {
            out.add_row({r.model, r.checkpoint, table, metric, param, region, span,
                         std::string(statistic), value, mode});
        };
        std::vector<int64_t> model_layers;
        std::vector<double> values;
        // Per region (and over all layers): each layer's one-sample t-test of its values over
        // the inputs against 0, for Fisher's method.
        std::array<std::vector<double>, k_regions> layer_p;
        std::vector<double> all_p;
        int64_t first = -1, last = -1;  // input layers of the first and last finite value
        for (const auto& [l, s] : layers) {
            model_layers.push_back(r.config.layer_id(l));
            values.push_back(s->mean());
            if (std::isfinite(s->mean())) {
                if (first < 0) first = l;
                last = l;
            }
            const double p = one_sample_t_test(s->mean(), s->m2, s->n).p;
            layer_p[static_cast<size_t>(region_of(g, model_layers.back()))].push_back(p);
            all_p.push_back(p);
        }
        const RegionSummary m = summarize_regions(model_layers, values, g, level);
        auto describe = [&](const std::string& region, const std::string& span,
                            const MeanInterval& mi, const OneSampleTest& t,
                            const std::vector<double>& ps) {
            row(region, span, "n", static_cast<double>(mi.n));
            row(region, span, "mean", mi.mean);
            row(region, span, "sd", mi.sd);
            row(region, span, "ci_lo", mi.lo);
            row(region, span, "ci_hi", mi.hi);
            row(region, span, "t_vs_0", t.t);
            row(region, span, "p_vs_0", t.p);
            const FisherCombined f = fisher_combined(ps);
            row(region, span, "fisher_k", static_cast<double>(f.k));
            row(region, span, "fisher_chi2", f.chi2);
            row(region, span, "fisher_p", f.p);
        };
        for (int k = 0; k < k_regions; ++k) {
            const auto reg = static_cast<Region>(k);
            describe(region_name(reg), region_layers(g, reg), m.region[size_t(k)],
                     m.vs_zero[size_t(k)], layer_p[size_t(k)]);
        }
        const std::string all_span = layer_range(0, g.n_layers - 1);
        describe("all", all_span, m.all, m.all_vs_zero, all_p);
        row("all", all_span, "spearman_rho", m.trend.r);
        row("all", all_span, "spearman_p", m.trend.p);
        for (size_t k = 0; k < k_region_pairs.size(); ++k) {
            const auto [a, b] = k_region_pairs[k];
            const std::string region = std::string(region_name(a)) + "-" + region_name(b);
            const std::string span = region_layers(g, a) + " vs " + region_layers(g, b);
            row(region, span, "mean_difference", m.welch[k].mean_difference);
            row(region, span, "welch_t", m.welch[k].t);
            row(region, span, "welch_df", m.welch[k].df);
            row(region, span, "welch_p", m.welch[k].p);
        }
        row("middle/early",
            region_layers(g, Region::Middle) + " / " + region_layers(g, Region::Early),
            "peak_ratio", m.peak_ratio);
        // The fold change's test: the paired t-test over the inputs of value(last) -
        // value(first), which is 0 in the mean exactly when the fold change of the means is 1.
        OneSampleTest fold = one_sample_t_test(std::nan(""), std::nan(""), 0);
        if (first >= 0 && last > first) {
            const auto it = r.first_last.find(RefFrameKey{table, first, last, metric, param});
            if (it != r.first_last.end())
                fold = one_sample_t_test(it->second.mean(), it->second.m2, it->second.n);
        }
        const std::string span =
            m.first_layer < 0 ? ""
                              : std::to_string(m.first_layer) + "->" + std::to_string(m.last_layer);
        row("first-last", span, "first_layer", static_cast<double>(m.first_layer));
        row("first-last", span, "last_layer", static_cast<double>(m.last_layer));
        row("first-last", span, "fold_change", m.fold_change);
        row("first-last", span, "fold_n", static_cast<double>(fold.n));
        row("first-last", span, "fold_mean_difference", fold.mean);
        row("first-last", span, "fold_t", fold.t);
        row("first-last", span, "fold_p", fold.p);
    }
}

// run.json "regions": the boundaries and level the table used.
nlohmann::json regions_record(const LayerRegions& g, const std::string& option, double level) {
    nlohmann::json j;
    j["region_bounds"] = option;
    j["model_layers"] = g.n_layers;
    for (int k = 0; k < k_regions; ++k)
        j[region_name(static_cast<Region>(k))] = region_layers(g, static_cast<Region>(k));
    j["rule"] =
        "early: model layers < middle_begin, middle: < late_begin, late: the rest; thirds: "
        "middle_begin = floor(L/3), late_begin = floor(2L/3)";
    j["confidence"] = level;
    return j;
}

}  // namespace

std::pair<int64_t, int64_t> parse_region_bounds(const std::string& s) {
    if (s == "thirds") return {-1, -1};
    const auto comma = s.find(',');
    auto number = [&s](std::string_view v) {
        int64_t x = -1;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
        if (ec != std::errc() || end != v.data() + v.size() || x < 0)
            throw UsageError(
                "--region-bounds must be 'thirds' or M,N (the first model layer of "
                "the middle and of the late region, 0 <= M <= N), got '" +
                s + "'");
        return x;
    };
    const std::string_view v(s);
    const int64_t m = number(v.substr(0, comma == std::string::npos ? v.size() : comma));
    if (comma == std::string::npos) number("-");  // throws: one number only
    const int64_t n = number(v.substr(comma + 1));
    if (m > n) number("-");
    return {m, n};
}

namespace {

// regions.csv (when the results have per-layer quantities) and run.json "regions".
void add_regions_output(const RefFrameResults& r, const RegionSettings& settings,
                        AnalysisOutput& out) {
    if (r.n_layers == 0) return;
    const LayerRegions g = regions_of(r, parse_region_bounds(settings.bounds));
    io::Table regions(t::kRegions.columns);
    add_region_rows(r, g, settings.level, regions);
    if (!regions.empty()) out.tables.push_back({t::kRegions.name, std::move(regions), false});
    out.record["regions"] = regions_record(g, settings.bounds, settings.level);
}

}  // namespace

AnalysisOutput ref_frame_output(const RefFrameResults& r, bool header,
                                const std::optional<RegionSettings>& regions) {
    AnalysisOutput out;
    ref_frame_tables(r, out);
    if (regions) add_regions_output(r, *regions, out);
    out.record["ref_frame"] = ref_frame_conventions(r);
    out.warnings = r.warnings;
    const RefFrameConfig& c = r.config;
    std::ostringstream s;
    if (header)
        s << "reference-frame analyses (" << c.mode()
          << "; docs/metrics.md): " << count_of(r.n_inputs, "input") << ", "
          << count_of(r.n_layers, "layer") << " x " << count_of(r.n_heads, "head") << "\n";
    if (c.runs("kl"))
        s << "  KL reduction at t=0.9 (mean over layers): "
          << console_number(layer_mean(r, t::kKl, t::metric::kKlReduction, "0.9")) << "\n";
    if (c.runs("graphs"))
        s << "  lambda2 at tau=0.01 (mean over layers): "
          << console_number(layer_mean(r, t::kGraphs, t::metric::kLambda2, "0.01")) << "\n";
    if (c.runs("entropy"))
        // Not heads.csv `entropy` (per head, rows with D >= min_parts): the entropy of the
        // head-averaged attention over every row, entropy.csv `entropy_all_rows` at head -1.
        s << "  entropy of the head-averaged attention, all rows (entropy.csv "
          << t::metric::kEntropyAllRows << ", head -1; mean over layers): "
          << console_number(layer_mean(r, t::kEntropy, t::metric::kEntropyAllRows, ""))
          << " nats\n";
    if (c.runs("frame"))
        s << "  reference frame: " << frame_type_name(r.verdict)
          << " (share of first-position anchors in layers >= "
          << c.model_layer_count(r.frame.n_layers) / 3 << ": "
          << format_number(r.frame.share_first_mid_late()) << ", mean reference count "
          << format_number(r.frame.mean_reference_count()) << ")\n";
    for (const auto& w : r.warnings) s << "  warning: " << w << "\n";
    out.summary = s.str();
    return out;
}

namespace {

class RefFrame;

// The reference-frame analyses of one pipeline read an input's rows once, together: the first to
// be given the input adds it to every member's accumulator (RefFrameAccumulator::add_together);
// for a long input each analysis reading every row again cost a pass of recomputed attention.
struct RefFrameGroup {
    std::vector<RefFrame*> members;  // registry order
    int64_t last_input = -1;         // InputView::index the members were last given together
    // One regions.csv for the group: each member leaves its finished results here, and the
    // last one (registry order, the order they finish) writes the table of all of them.
    std::map<std::string, RefFrameResults> finished;
};
constexpr SharedKey<RefFrameGroup> kGroup{"ref_frame"};

class RefFrame final : public Analysis {
public:
    RefFrame(const AnalysisContext& c, std::string which)
        : ctx_(c), which_(std::move(which)), acc_(options(c, which_)) {
        if (!c.shared) return;
        group_ = c.shared->get(kGroup);
        group_->members.push_back(this);
    }
    ~RefFrame() override {
        if (group_) std::erase(group_->members, this);
    }
    RefFrame(const RefFrame&) = delete;
    RefFrame& operator=(const RefFrame&) = delete;

    void add(const InputView& in, PerInputValues* per_input) override {
        const bool together = group_ && group_->members.size() > 1;
        if (together && group_->last_input == in.index) return;  // added with the group
        const std::vector<RefFrame*> members =
            together ? group_->members : std::vector<RefFrame*>{this};
        std::vector<RefFrameAccumulator*> accs;
        std::vector<std::vector<std::pair<RefFrameKey, double>>> values(members.size());
        std::vector<std::vector<std::pair<RefFrameKey, double>>*> lists;
        for (size_t k = 0; k < members.size(); ++k) {
            accs.push_back(&members[k]->acc_);
            lists.push_back(per_input ? &values[k] : nullptr);
        }
        RefFrameAccumulator::add_together(accs, *in.attention, in.tokens, ctx_.origin, in.sinks,
                                          lists);
        if (together) group_->last_input = in.index;
        if (per_input)
            for (const auto& list : values)
                for (const auto& [k, v] : list)
                    per_input->push_back({k.table, k.layer, k.head, k.metric, k.param, v, 1.0});
    }
    void merge(const Analysis& other) override {
        acc_.merge(dynamic_cast<const RefFrame&>(other).acc_);
    }
    void save(BinaryWriter& w) const override { acc_.save(w); }
    void load(BinaryReader& r) override { acc_.load(r); }
    void set_progress(const StageProgress& fn) override {
        if (!fn) return acc_.set_progress({});
        // Run together, the group reports through its first member under one name.
        acc_.set_progress([fn, this](const char*, int64_t done, int64_t total) {
            const bool together = group_ && group_->members.size() > 1;
            fn(together ? "reference-frame analyses" : which_.c_str(), done, total);
        });
    }

    AnalysisOutput finish(const FinishContext&) override {
        const AnalysisOptions& o = ctx_.options->raw;
        const RegionSettings settings{o.value<std::string>("region_bounds"), o.confidence};
        RefFrameResults r = acc_.finish();
        if (!group_ || group_->members.size() == 1)
            return ref_frame_output(r, first_selected(), settings);
        AnalysisOutput out = ref_frame_output(r, first_selected(), std::nullopt);
        group_->finished[which_] = std::move(r);
        if (group_->members.back() == this) {
            // The members' statistics are of disjoint tables over the same inputs: together
            // they are those of one accumulator of all the analyses.
            RefFrameResults all = group_->finished[which_];
            for (const auto& [name, other] : group_->finished) {
                all.stats.insert(other.stats.begin(), other.stats.end());
                all.first_last.insert(other.first_last.begin(), other.first_last.end());
            }
            add_regions_output(all, settings, out);
        }
        return out;
    }

private:
    static RefFrameOptions options(const AnalysisContext& c, const std::string& which) {
        RefFrameOptions o = c.options->ref_frame;
        o.analyses = which;
        return o;
    }
    bool first_selected() const {
        for (const std::string& name : ref_frame_members())
            if (ctx_.options->selected(name)) return which_ == name;
        return false;
    }

    AnalysisContext ctx_;
    std::string which_;
    RefFrameAccumulator acc_;
    std::shared_ptr<RefFrameGroup> group_;  // null outside a pipeline
};

}  // namespace

// dynamics: the head-averaged spectra of each layer (spectra.csv, head -1), param "spectra".
void spectra_trajectory_values(const RunFiles& dir, std::vector<RunValue>& out) {
    if (RunTable s(dir, t::kSpectra); s.present())
        for (size_t i = 0; i < s.size(); ++i)
            if (s.num(i, "head") == -1)
                out.push_back({int64_t(s.num(i, "layer")), s.text(i, "metric"), "spectra",
                               s.num(i, "value")});
}

std::unique_ptr<Analysis> make_ref_frame(const AnalysisContext& c, const std::string& which) {
    return std::make_unique<RefFrame>(c, which);
}

}  // namespace sinkscope::analysis
