// The flags of one analysis run over a prompt set, shared by `analyze` (one checkpoint) and
// `dynamics` (the same run for every checkpoint of a series).
#pragma once

#include <memory>

#include <CLI/CLI.hpp>

#include "analysis_options.hpp"
#include "command.hpp"
#include "model_options.hpp"
#include "sinkscope/api/analyze.hpp"

namespace sinkscope::cli {

// Data, truncation, analysis options, saved states, progress and report; `out_help` describes
// --out.
inline void add_analyze_run_flags(CLI::App* cmd, const std::shared_ptr<api::AnalyzeOptions>& o,
                                  const char* out_help) {
    add_over_context_option(cmd, o->m);
    cmd->add_option("--data", o->data,
                    "Prompts: .txt (one per line), .jsonl (text or ids), .csv (--text-column), "
                    ".npy token ids; default: the built-in set of 211 English sentences. Vision "
                    "models: a .png, a directory of .png files or a .npy image stack")
        ->check(existing(Existing::Path));
    cmd->add_option("--text-column", o->text_column, "CSV column holding the text")
        ->capture_default_str();
    cmd->add_option("--keep-columns", o->keep_columns,
                    "Data columns (CSV columns or JSONL fields, comma-separated) copied into "
                    "every per-input table beside the input's row in the data file")
        ->delimiter(',');
    cmd->add_option("--out", o->out, out_help)->capture_default_str();
    add_overwrite_flag(cmd, o->overwrite);
    cmd->add_option("--max-tokens", o->max_tokens, "Truncate every input to this many tokens")
        ->capture_default_str();
    cmd->add_option("--samples", o->samples,
                    "Use N samples (0: all): the first N, or with --seed a random subset")
        ->capture_default_str();
    add_analysis_flags(cmd, o->analysis, AnalysisInput::Model);
    cmd->add_flag("--resume", o->resume,
                  "Continue an interrupted run of the same command from its last saved state");
    cmd->add_option("--attention-memory-mb", o->attention_memory_mb,
                    "Keep one input's attention (pattern and scores counted as fp64) up to this "
                    "size; longer inputs have their rows recomputed in blocks from the captured "
                    "rotated queries and keys")
        ->capture_default_str();
    cmd->add_option("--checkpoint-every", o->checkpoint_every,
                    "Save the accumulator state every K inputs")
        ->capture_default_str();
    add_progress_option(cmd, o->progress);
    cmd->add_flag_callback(
        "--quiet", [o] { o->progress = "never"; }, "Same as --progress never");
    cmd->add_flag_callback(
        "--no-report", [o] { o->report = false; }, "Skip report.html");
}

}  // namespace sinkscope::cli
