// The one code path for the math on attention: streaming accumulators for every analysis on
// AttentionInput (compositional head metrics, head-level analyses, P2 section 8 analyses), their
// exact state for resumable runs, and the tables/run.json fields they write. Used by
// `sinkscope metrics` (attention from a file) and `sinkscope analyze` (attention from a model).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sinkscope/core/serialize.hpp"
#include "sinkscope/metrics/attention.hpp"
#include "sinkscope/metrics/head.hpp"
#include "sinkscope/metrics/head_analyses.hpp"
#include "sinkscope/metrics/p2.hpp"

namespace sinkscope::metrics {

// Names accepted by --analyses. "compositional": per-head means, distance matrices, dispersion
// (spec 1-2); "heads": reversal rates, MDS/clustering/ARI, regime predictor (spec 3, 4, 7;
// needs compositional); the P2 names of spec 8; "value" (analyze only: needs hidden states).
const std::vector<std::string>& pipeline_analysis_names();

struct PipelineOptions {
    std::vector<std::string> analyses;  // empty = every analysis the caller supports
    HeadOptions head;
    HeadAnalysisOptions head_analyses;
    P2Options p2;
};

struct PipelineSelection {
    bool compositional = false, heads = false, p2 = false, value = false;
    std::string p2_list;  // comma-separated P2 analyses for P2Options::analyses
};
// Validates the names; `allow_value` is false for attention files. Throws UsageError.
PipelineSelection select_analyses(const std::vector<std::string>& names, bool allow_value);

class MetricsPipeline {
public:
    MetricsPipeline(int64_t n_layers, int64_t n_heads, const PipelineOptions& options,
                    bool allow_value);
    ~MetricsPipeline();

    // sinks.csv is streamed to `path` (input, layer, sink_position; layer -1 = the model-wide
    // sink) so memory stays independent of the number of inputs. After load() the file is cut
    // back to what the saved state had written.
    void open_sinks_file(const std::filesystem::path& path);

    // One input; `tokens` ([T] strings) names keys in token specialisation (may be null).
    void add(const AttentionInput& input, const std::vector<std::string>* tokens = nullptr);
    int64_t n_inputs() const { return n_inputs_; }
    // Resolved sink positions of the first kMaxRecordedSinks inputs, for run.json (spec 9);
    // sinks.csv has all of them.
    static constexpr size_t kMaxRecordedSinks = 1000;
    const nlohmann::json& sink_positions() const { return positions_; }
    const PipelineSelection& selection() const { return selection_; }

    // Progress inside add() (head metrics by keys, section 8 by layers); empty = none.
    void set_progress(const StageProgress& fn);

    void save(BinaryWriter& w);  // flushes sinks.csv so the saved size is on disk
    void load(BinaryReader& r);

    // Finishes every accumulator and writes its tables under `dir`; adds the fields of spec 9
    // that belong to these analyses to `record` and prints the human summaries on `log`.
    void write(const std::filesystem::path& dir, const std::string& model_name,
               nlohmann::json& record, std::ostream& log);

private:
    int64_t n_layers_, n_heads_;
    PipelineOptions options_;
    PipelineSelection selection_;
    std::unique_ptr<HeadAccumulator> head_;
    std::unique_ptr<P2Accumulator> p2_;
    int64_t n_inputs_ = 0;
    std::filesystem::path sinks_path_;
    std::ofstream sinks_;
    uint64_t sinks_bytes_ = 0;  // bytes of sinks.csv covered by the loaded state
    nlohmann::json positions_ = nlohmann::json::array();
};

// Tables of the compositional results: heads.csv/.jsonl (long format), distances/<name>.npy,
// distances.csv, dispersion.csv/.jsonl.
void write_head_results(const HeadResults& r, const std::string& model_name,
                        const std::filesystem::path& dir);
// run.json fields of the compositional results (aggregation conventions, counts, rho).
nlohmann::json head_results_record(const HeadResults& r);

}  // namespace sinkscope::metrics
