// `sinkscope analyze`: one command from a checkpoint to tables, run.json and report.html. Runs the
// model over the data one input at a time, streams each input's attention (and hidden states and
// values) into the shared accumulators, saves their exact state every K inputs so an interrupted
// run resumes with identical results, and writes everything at the end.
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "sinkscope/metrics/pipeline.hpp"
#include "sinkscope/model/commands.hpp"
#include "sinkscope/metrics/value_space.hpp"

namespace sinkscope::analysis {

struct AnalyzeOptions {
    model::ModelCliOptions m;           // --model --bos --device --dtype --tokenizer --threads
    std::filesystem::path data;         // empty: the built-in prompt set
    std::string text_column = "text";   // CSV column
    std::filesystem::path out = "runs/analyze";
    bool overwrite = false;             // replace an earlier sinkscope run at `out`
    int64_t max_tokens = 128;           // inputs are truncated to this many tokens (BOS included)
    int64_t samples = 0;                // 0: all samples of the data
    std::vector<std::string> analyses;  // empty or "all": every analysis
    std::string compat;                 // "" or "ruscio2025" (spec section 8)
    std::string sink = "auto";          // auto | first | bos | argmax | position
    int64_t min_parts = 3;
    std::string scope = "model";        // model | layer
    bool per_head = false;
    std::string symmetrize = "max";
    int64_t topology_max_tokens = 256;  // see metrics::P2Options
    // One input's fp64 attention (pattern and scores, [L, H, T, T] each) is stored when it fits
    // in this many MiB; longer inputs have their rows recomputed block by block from the
    // captured rotated queries and keys (equal up to float32 rounding).
    int64_t attention_memory_mb = 1024;
    metrics::HeadAnalysisOptions head;  // --k --triples --seed --regime-lo --regime-hi
    bool resume = false;
    int64_t checkpoint_every = 25;      // inputs between saved states
    std::string progress = "auto";      // auto (when stderr is a terminal) | always | never
    bool report = true;                 // write report.html
    int64_t debug_kill_after = 0;       // tests: SIGKILL itself after this many inputs
    std::string command_line;
};

// Runs the whole analysis; prints a summary on `log`. Errors are typed (core/error.hpp).
void run_analyze(const AnalyzeOptions& options, std::ostream& log);

// Value-space table (value_space.csv/.jsonl, long format) and its run.json fields.
void write_value_space(const metrics::ValueSpaceAccumulator& acc, const std::string& model_name,
                       const std::filesystem::path& dir);

}  // namespace sinkscope::analysis
