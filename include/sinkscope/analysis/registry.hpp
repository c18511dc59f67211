// The analysis registry: one row per analysis (what it needs from the input, which attention it
// applies to, how it scopes, what it builds on) and the one accumulator interface every analysis
// implements. A new analysis is its own file (an Analysis subclass and a factory), its row in
// src/analysis/registry.cpp and its test; docs/adding_an_analysis.md walks through it.
//
// Data flow (DESIGN.md): the pipeline (pipeline.hpp) resolves each input's sinks once, hands the
// input to every selected analysis in registry order, collects the per-input values they report
// (written with --per-input and read by the statistics analysis), saves and loads their exact
// state for resumable runs, and at the end calls finish() in registry order, so an analysis can
// read the finished results of the analyses listed in `after`.
#pragma once

#include <any>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sinkscope/analysis/options.hpp"
#include "sinkscope/analysis/run_values.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/progress.hpp"
#include "sinkscope/core/serialize.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/table.hpp"
#include "sinkscope/metrics/attention.hpp"
#include "sinkscope/metrics/head.hpp"
#include "sinkscope/metrics/head_analyses.hpp"
#include "sinkscope/metrics/ref_frame.hpp"
#include "sinkscope/metrics/sink.hpp"

namespace sinkscope::analysis {

// The model's vectors of one input, for the analyses that need hidden states (model runs only).
// Released once those analyses have read them.
struct ModelVectors {
    // [L + 1] x [T, d_model], [2 L] for layers not consecutive in the model (value_space.hpp)
    std::vector<std::vector<double>> hidden;
    std::vector<std::vector<double>> values;  // [L] x [H, T, d_head], GQA-expanded
    // [L] x [H, T, d_head]: the queries and keys whose dot products are the scores (after any
    // rotary embedding), keys GQA-expanded; only when an analysis reads them (sink geometry)
    std::vector<std::vector<double>> queries, keys;
    // [L] x [H, T]: the weight each query row gave outside the tokens (1 - the row's sum before
    // it was closed: softmax_one's zero logit, the kv slot), with the queries and keys, for models
    // that have such a slot (ModelConfig::has_outside_slot) and rows captured (not recomputed);
    // else empty
    std::vector<std::vector<double>> outside_mass;
    int64_t d_model = 0, d_head = 0;
};

// One input as every analysis sees it.
struct InputView {
    int64_t index = 0;  // ordinal of the input in the run (0-based)
    const metrics::AttentionInput* attention = nullptr;
    const metrics::SinkPositions* sinks = nullptr;     // resolved once per input (10.d)
    const std::vector<std::string>* tokens = nullptr;  // [T] token strings, or null
    const ModelVectors* vectors = nullptr;  // model runs, for Needs::hidden_states analyses
};

// One value of one input: what --per-input writes and the statistics analysis reads. `table` is
// the summary table it aggregates into; the summary value is the `weight`-weighted mean of the
// finite per-input values (weight = rows used for heads.csv, 1 elsewhere).
struct PerInputValue {
    std::string table;
    int64_t layer = -1, head = -1;
    std::string metric, param;
    double value = 0;
    double weight = 1;
};
using PerInputValues = std::vector<PerInputValue>;

// A typed hand-off between analyses: the result analysis `analysis` passes on, of type T. Each
// key is declared once (below), and AnalysisOutput::set_result and FinishContext::result take
// it, so the producer and its readers agree on the name and the type at compile time.
template <class T>
struct ResultKey {
    const char* analysis;
};
// compositional's per-head results and distance matrices, read by heads.
inline constexpr ResultKey<metrics::HeadResults> kCompositionalResult{"compositional"};

// What an analysis produces at the end. Tables are written as <name>.csv (+ .jsonl when asked);
// arrays as .npy and texts as files at their relative paths; `record` is merged into run.json
// (top level); `result` carries typed results for the analyses that build on this one.
struct AnalysisOutput {
    struct NamedTable {
        std::string name;
        io::Table table;
        bool jsonl = false;
    };
    std::vector<NamedTable> tables;
    std::vector<std::pair<std::string, io::NpyArray>> arrays;
    std::vector<std::pair<std::string, std::string>> texts;
    nlohmann::json record = nlohmann::json::object();
    std::string summary;  // lines for the console
    std::vector<std::string> warnings;
    // The result handed to the analyses that build on this one (ResultKey).
    template <class T>
    void set_result(const ResultKey<T>&, std::shared_ptr<const T> value) {
        result = std::move(value);
    }
    std::any result;  // a std::shared_ptr<const T> of the key's T, or empty
};

// Finished results of the analyses that ran before (registry order), by name.
struct FinishContext {
    std::map<std::string, const AnalysisOutput*> finished;
    // The result `key` names; InternalError when its analysis has not finished or handed on
    // none of the key's type.
    template <class T>
    const T& result(const ResultKey<T>& key) const {
        const auto* r = std::any_cast<std::shared_ptr<const T>>(&output(key.analysis).result);
        SS_CHECK(r && *r, "analysis '", key.analysis, "' handed on no result of the expected type");
        return **r;
    }
    const AnalysisOutput& output(const std::string& name) const;  // InternalError when absent
};

// State the analyses of one pipeline share (the reference-frame analyses read an input's rows in
// one pass together), each kind under its own typed key.
template <class T>
struct SharedKey {
    const char* name;
};
class SharedState {
public:
    // The pipeline's one T under `key`, default-constructed by the first caller.
    template <class T>
    std::shared_ptr<T> get(const SharedKey<T>& key) {
        std::any& slot = slots_[key.name];
        if (!slot.has_value()) slot = std::make_shared<T>();
        return std::any_cast<std::shared_ptr<T>>(slot);
    }

private:
    std::map<std::string, std::any> slots_;
};

// The accumulator interface. add() sees one input; merge() combines another shard's state (same
// options, inputs of the other shard after this one's); save()/load() are exact; finish() turns
// the state into outputs and may be called once.
class Analysis {
public:
    virtual ~Analysis() = default;
    virtual void add(const InputView& input, PerInputValues* per_input) = 0;
    virtual void merge(const Analysis& other) = 0;
    virtual void save(BinaryWriter& w) const = 0;
    virtual void load(BinaryReader& r) = 0;
    virtual AnalysisOutput finish(const FinishContext& context) = 0;
    // Progress inside add(): stage name, done, total.
    virtual void set_progress(const StageProgress&) {}
    // The per-input values of the other analyses of this input (statistics reads them).
    virtual void add_per_input(int64_t /*input*/, const PerInputValues& /*values*/) {}
};

// What an analysis needs from the input.
struct Needs {
    bool hidden_states = false;  // residual stream and V projections (model runs only)
    bool queries_keys = false;   // rotated queries and keys (model runs only)
    // Reads the model's vectors (ModelVectors): offered by model runs only, run before the
    // attention analyses.
    bool model_vectors() const { return hidden_states || queries_keys; }
    bool token_strings = false;     // names keys by their token text (analyze decodes them)
    bool per_input_values = false;  // reads the other analyses' per-input values
};

// What identifies each input of a run in its data (set by the caller of the pipeline; empty: an
// input is its own row, e.g. the inputs of an attention file).
struct InputLabels {
    std::vector<int64_t> rows;         // per input (run-wide index): its 0-based row in the data
    std::vector<std::string> columns;  // data columns carried along (--keep-columns)
    std::vector<std::vector<std::string>> values;  // per input: one value per column
    int64_t row(int64_t input) const {
        return input >= 0 && size_t(input) < rows.size() ? rows[size_t(input)] : input;
    }
};

struct AnalysisContext {
    int64_t n_layers = 0, n_heads = 0;
    const ResolvedOptions* options = nullptr;
    std::string model_name;  // the model column of the long tables
    std::string checkpoint;  // their checkpoint column ("" outside a series of checkpoints)
    std::string origin;      // names the input in errors (a file, a model)
    // What the analyses of one pipeline share (SharedState); null outside a pipeline.
    std::shared_ptr<SharedState> shared;
    // The inputs' rows and data columns (AnalysisPipeline::set_input_labels); null outside a
    // pipeline.
    std::shared_ptr<const InputLabels> labels;
    // The model's index of each analysed layer (analyze --layers; empty: layer l is model layer
    // l). The pipeline maps the layer columns of every table; other outputs use layer_id().
    std::vector<int64_t> layer_ids;
    int64_t layer_id(int64_t l) const {
        return l >= 0 && !layer_ids.empty() ? layer_ids[static_cast<size_t>(l)] : l;
    }
};

// A per-input value of an analysis that the statistics analysis treats as one of its headline
// numbers (bootstrap intervals, --group-by means and tests): `metric` of table `table`, for every
// head and layer (`per_head`) or for each layer's head average (head -1, layer >= 0).
struct Headline {
    const char* table;
    const char* metric;
    bool per_head = false;
};

struct AnalysisInfo {
    const char* name;
    const char* description;  // one line for --help and the docs
    Needs needs;
    bool layer_scope = false;         // --scope layer changes what it compares (else refused)
    bool in_all = true;               // false: runs only when named (--analyses all,NAME)
    std::vector<std::string> after;   // analyses whose finished results it reads (auto-selected)
    std::vector<Headline> headlines;  // its headline per-input values (statistics)
    std::vector<OptionSpec> options;  // its own options (options.hpp; the flags, run.json, ...)
    std::function<std::unique_ptr<Analysis>(const AnalysisContext&)> make;
    // What `compare` (the model's numbers, across models) and `dynamics` (per layer and for the
    // model, across checkpoints) read back from a finished run's tables (run_values.hpp); they
    // iterate the rows in order. Null: nothing.
    RunValueReader compare_values, trajectory_values;
};

// Every analysis, in the order they run and finish: the built-in rows, then those registered.
const std::vector<AnalysisInfo>& registry();

// Adds a row after the others (before statistics, which reads every analysis' per-input
// values): an analysis defined outside src/analysis, e.g. a test's. Call it from a static
// initialiser (RegisterAnalysis), before any command runs. UsageError when the name or an
// option key is taken.
void register_analysis(AnalysisInfo info);
struct RegisterAnalysis {
    explicit RegisterAnalysis(AnalysisInfo info) { register_analysis(std::move(info)); }
};
const AnalysisInfo& find_analysis(const std::string& name);  // UsageError listing the names

// Writes an output's tables (<name>.csv, + .jsonl when asked), arrays (.npy) and texts at their
// relative paths under `dir`, creating subfolders as needed.
void write_output(const AnalysisOutput& output, const RunFiles& dir);

// How regions.csv groups the layers and the level of its intervals: the options
// --region-bounds ("thirds" or "M,N") and --confidence.
struct RegionSettings {
    std::string bounds = "thirds";
    double level = 0.95;
};
// The outputs of finished results, for callers that drive the metrics accumulators themselves
// (ref_frame.cpp, heads.cpp). `header`: the "reference-frame analyses (...)" summary line;
// `regions`: also regions.csv of the results' per-layer quantities (and run.json "regions").
AnalysisOutput ref_frame_output(const metrics::RefFrameResults& results, bool header = true,
                                const std::optional<RegionSettings>& regions = RegionSettings{});
AnalysisOutput head_analyses_output(const metrics::HeadAnalysisResults& results);

}  // namespace sinkscope::analysis
