// AnalysisOptions: validation, selection of the analyses and the run.json record (options.hpp).
// Errors name the option as the command line spells it; the Python bindings use the same names
// with '_' for '-'.
#include "sinkscope/analysis/options.hpp"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/system.hpp"

namespace sinkscope::analysis {

bool ResolvedOptions::selected(const std::string& name) const {
    return std::find(analyses.begin(), analyses.end(), name) != analyses.end();
}

namespace {

void require(bool ok, const std::string& message) {
    if (!ok) throw UsageError(message);
}

bool in_unit_interval(double v) {
    return std::isfinite(v) && v >= 0 && v <= 1;
}

std::string join_numbers(const std::vector<double>& v) {
    std::string s;
    for (double x : v) s += (s.empty() ? "" : ",") + nlohmann::json(x).dump();
    return s;
}

std::vector<std::string> select(const AnalysisOptions& o, const InputCapabilities& input) {
    std::vector<std::string> asked = o.analyses;
    // "all" (or nothing): every analysis the input can feed, except those run only when named;
    // names given beside "all" add to it.
    const bool all = asked.empty() || std::find(asked.begin(), asked.end(), "all") != asked.end();
    auto named = [&](const std::string& n) {
        return std::find(asked.begin(), asked.end(), n) != asked.end();
    };
    std::vector<std::string> chosen;
    for (const auto& info : registry()) {
        // --group-by writes its tables from the statistics analysis.
        const bool wanted =
            named(info.name) || (info.name == std::string("statistics") && !o.group_by.empty()) ||
            (all && info.in_all && (!info.needs.hidden_states || input.hidden_states));
        if (wanted) chosen.emplace_back(info.name);
    }
    for (const auto& name : asked)
        if (name != "all") {
            const AnalysisInfo& info = find_analysis(name);  // unknown names: UsageError
            if (info.needs.hidden_states && !input.hidden_states)
                throw UsageError("--analyses " + name +
                                 " needs hidden states: run `sinkscope analyze` on a model");
        }
    // Prerequisites (registry order keeps them before their users).
    std::vector<std::string> out;
    for (const auto& info : registry()) {
        bool wanted = std::find(chosen.begin(), chosen.end(), info.name) != chosen.end();
        for (const auto& user : registry()) {
            if (std::find(chosen.begin(), chosen.end(), user.name) == chosen.end()) continue;
            if (std::find(user.after.begin(), user.after.end(), info.name) != user.after.end())
                wanted = true;
        }
        if (wanted) out.emplace_back(info.name);
    }
    return out;
}

}  // namespace

ResolvedOptions resolve(const AnalysisOptions& o, const InputCapabilities& input) {
    ResolvedOptions r;
    r.raw = o;
    r.analyses = select(o, input);

    // Rows and sinks.
    try {
        r.head.sink = metrics::parse_sink_policy(o.sink);
    } catch (const UsageError&) {
        throw UsageError("--sink must be auto, first, bos, argmax or a key position >= 0, got '" +
                         o.sink + "'");
    }
    r.head.sink.bos_id = o.bos_id;
    try {
        r.head.zeros = metrics::parse_zero_policy(o.zeros);
    } catch (const UsageError&) {
        throw UsageError("--zeros must be 'error' or 'replace:DELTA' with 0 < DELTA < 1, got '" +
                         o.zeros + "'");
    }
    require(o.min_parts >= 2,
            "--min-parts must be >= 2 (a row needs a sink and a content key), got " +
                std::to_string(o.min_parts));
    require(o.scope == "model" || o.scope == "layer",
            "--scope must be model or layer, got '" + o.scope + "'");
    if (o.scope == "layer") {
        // Only the analyses whose registry row says so (layer_scope) compare heads by scope.
        std::string scoped;
        bool any = false;
        for (const auto& info : registry())
            if (info.layer_scope) {
                scoped += (scoped.empty() ? "" : ", ") + std::string(info.name);
                any = any || r.selected(info.name);
            }
        require(any, "--scope layer changes only the analyses " + scoped +
                         ", and none of them is selected (--analyses)");
    }
    r.head.min_parts = o.min_parts;
    r.head.scope = metrics::parse_scope(o.scope);
    check_threads(o.threads);
    r.threads = metrics::resolved_threads(o.threads);
    r.head.n_threads = r.threads;

    // Head-level analyses.
    require(o.k >= 0, "--k must be >= 0, got " + std::to_string(o.k));
    require(o.triples >= 0, "--triples must be >= 0, got " + std::to_string(o.triples));
    // Sampling costs time in proportion to N; beyond this an exact count (--triples 0, which
    // handles 5e8 triples of 1,024 heads) is both faster and exact.
    require(o.triples <= 100000000,
            "--triples is capped at 100000000 sampled triples (0 counts every triple exactly), "
            "got " +
                std::to_string(o.triples));
    require(std::isfinite(o.regime_lo) && std::isfinite(o.regime_hi) && o.regime_lo <= o.regime_hi,
            "--regime-lo must be <= --regime-hi (both finite)");
    r.seed = o.seed.value_or(0);
    r.head_analyses.k = o.k;
    r.head_analyses.triples = o.triples;
    r.head_analyses.seed = r.seed;
    r.head_analyses.regime_lo = o.regime_lo;
    r.head_analyses.regime_hi = o.regime_hi;
    r.head_analyses.scope = r.head.scope == metrics::Scope::Layer ? metrics::ReversalScope::Layer
                                                                  : metrics::ReversalScope::Model;
    r.head_analyses.n_threads = r.threads;

    // Section 8.
    require(o.compat.empty() || o.compat == "ruscio2025",
            "--compat: unknown mode '" + o.compat + "' (known: ruscio2025)");
    require(o.symmetrize == "max" || o.symmetrize == "mean",
            "--symmetrize must be max or mean, got '" + o.symmetrize + "'");
    require(o.kl_rows == "paired" || o.kl_rows == "all",
            "--kl-rows must be paired or all, got '" + o.kl_rows + "'");
    require(o.topology_max_tokens == 0 || o.topology_max_tokens >= 2,
            "--topology-max-tokens must be 0 (never subsample) or >= 2");
    require(!o.constants.graph_thresholds.empty() &&
                std::all_of(o.constants.graph_thresholds.begin(),
                            o.constants.graph_thresholds.end(), in_unit_interval),
            "--graph-thresholds must be numbers in [0, 1], got '" +
                join_numbers(o.constants.graph_thresholds) + "'");
    require(!o.constants.sink_percentiles.empty() &&
                std::all_of(o.constants.sink_percentiles.begin(),
                            o.constants.sink_percentiles.end(), in_unit_interval),
            "--sink-percentiles must be numbers in [0, 1], got '" +
                join_numbers(o.constants.sink_percentiles) + "'");
    require(in_unit_interval(o.constants.effective_density_lo) &&
                in_unit_interval(o.constants.effective_density_hi) &&
                o.constants.effective_density_lo <= o.constants.effective_density_hi,
            "--effective-density must be LO,HI with 0 <= LO <= HI <= 1");
    require(std::isfinite(o.constants.long_bar) && o.constants.long_bar >= 0,
            "--long-bar must be a number >= 0");
    require(in_unit_interval(o.constants.specialised_share),
            "--specialised-share must be in [0, 1]");
    require(o.constants.specialised_min_inputs >= 1, "--specialised-min-inputs must be >= 1");
    require(in_unit_interval(o.constants.centralized_share_first),
            "--frame-share-first must be in [0, 1]");
    require(std::isfinite(o.constants.centralized_max_reference_count),
            "--frame-max-reference-count must be a finite number");
    r.p2.compat = o.compat;
    r.p2.per_head = o.per_head;
    r.p2.symmetrize = o.symmetrize;
    r.p2.kl_rows = o.kl_rows;
    r.p2.topology_max_tokens = o.topology_max_tokens;
    r.p2.constants = o.constants;
    r.p2.sink = r.head.sink;  // section 8 takes the same resolved sink (spec 0, 10.d)
    r.p2.threads = r.threads;

    // Value space.
    require(std::isfinite(o.reference_threshold) && o.reference_threshold >= 0,
            "--reference-threshold must be a number >= 0");
    require(in_unit_interval(o.reference_fallback_fraction) &&
                in_unit_interval(o.reference_cap_fraction),
            "--reference-fallback and --reference-cap must be fractions in [0, 1]");
    r.value.compat = !o.compat.empty();
    r.value.reference_threshold = o.reference_threshold;
    r.value.fallback_fraction = o.reference_fallback_fraction;
    r.value.cap_fraction = o.reference_cap_fraction;

    // Statistics.
    require(std::isfinite(o.sink_eps) && o.sink_eps >= 0 && o.sink_eps < 1,
            "--sink-eps must be in [0, 1)");
    require(o.sink_eps_key >= 0, "--sink-eps-key must be >= 0");
    require(o.bootstrap >= 0, "--bootstrap must be >= 0 (0: no intervals)");
    require(o.bootstrap == 0 || o.bootstrap >= 100,
            "--bootstrap needs at least 100 resamples for a percentile interval, got " +
                std::to_string(o.bootstrap));
    require(o.bootstrap <= 1000000, "--bootstrap is capped at 1000000 resamples");
    require(std::isfinite(o.confidence) && o.confidence > 0 && o.confidence < 1,
            "--confidence must be in (0, 1)");
    require(o.group_by.empty() || input.data_columns,
            "--group-by groups inputs by a column of their data file: it needs `sinkscope "
            "analyze --data FILE` (an attention file has no data columns)");
    return r;
}

nlohmann::json to_json(const AnalysisOptions& o) {
    return {
        {"analyses", o.analyses.empty() ? std::vector<std::string>{"all"} : o.analyses},
        {"sink", o.sink},
        {"bos_id", o.bos_id},
        {"zeros", o.zeros},
        {"min_parts", o.min_parts},
        {"scope", o.scope},
        {"k", o.k},
        {"triples", o.triples},
        {"seed", o.seed ? nlohmann::json(*o.seed) : nlohmann::json("unset (0; first samples)")},
        {"regime_lo", o.regime_lo},
        {"regime_hi", o.regime_hi},
        {"compat", o.compat.empty() ? "none (principled)" : o.compat},
        {"per_head", o.per_head},
        {"symmetrize", o.symmetrize},
        {"kl_rows", o.kl_rows},
        {"topology_max_tokens", o.topology_max_tokens},
        {"graph_thresholds", o.constants.graph_thresholds},
        {"sink_percentiles", o.constants.sink_percentiles},
        {"effective_density", {o.constants.effective_density_lo, o.constants.effective_density_hi}},
        {"long_bar", o.constants.long_bar},
        {"specialised_share", o.constants.specialised_share},
        {"specialised_min_inputs", o.constants.specialised_min_inputs},
        {"frame_share_first", o.constants.centralized_share_first},
        {"frame_max_reference_count", o.constants.centralized_max_reference_count},
        {"reference_threshold", o.reference_threshold},
        {"reference_fallback_fraction", o.reference_fallback_fraction},
        {"reference_cap_fraction", o.reference_cap_fraction},
        {"per_input", o.per_input},
        {"sink_eps", o.sink_eps},
        {"sink_eps_key", o.sink_eps_key},
        {"bootstrap", o.bootstrap},
        {"confidence", o.confidence},
        {"group_by", o.group_by},
        {"threads", o.threads}};
}

}  // namespace sinkscope::analysis
