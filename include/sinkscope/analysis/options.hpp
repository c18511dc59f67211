// AnalysisOptions: every option of the analyses, typed, with the one set of defaults used by
// `sinkscope analyze`, `sinkscope metrics` and the Python bindings, and recorded whole in run.json.
// The scientific constants of spec section 8 (graph thresholds, sink percentiles, effective
// density band, long-bar persistence, specialisation rule, value-space reference rule) are
// options whose defaults are the spec's values. resolve() validates and parses every enum once.
//
// Every option is described once, by an OptionSpec (its key, help, group, check, how run.json
// records it, whether `compare` checks it): the options every analysis reads in options.cpp,
// an analysis' own options in its registry row (AnalysisInfo::options). The command line's
// flags, the Python keywords, resolve()'s checks, run.json and compare's convention check all
// iterate option_specs(), so a default or a check is written once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sinkscope/metrics/head.hpp"
#include "sinkscope/metrics/head_analyses.hpp"
#include "sinkscope/metrics/ref_frame.hpp"
#include "sinkscope/metrics/value_space.hpp"

namespace sinkscope::analysis {

// The value of one option: one of the types options have.
struct OptionValue
    : std::variant<bool, int, int64_t, double, std::string, std::vector<double>,
                   std::vector<std::string>, std::optional<uint64_t>, std::pair<double, double>> {
    using variant::variant;
};

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
    int k = 0;                        // clusters; 0 = best mean silhouette of dA_perp in 2..12
    int64_t triples = 0;              // 0 = exact reversal counts; N = N distinct sampled triples
    std::string linkage = "average";  // average | complete | single | ward (spec 4)
    int failure_bins = 10;            // sink-mass bins of failure_geometry.csv
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
    metrics::RefFrameConstants constants;
    double reference_threshold = metrics::ValueSpaceOptions{}.reference_threshold;
    double reference_fallback = metrics::ValueSpaceOptions{}.fallback_fraction;
    double reference_cap = metrics::ValueSpaceOptions{}.cap_fraction;

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

    // The options of analyses registered outside this struct (register_analysis), by key; an
    // absent key has its OptionSpec's default. Read with value<T>(key).
    std::map<std::string, OptionValue> extra;
    template <class T>
    T value(const std::string& key) const;
};

// What an option's check sees besides the options: the input and the selected analyses.
struct InputCapabilities;
struct OptionCheckContext {
    const InputCapabilities* input = nullptr;
    const std::vector<std::string>* analyses = nullptr;  // selected, registry order
    bool selected(const std::string& name) const;
};

// The --help groups of the options.
inline constexpr const char* kRowsGroup = "Rows and sinks";
inline constexpr const char* kHeadGroup = "Head analyses";
inline constexpr const char* kReferenceFrameGroup = "Reference-frame analyses";
inline constexpr const char* kStatisticsGroup = "Per input and statistics";

// What --seed means in every command (analyze, dynamics and metrics here; prune, fisher, train,
// perplexity and dump through apps/vocabulary.hpp): one text, one meaning.
inline constexpr const char* kSeedHelp =
    "One seed for everything the command draws at random, and where the command has --samples, "
    "for a random subset of the samples; unset: the command's fixed seed (run.json records it) "
    "and the first N samples";
// What --threads means in every command; results do not depend on it (train's weights aside).
inline constexpr const char* kThreadsHelp = "Threads to run on (0: all cores)";

// Which commands' command line offers an option (the Python keywords and run.json have them all).
enum class OptionCommands { Both, ModelOnly, AttentionFileOnly, None };

// One option, described once.
struct OptionSpec {
    std::string key;    // run.json key and Python keyword; the flag is --key with '-' for '_'
    std::string help;   // --help text (the default is appended by the command line; a bool
                        // option is a bare flag, --per-head)
    std::string group;  // --help group ("": the ungrouped options)
    OptionCommands commands = OptionCommands::Both;
    bool compared = true;  // `compare` reports runs that differ in it
    std::string label;     // compare's words for it ("": "option KEY")
    std::string analysis;  // the registry row it belongs to ("": read by several analyses)
    std::function<OptionValue(const AnalysisOptions&)> get;
    std::function<void(AnalysisOptions&, const OptionValue&)> set;
    // Throws UsageError naming the flag when the value (or its relation to others) is invalid.
    std::function<void(const AnalysisOptions&, const OptionCheckContext&)> check;
    // How run.json records it (null: the value as JSON).
    std::function<nlohmann::json(const AnalysisOptions&)> record;
    std::string cli_flag() const;  // "--" + key with '-' for '_'

    // Builders, for declaring an option in one expression.
    OptionSpec& in(std::string g) { return group = std::move(g), *this; }
    OptionSpec& only(OptionCommands c) { return commands = c, *this; }
    OptionSpec& not_compared() { return compared = false, *this; }
    OptionSpec& labelled(std::string l) { return label = std::move(l), *this; }
    OptionSpec& checked(std::function<void(const AnalysisOptions&, const OptionCheckContext&)> c) {
        return check = std::move(c), *this;
    }
    OptionSpec& recorded(std::function<nlohmann::json(const AnalysisOptions&)> r) {
        return record = std::move(r), *this;
    }
};

// An option stored in a field of AnalysisOptions: `field` is a generic lambda returning a
// reference to it, [](auto& o) -> auto& { return o.min_parts; }.
template <class T, class F>
OptionSpec field_option(std::string key, F field, std::string help) {
    OptionSpec s;
    s.key = std::move(key);
    s.help = std::move(help);
    s.get = [field](const AnalysisOptions& o) { return OptionValue(T(field(o))); };
    s.set = [field](AnalysisOptions& o, const OptionValue& v) { field(o) = std::get<T>(v); };
    return s;
}

// An option of a registered analysis, stored in AnalysisOptions::extra.
template <class T>
OptionSpec extra_option(std::string key, T default_value, std::string help) {
    OptionSpec s;
    s.key = key;
    s.help = std::move(help);
    s.get = [key, default_value](const AnalysisOptions& o) {
        const auto it = o.extra.find(key);
        return it == o.extra.end() ? OptionValue(default_value) : it->second;
    };
    s.set = [key](AnalysisOptions& o, const OptionValue& v) {
        (void)std::get<T>(v);  // the spec's type, or std::bad_variant_access
        o.extra[key] = v;
    };
    return s;
}

// The command-line flag of option `key`: "--" + key with '-' for '_'.
std::string cli_flag(const std::string& key);

// The value as run.json records it when the spec has no `record`.
nlohmann::json option_json(const OptionValue& value);

// Every option: those every analysis reads, then each registry row's own, in registry order.
// Built once and again only after a row was registered (rows are added by static initialisers,
// so in practice once).
const std::vector<OptionSpec>& option_specs();
// The spec of `key` (nullptr when no option has it).
const OptionSpec* find_option(const std::string& key);

template <class T>
T AnalysisOptions::value(const std::string& key) const {
    const OptionSpec* spec = find_option(key);
    return std::get<T>(spec ? spec->get(*this) : extra.at(key));
}

// AnalysisOptions checked and parsed into the typed options of each accumulator.
struct ResolvedOptions {
    AnalysisOptions raw;
    std::vector<std::string> analyses;  // selected registry names, registry order
    metrics::HeadOptions head;          // sink (unresolved Auto), zeros, min_parts, scope
    metrics::HeadAnalysisOptions head_analyses;
    metrics::RefFrameOptions ref_frame;
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
