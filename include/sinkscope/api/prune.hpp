// `prune` as a library function: redundancy-based head pruning with perplexity (spec section 5).
// Head distances come from the calibration set; heads are removed greedily by redundancy under
// each channel (metrics/pruning.hpp) and the pruned model's next-token perplexity is measured on
// the evaluation set, against the unpruned model and random pruning with several seeds.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "sinkscope/api/distributed.hpp"
#include "sinkscope/api/model_commands.hpp"
#include "sinkscope/core/run_files.hpp"

namespace sinkscope::api {

struct PruneOptions {
    ModelCliOptions m;
    std::string calib;                              // calibration data (head distances, mean z)
    std::string eval;                               // evaluation data (perplexity)
    std::string text_column = "text";               // CSV column of both files
    std::string channels = "js,dA_perp,dA,cosine";  // comma-separated
    std::string sparsity = "0.1,0.2,0.3";           // comma-separated fractions in (0, 1)
    std::string ablation = "zero";                  // zero | mean
    // model: round(sparsity x all heads) removed model-wide by model-wide redundancy; per-layer:
    // round(sparsity x heads per layer) removed in every layer, by redundancy within the layer.
    std::string budget = "model";
    int64_t random_seeds = 3;   // random-pruning baselines (seeds seed..seed+n-1)
    uint64_t seed = 1;          // first random-baseline seed
    int64_t max_tokens = 512;   // inputs are cut to this many tokens
    int64_t calib_samples = 0;  // 0: every calibration sample
    int64_t eval_samples = 0;   // 0: every evaluation sample
    std::string out;
    bool overwrite = false;
    bool resume = false;
    std::string progress = "auto";  // auto | always | never
    std::string command_line;       // recorded in run.json
    // Called after each evaluated point with the number of points done (tests interrupt here).
    std::function<void(int64_t)> after_point;
    // Several processes (distributed.hpp): every rank calibrates, each evaluates its contiguous
    // shard of the points, rank 0 writes the outputs.
    DistOptions dist;
    // Set (RunFiles::in_memory(), the Python bindings without out=): the tables and run.json go
    // there instead of into `out`, which is neither checked nor written; nothing touches the disk
    // (no saved state, so no resume; no report.html).
    std::optional<RunFiles> memory;
};

// Runs the experiment and writes <out>/{prune.csv, prune_random.csv, prune_order.csv, run.json,
// report.html} (staged: a failure leaves no output; an interrupted run keeps its state for
// --resume). Returns the output directory (empty at ranks other than 0, which write nothing, and
// for a run in memory).
std::string run_prune(const PruneOptions& o, std::ostream& log);

}  // namespace sinkscope::api
