// `sinkscope metrics`: every analysis on attention dumped by any framework. The CLI
// (apps/cmd_metrics.cpp) binds these options; the defaults of the analyses live in
// analysis::AnalysisOptions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "sinkscope/analysis/attention_file.hpp"
#include "sinkscope/analysis/options.hpp"
#include "sinkscope/analysis/pipeline.hpp"
#include "sinkscope/core/progress.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/table.hpp"

namespace sinkscope::api {

struct MetricsCommandOptions {
    std::filesystem::path attention;  // .npy (N, L, H, T, T) or (L, H, T, T); f2/f4/f8
    std::filesystem::path scores;     // optional pre-softmax scores, same shape, masked = -inf
    std::filesystem::path lengths;    // optional (N,) real lengths of padded encoder inputs
    std::filesystem::path token_ids;  // optional (N, T) token ids (bos sink policy)
    std::string masking = "auto";     // auto | causal | bidirectional
    int64_t window = 0;               // sliding window of causal attention, 0 = none
    analysis::AnalysisOptions analysis;
    std::filesystem::path tokens;  // JSONL: one array of token strings per input
    bool example = false;          // generate the example tensor instead of --attention
    std::filesystem::path out;     // output directory (written whole or not at all)
    bool overwrite = false;    // replace an earlier sinkscope run at `out` (core/output_dir.hpp)
    bool report = true;        // write report.html (as analyze does)
    std::string command_line;  // for run.json
    // In-memory inputs instead of the files above (the Python bindings; moved from, so the
    // options are used once). Set: `attention`, `scores`, `lengths`, `token_ids` stay empty.
    analysis::AttentionArrays* arrays = nullptr;
    std::vector<std::vector<std::string>> token_strings;  // instead of `tokens` (arrays only)
    std::string name;  // the model column (empty: the attention file's stem)
    Progress::Mode progress = Progress::Mode::Auto;
    std::function<void(int64_t)> after_input;  // called after each input (n inputs done)
};

// What one run of the analyses produced, in memory.
struct MetricsRun {
    analysis::PipelineResults results;  // every analysis' tables, arrays and run.json fields
    std::vector<std::pair<std::string, io::Table>> streams;  // sinks and <table>_per_input
};

// Runs the command: reads and validates, streams inputs through the analyses, writes their
// tables, arrays, sinks.csv and run.json into `out` (all or nothing), and prints a short summary
// on `log`. Returns the results it wrote.
MetricsRun run_metrics_command(const MetricsCommandOptions& options, std::ostream& log);

// The same analyses on in-memory arrays without a run directory (the Python bindings): nothing
// touches the disk; the streamed tables are collected in memory.
MetricsRun compute_metrics(analysis::AttentionArrays arrays,
                           std::vector<std::vector<std::string>> token_strings,
                           const analysis::AnalysisOptions& options, const std::string& name,
                           const std::function<void(int64_t)>& after_input = {});

// The deterministic example: 8 inputs x 4 layers x 4 heads x 16 tokens, causal, f4; softmax of
// seeded Gaussian logits with a strong first-token sink whose strength varies by layer and head.
io::NpyArray make_example_attention();

}  // namespace sinkscope::api
