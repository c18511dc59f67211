// AnalysisOptions: every option of the analyses, typed, with the one set of defaults used by
// `sinkscope analyze`, `sinkscope metrics` and the Python bindings, and recorded whole in run.json.
// The scientific constants of spec section 8 (graph thresholds, sink percentiles, effective
// density band, long-bar persistence, specialisation rule, value-space reference rule) are
// options whose defaults are the spec's values. resolve() validates and parses every enum once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sinkscope/metrics/head.hpp"
#include "sinkscope/metrics/head_analyses.hpp"
#include "sinkscope/metrics/p2.hpp"
#include "sinkscope/metrics/value_space.hpp"

namespace sinkscope::analysis {

struct AnalysisOptions {
    // Which analyses (names of analysis::registry()); empty or {"all"}: every analysis the input
    // supports.
    std::vector<std::string> analyses;

    // Rows and sinks (spec 0, 1, 10.c-10.e).
    std::string sink = "auto";    // auto | first | bos | argmax | key position
    int64_t bos_id = -1;          // token id of BOS/CLS for sink bos (-1: from the model)
    std::string zeros = "error";  // error | replace:DELTA (probabilities only)
    int64_t min_parts = 3;        // rows with fewer visible keys are excluded (>= 2)
    std::string scope = "model";  // model | layer

    // Head-level analyses (spec 3, 4, 7).
    int k = 0;            // clusters; 0 = best mean silhouette of dA_perp in 2..12
    int64_t triples = 0;  // 0 = exact reversal counts; N = N sampled triples (Wilson interval)
    // One seed for everything random in a run: the triple sampler, the bootstrap and the random
    // subset of --samples. Unset: seed 0, and --samples takes the first N inputs.
    std::optional<uint64_t> seed;
    double regime_lo = metrics::kRegimeLo;
    double regime_hi = metrics::kRegimeHi;

    // Section 8 (spec 8, 10.i-10.r).
    std::string compat;  // "" (principled) | ruscio2025
    bool per_head = false;
    std::string symmetrize = "max";  // max | mean
    std::string kl_rows = "paired";  // paired | all (rows of kl_before, metrics/sink_kl.hpp)
    int64_t topology_max_tokens = metrics::k_default_topology_max_tokens;
    // Graph thresholds, sink percentiles, effective-density band, long-bar persistence,
    // specialisation rule.
    metrics::P2Constants constants;
    double reference_threshold = metrics::ValueSpaceOptions{}.reference_threshold;
    double reference_fallback_fraction = metrics::ValueSpaceOptions{}.fallback_fraction;
    double reference_cap_fraction = metrics::ValueSpaceOptions{}.cap_fraction;

    // Sink_eps (spec 8.q): share of heads whose mean attention to key `sink_eps_key` exceeds eps.
    double sink_eps = 0.3;
    int64_t sink_eps_key = 0;

    // Per-input values and statistics over inputs.
    bool per_input = false;    // also write <table>_per_input.csv (one row per input)
    int64_t bootstrap = 0;     // bootstrap resamples for confidence intervals (0: none)
    double confidence = 0.95;  // level of the bootstrap intervals
    // A data column (analyze --keep-columns) to group the inputs by: groups.csv (per group mean
    // and t-interval at `confidence` of each headline value) and group_tests.csv (Welch's t-test
    // for two groups, one-way ANOVA for more). Empty: no grouping.
    std::string group_by;

    // Worker threads of the analyses (head pairwise sums, section 8 layers); 0 = all cores.
    // Results do not depend on it.
    int threads = 0;
};

// AnalysisOptions checked and parsed into the typed options of each accumulator.
struct ResolvedOptions {
    AnalysisOptions raw;
    std::vector<std::string> analyses;  // selected registry names, registry order
    metrics::HeadOptions head;          // sink (unresolved Auto), zeros, min_parts, scope
    metrics::HeadAnalysisOptions head_analyses;
    metrics::P2Options p2;
    metrics::ValueSpaceOptions value;
    uint64_t seed = 0;
    int threads = 1;  // resolved (>= 1)
    bool selected(const std::string& name) const;
};

// What the input offers, for selecting "all" and rejecting analyses it cannot feed.
struct InputCapabilities {
    bool hidden_states = false;             // model runs (value space)
    bool data_columns = false;              // inputs from a data file with columns (--group-by)
    std::string source = "attention file";  // names the input in errors
};

// Validates every field (UsageError naming the option as the CLI spells it) and selects the
// analyses (dependencies added, e.g. heads needs compositional).
ResolvedOptions resolve(const AnalysisOptions& options, const InputCapabilities& input);

// The options as run.json records them (every field, defaults included).
nlohmann::json to_json(const AnalysisOptions& options);

}  // namespace sinkscope::analysis
