// AnalysisOptions: validation, selection of the analyses and the run.json record (options.hpp).
// Errors name the option as the command line spells it; the Python bindings use the same names
// with '_' for '-'.
#include "sinkscope/analysis/options.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>

#include <nlohmann/json.hpp>

#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/system.hpp"

namespace sinkscope::analysis {

bool ResolvedOptions::selected(const std::string& name) const {
    return std::find(analyses.begin(), analyses.end(), name) != analyses.end();
}

bool OptionCheckContext::selected(const std::string& name) const {
    return analyses && std::find(analyses->begin(), analyses->end(), name) != analyses->end();
}

std::string cli_flag(const std::string& key) {
    std::string flag = "--" + key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    return flag;
}

std::string OptionSpec::cli_flag() const {
    return analysis::cli_flag(key);
}

nlohmann::json option_json(const OptionValue& value) {
    return std::visit(
        [](const auto& v) -> nlohmann::json {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::optional<uint64_t>>)
                return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
            else
                return nlohmann::json(v);
        },
        static_cast<const OptionValue::variant&>(value));
}

namespace {

void require(bool ok, const std::string& message) {
    if (!ok) throw UsageError(message);
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
            (all && info.in_all && (!info.needs.model_vectors() || input.hidden_states));
        if (wanted) chosen.emplace_back(info.name);
    }
    for (const auto& name : asked)
        if (name != "all") {
            const AnalysisInfo& info = find_analysis(name);  // unknown names: UsageError
            if (info.needs.model_vectors() && !input.hidden_states)
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

namespace {

// The options several analyses read (spec 0, 1, 10.c-10.e); each analysis' own options are in
// its registry row (registry.cpp).
std::vector<OptionSpec> shared_options() {
    using C = OptionCommands;
    const char* rows = kRowsGroup;
    return {
        field_option<std::vector<std::string>>(
            "analyses", [](auto& o) -> auto& { return o.analyses; },
            "Comma-separated analyses (default all)")
            .in("Analyses")
            .not_compared()
            .recorded([](const AnalysisOptions& o) {
                return nlohmann::json(o.analyses.empty() ? std::vector<std::string>{"all"}
                                                         : o.analyses);
            }),
        field_option<std::string>(
            "sink", [](auto& o) -> auto& { return o.sink; },
            "Sink policy: auto (first for causal attention, argmax for bidirectional), first, "
            "bos, argmax (per layer; model-wide for model-scope comparisons) or a key position")
            .in(rows)
            .labelled("the sink convention")
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                try {
                    metrics::parse_sink_policy(o.sink);
                } catch (const UsageError&) {
                    throw UsageError(
                        "--sink must be auto, first, bos, argmax or a key position >= 0, got '" +
                        o.sink + "'");
                }
            }),
        field_option<int64_t>(
            "bos_id", [](auto& o) -> auto& { return o.bos_id; },
            "BOS/CLS token id, required with --sink bos (several BOS in an input: the first)")
            .in(rows)
            .only(C::AttentionFileOnly),
        field_option<std::string>(
            "zeros", [](auto& o) -> auto& { return o.zeros; },
            "Zero policy for probability rows: error, or replace:DELTA (multiplicative "
            "replacement, log-ratio quantities only)")
            .in(rows)
            .only(C::AttentionFileOnly)
            .labelled("the zero policy")
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                try {
                    metrics::parse_zero_policy(o.zeros);
                } catch (const UsageError&) {
                    throw UsageError(
                        "--zeros must be 'error' or 'replace:DELTA' with 0 < DELTA < 1, got '" +
                        o.zeros + "'");
                }
            }),
        field_option<int64_t>(
            "min_parts", [](auto& o) -> auto& { return o.min_parts; },
            "Rows with fewer visible keys are excluded and counted (>= 2)")
            .in(rows)
            .labelled("the minimum part count")
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                require(o.min_parts >= 2,
                        "--min-parts must be >= 2 (a row needs a sink and a content key), got " +
                            std::to_string(o.min_parts));
            }),
        field_option<std::string>(
            "scope", [](auto& o) -> auto& { return o.scope; },
            "Head pairs compared: model (all heads, one sink per input) or layer (pairs within a "
            "layer, per-layer sinks)")
            .in(rows)
            .labelled("the head scope")
            .checked([](const AnalysisOptions& o, const OptionCheckContext& c) {
                require(o.scope == "model" || o.scope == "layer",
                        "--scope must be model or layer, got '" + o.scope + "'");
                if (o.scope != "layer") return;
                // Only the analyses whose row says so (layer_scope) compare heads by scope.
                std::string scoped;
                bool any = false;
                for (const auto& info : registry())
                    if (info.layer_scope) {
                        scoped += (scoped.empty() ? "" : ", ") + std::string(info.name);
                        any = any || c.selected(info.name);
                    }
                require(any, "--scope layer changes only the analyses " + scoped +
                                 ", and none of them is selected (--analyses)");
            }),
        field_option<std::optional<uint64_t>>(
            "seed", [](auto& o) -> auto& { return o.seed; }, kSeedHelp)
            .in(kHeadGroup)
            .recorded([](const AnalysisOptions& o) {
                return o.seed ? nlohmann::json(*o.seed)
                              : nlohmann::json("unset (0; first samples)");
            }),
        field_option<std::string>(
            "compat", [](auto& o) -> auto& { return o.compat; },
            "Semantics: empty (principled, default) or ruscio2025 (the released notebooks of the "
            "reference-frame paper, quirks included)")
            .in(kReferenceFrameGroup)
            .labelled("the compat mode")
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                metrics::check_compat(o.compat);
            })
            .recorded([](const AnalysisOptions& o) {
                return nlohmann::json(o.compat.empty() ? "none (principled)" : o.compat);
            }),
        field_option<bool>(
            "per_head", [](auto& o) -> auto& { return o.per_head; },
            "Graphs, topology and spectra per head as well as on the head average")
            .in(kReferenceFrameGroup)
            .not_compared(),
        field_option<bool>(
            "per_input", [](auto& o) -> auto& { return o.per_input; },
            "Also write every analysis' values per input: <table>_per_input.csv (long format "
            "with an input column; the summary is their weighted mean)")
            .in(kStatisticsGroup)
            .not_compared(),
        field_option<int>(
            "threads", [](auto& o) -> auto& { return o.threads; },
            kThreadsHelp)
            .only(C::AttentionFileOnly)  // analyze: --threads of the model options sets both
            .not_compared()
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                check_threads(o.threads);
            }),
    };
}

}  // namespace

