// `sinkscope metrics`: the compositional metrics of spec sections 1-2 on attention dumped by any
// framework. The CLI (apps/cmd_metrics.cpp) only binds these options; defaults live here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "sinkscope/io/npy.hpp"
#include "sinkscope/metrics/head_analyses.hpp"

namespace sinkscope::metrics {

struct MetricsCommandOptions {
    std::filesystem::path attention;  // .npy (N, L, H, T, T) or (L, H, T, T); f2/f4/f8
    std::filesystem::path scores;     // optional pre-softmax scores, same shape, masked = -inf
    std::filesystem::path lengths;    // optional (N,) real lengths of padded encoder inputs
    std::filesystem::path token_ids;  // optional (N, T) token ids (bos sink policy)
    std::string masking = "auto";     // auto | causal | bidirectional
    int64_t window = 0;               // sliding window of causal attention, 0 = none
    std::string sink = "auto";        // auto | first | bos | argmax | key position
    int64_t bos_id = -1;              // token id of BOS/CLS for --sink bos
    std::string zeros = "error";      // error | replace:DELTA
    int64_t min_parts = 3;
    std::string scope = "model";  // model | layer
    // Empty or "all": every analysis on attention (compositional, heads and the section 8
    // analyses); see pipeline_analysis_names().
    std::vector<std::string> analyses;
    HeadAnalysisOptions head;          // --k --triples --seed --regime-lo --regime-hi
    std::string compat;                // section 8: "" (principled) or "ruscio2025"
    bool per_head = false;             // section 8 per head as well as head-averaged
    std::string symmetrize = "max";    // persistent-homology distance
    int64_t topology_max_tokens = 256;  // see P2Options
    std::filesystem::path tokens;      // JSONL: one array of token strings per input
    int threads = 0;            // threads for the pairwise loops, 0 = all cores
    bool example = false;       // generate the example tensor instead of --attention
    std::filesystem::path out;  // output directory (written whole or not at all)
    bool overwrite = false;     // replace an earlier sinkscope run at `out` (core/output_dir.hpp)
    std::string command_line;   // for run.json
};


// Runs the command: reads and validates, streams inputs through the head accumulators, writes
// heads.csv/.jsonl, distances/<name>.npy, distances.csv, dispersion.csv/.jsonl, sinks.csv and
// run.json into `out`, and prints a short summary on `log`.
void run_metrics_command(const MetricsCommandOptions& options, std::ostream& log);

// The deterministic example: 8 inputs x 4 layers x 4 heads x 16 tokens, causal, f4; softmax of
// seeded Gaussian logits with a strong first-token sink whose strength varies by layer and head.
io::NpyArray make_example_attention();

}  // namespace sinkscope::metrics
