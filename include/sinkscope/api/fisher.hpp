// `fisher` as a library function: the diagonal Fisher information of a model's parameters on a
// data set (spec section 8, Fisher; analysis/fisher.hpp), by tensor, layer, component and head.
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

struct FisherCommandOptions {
    ModelCliOptions m;
    std::string data;                  // text (decoders, encoders) or images (ViT)
    std::string text_column = "text";  // CSV column
    std::string kind = "empirical";    // empirical | true
    // "ruscio2025": also the released notebook's name-based grouping (analysis/fisher.hpp)
    std::string compat;
    int64_t samples = 0;  // N samples of the data (0: all)
    int64_t draws = 1;    // --kind true: label draws per sample
    // Label draws and encoders' masks (unset: analysis::FisherOptions' seed); set, `samples` are
    // also a random subset drawn with it.
    std::optional<uint64_t> seed;
    double mask_rate = 0.15;   // encoders: share of tokens masked
    int64_t max_tokens = 512;  // inputs are cut to this many tokens (0: no cut)
    std::string out;
    bool overwrite = false;
    bool resume = false;
    int64_t checkpoint_every = 1;   // save the sums every K samples
    std::string progress = "auto";  // auto | always | never
    std::string command_line;       // recorded in run.json
    // Called after each sample with the number of samples done (tests interrupt here).
    std::function<void(int64_t)> after_sample;
    // Several processes (distributed.hpp): each rank sums its contiguous shard of the samples;
    // rank 0 adds the ranks' sums in rank order and writes the outputs.
    DistOptions dist;
    // Set (RunFiles::in_memory(), the Python bindings without out=): the tables and run.json go
    // there instead of into `out`, which is neither checked nor written; nothing touches the disk
    // (no saved state, so no resume; no report.html).
    std::optional<RunFiles> memory;
};

// Writes <out>/{fisher.csv, fisher_tensors.csv, run.json, report.html} (staged: a failure leaves
// no output; an interrupted run keeps its sums for --resume). Returns the output directory (empty
// at ranks other than 0, which write nothing, and for a run in memory).
std::string run_fisher(const FisherCommandOptions& o, std::ostream& log);

}  // namespace sinkscope::api
