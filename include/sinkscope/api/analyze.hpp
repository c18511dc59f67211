// `sinkscope analyze`: one command from a checkpoint to tables, run.json and report.html. Runs the
// model over the data one input at a time, streams each input's attention (and hidden states and
// values) into the analysis pipeline, saves its exact state every K inputs so an interrupted run
// resumes with identical results, and writes everything at the end.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sinkscope/analysis/options.hpp"
#include "sinkscope/api/distributed.hpp"
#include "sinkscope/api/model_commands.hpp"
#include "sinkscope/core/run_files.hpp"

namespace sinkscope::api {

struct AnalyzeOptions {
    ModelCliOptions m;                 // --model --bos --device --dtype --tokenizer --threads
    std::filesystem::path data;        // empty: the built-in prompt set
    std::string text_column = "text";  // CSV column
    // Data columns (CSV columns, JSONL fields) copied into every per-input table beside the
    // input's `row` (analysis.group_by is carried too).
    std::vector<std::string> keep_columns;
    std::filesystem::path out = "runs/analyze";
    bool overwrite = false;    // replace an earlier sinkscope run at `out`
    int64_t max_tokens = 128;  // inputs are truncated to this many tokens (BOS included)
    int64_t samples = 0;       // 0: all samples of the data (analysis.seed: random subset)
    analysis::AnalysisOptions analysis;  // every analysis option; threads come from m.threads
    // One input's fp64 attention (pattern and scores, [L, H, T, T] each) is stored when it fits
    // in this many MiB; longer inputs have their rows recomputed block by block from the
    // captured rotated queries and keys (equal up to float32 rounding).
    int64_t attention_memory_mb = 1024;
    // The layers whose attention the analyses read (analysis/layers.hpp: "" or "all", or indices
    // and ranges "0,5,10-12"); the forward runs every layer, only these are captured, and every
    // output names them by their model index.
    std::string layers;
    // Edits of the forward the analyses then read (api/interventions.hpp: sink_removal,
    // sink_key, sink_value, head_ablation; ';'-separated); empty: none. Recorded in run.json.
    std::string intervene;
    bool resume = false;
    int64_t checkpoint_every = 25;  // inputs between saved states
    std::string progress = "auto";  // auto (when stderr is a terminal) | always | never
    bool report = true;             // write report.html
    std::string checkpoint;         // label of the checkpoint column and run.json (dynamics)
    std::string model_name;         // the model column; empty: the model path's last part
    // Called after each input is added (n = inputs done); the CLI's test-only
    // --debug-kill-after hooks in here.
    std::function<void(int64_t n)> after_input;
    std::string command_line;
    // Several processes (distributed.hpp): each rank analyses its contiguous shard of the inputs
    // and rank 0 merges the shards' states in rank order and writes the outputs.
    DistOptions dist;
    // What the ranks share out: "inputs" (each rank its contiguous shard of the inputs) or
    // "layers" (each rank its contiguous blocks of the model, for every input, as a pipeline;
    // rank 0 analyses and writes; api/torch/layer_ranks.hpp).
    std::string split = "inputs";
    // --split layers: ranks per pipeline (each pipeline analyses its shard of the inputs);
    // 0: the whole world is one pipeline.
    int64_t stages = 0;
    Communicator* communicator = nullptr;  // a connected one to reuse (dynamics); null: from dist
    // Set (RunFiles::in_memory(), the Python bindings without out=): the run's files go there
    // instead of into `out`, which is neither checked nor written; nothing touches the disk (no
    // saved state, so no resume; no report.html).
    std::optional<RunFiles> memory;
};

// UsageError for any option analyze would refuse (before a model loads or a file is written).
void check_analyze_options(const AnalyzeOptions& options);

// What one run_analyze did, at the rank that wrote the output (the other ranks: zeros).
struct AnalyzeSummary {
    int64_t inputs = 0;        // every input of the data
    int64_t tokens = 0;        // their tokens
    int64_t resumed = 0;       // inputs of this process's shard taken from a saved state (--resume)
    int64_t this_process = 0;  // inputs this process analysed (when resumed > 0)
    double seconds = 0;
    // "analyzed N inputs (T tokens[; a in this process, b resumed from the saved state]) in S s":
    // the console's last line without its "; wrote OUT".
    std::string line() const;
};

// Runs the whole analysis; prints a summary on `log`, whose last line is the summary's line()
// and "; wrote OUT". Errors are typed (core/error.hpp).
AnalyzeSummary run_analyze(const AnalyzeOptions& options, std::ostream& log);

}  // namespace sinkscope::api