const std::vector<OptionSpec>& option_specs() {
    static std::mutex mutex;
    static std::vector<OptionSpec> specs;
    static size_t rows = 0;
    std::lock_guard<std::mutex> lock(mutex);
    if (specs.empty() || rows != registry().size()) {
        specs = shared_options();
        for (const auto& info : registry())
            for (OptionSpec s : info.options) {
                s.analysis = info.name;
                specs.push_back(std::move(s));
            }
        rows = registry().size();
    }
    return specs;
}

const OptionSpec* find_option(const std::string& key) {
    for (const auto& s : option_specs())
        if (s.key == key) return &s;
    return nullptr;
}

ResolvedOptions resolve(const AnalysisOptions& o, const InputCapabilities& input) {
    ResolvedOptions r;
    r.raw = o;
    r.analyses = select(o, input);
    const OptionCheckContext context{.input = &input, .analyses = &r.analyses};
    for (const OptionSpec& spec : option_specs())
        if (spec.check) spec.check(o, context);

    // Rows and sinks.
    r.head.sink = metrics::parse_sink_policy(o.sink);
    r.head.sink.bos_id = o.bos_id;
    r.head.zeros = metrics::parse_zero_policy(o.zeros);
    r.head.min_parts = o.min_parts;
    r.head.scope = metrics::parse_scope(o.scope);
    r.threads = metrics::resolved_threads(o.threads);
    r.head.n_threads = r.threads;

    // Head-level analyses.
    r.seed = o.seed.value_or(0);
    r.head_analyses.k = o.k;
    r.head_analyses.triples = o.triples;
    r.head_analyses.linkage = metrics::parse_linkage(o.linkage);
    r.head_analyses.seed = r.seed;
    r.head_analyses.regime_lo = o.regime_lo;
    r.head_analyses.regime_hi = o.regime_hi;
    r.head_analyses.scope = r.head.scope == metrics::Scope::Layer ? metrics::ReversalScope::Layer
                                                                  : metrics::ReversalScope::Model;
    r.head_analyses.n_threads = r.threads;

    // Reference-frame analyses (spec section 8).
    r.ref_frame.compat = o.compat;
    r.ref_frame.per_head = o.per_head;
    r.ref_frame.symmetrize = o.symmetrize;
    r.ref_frame.kl_rows = o.kl_rows;
    r.ref_frame.topology_max_tokens = o.topology_max_tokens;
    r.ref_frame.constants = o.constants;
    r.ref_frame.sink = r.head.sink;  // section 8 takes the same resolved sink (spec 0, 10.d)
    r.ref_frame.threads = r.threads;

    // Value space.
    r.value.compat = !o.compat.empty();
    r.value.reference_threshold = o.reference_threshold;
    r.value.fallback_fraction = o.reference_fallback;
    r.value.cap_fraction = o.reference_cap;
    return r;
}

nlohmann::json to_json(const AnalysisOptions& o) {
    nlohmann::json j = nlohmann::json::object();
    for (const OptionSpec& spec : option_specs())
        j[spec.key] = spec.record ? spec.record(o) : option_json(spec.get(o));
    return j;
}

}  // namespace sinkscope::analysis
