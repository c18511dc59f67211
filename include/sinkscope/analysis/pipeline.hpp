// The one code path from inputs to analyses: the selected registry analyses (registry.hpp) fed
// one input at a time, with the input's sinks resolved once, the per-input values streamed to
// <table>_per_input.csv (--per-input) and handed to the analyses that read them, the exact state
// saved for resumable runs, and the finished outputs collected for the run directory. Used by
// `sinkscope metrics` (attention from a file) and `sinkscope analyze` (attention from a model).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sinkscope/analysis/layers.hpp"
#include "sinkscope/analysis/options.hpp"
#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/core/run_files.hpp"
#include "sinkscope/core/serialize.hpp"

namespace sinkscope::analysis {

// What the pipeline produced, ready for the run directory (api/run_outputs.hpp writes it).
struct PipelineResults {
    std::vector<std::pair<std::string, AnalysisOutput>> outputs;  // registry order
    nlohmann::json record = nlohmann::json::object();  // run.json fields of every analysis
    std::string summary;                               // console lines
    std::vector<std::string> warnings;
};

class AnalysisPipeline {
public:
    // `checkpoint` labels the checkpoint column of every table (empty: left empty). `layers`:
    // the model layers the inputs' n_layers layers are (analyze --layers; empty ids: layer l is
    // model layer l); every output names a layer by its model index.
    AnalysisPipeline(int64_t n_layers, int64_t n_heads, ResolvedOptions options,
                     std::string model_name, std::string origin, std::string checkpoint = {},
                     const LayerSelection& layers = {});
    ~AnalysisPipeline();

    // Streams sinks.csv (input, row, layer, sink_position; layer -1 = the model-wide sink) and,
    // with per-input values, <table>_per_input.csv into `dir`, so memory does not grow with the
    // number of inputs. After load() the files are cut back to what the saved state had written.
    // `dir` in memory (RunFiles::in_memory): the rows are kept as text and finish() writes the
    // files there.
    void open_streams(const RunFiles& dir);

    // One input. `vectors` (may be null) feed the analyses that need hidden states, which run
    // first; it is then cleared (released) before the attention analyses run.
    void add(const metrics::AttentionInput& input, const std::vector<std::string>* tokens = nullptr,
             ModelVectors* vectors = nullptr);
    int64_t n_inputs() const { return n_inputs_; }
    bool wants(const std::string& analysis) const { return options_.selected(analysis); }
    // Whether a selected analysis reads the inputs' token texts (registry Needs::token_strings);
    // else add() may be given none.
    bool wants_token_strings() const { return wants_token_strings_; }
    const ResolvedOptions& options() const { return options_; }

    // Resolved sink positions of the first kMaxRecordedSinks inputs, for run.json (spec 9);
    // sinks.csv has all of them.
    static constexpr size_t kMaxRecordedSinks = 1000;
    const nlohmann::json& sink_positions() const { return positions_; }

    // Progress inside add(): stage = analysis name.
    void set_progress(const StageProgress& fn);

    void save(BinaryWriter& w);  // flushes the streams so the saved sizes are on disk
    void load(BinaryReader& r);

    // Shards of one run (api/distributed.hpp): the index of this shard's first input in the whole
    // run, the input column of the streamed tables (the analyses keep counting from 0, as merge()
    // expects). Set before the first add().
    void set_first_input(int64_t first) { first_input_ = first; }
    // The rows and data columns of every input of the run (indexed run-wide, as the input
    // column): the streamed per-input tables get a `row` column and one column per data column,
    // and the statistics group by a data column (--group-by). Set before open_streams().
    void set_input_labels(InputLabels labels);
    // The rows streamed so far (table name -> CSV lines after the header), for another process.
    std::map<std::string, std::string> stream_rows();
    // Appends the shard `other` (same options, the inputs after this one's; loaded from its saved
    // state) and its streamed rows: every analysis' merge() in registry order, the sink
    // positions and the rows, so merging shards in input order gives the one-process run.
    void merge(const AnalysisPipeline& other, const std::map<std::string, std::string>& rows);

    // Finishes every analysis in registry order (each may read the results of those before).
    PipelineResults finish();

private:
    struct Stream;
    Stream& stream(const std::string& table);

    int64_t n_layers_, n_heads_;
    ResolvedOptions options_;
    AnalysisContext context_;
    std::shared_ptr<InputLabels> labels_;  // context_.labels, filled by set_input_labels
    struct Selected {
        const AnalysisInfo* info;  // its registry row
        std::unique_ptr<Analysis> analysis;
    };
    std::vector<Selected> analyses_;  // registry order
    bool collect_per_input_ = false;
    bool wants_token_strings_ = false;
    int64_t n_inputs_ = 0;
    int64_t first_input_ = 0;
    std::optional<RunFiles> dir_;                             // set by open_streams
    std::map<std::string, std::unique_ptr<Stream>> streams_;  // "sinks", "<table>_per_input"
    std::map<std::string, uint64_t> saved_bytes_;             // from load()
    nlohmann::json positions_ = nlohmann::json::array();
};

// Deep merge of run.json fields: objects recursively, arrays concatenated without repeats,
// other values replaced.
void merge_record(nlohmann::json& into, const nlohmann::json& from);

}  // namespace sinkscope::analysis
