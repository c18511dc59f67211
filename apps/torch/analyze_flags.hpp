// The flags of one analysis run over a prompt set, shared by `analyze` (one checkpoint) and
// `dynamics` (the same run for every checkpoint of a series).
#pragma once

#include <memory>

#include <CLI/CLI.hpp>

#include "analysis_options.hpp"
#include "command.hpp"
#include "model_options.hpp"
#include "sinkscope/api/analyze.hpp"
#include "vocabulary.hpp"

namespace sinkscope::cli {

// Data, truncation, analysis options, saved states, progress and report; `out_how` says how
// --out is written.
inline void add_analyze_run_flags(CLI::App* cmd, const std::shared_ptr<api::AnalyzeOptions>& o,
                                  const char* out_how = kWrittenWhole) {
    add_over_context_option(cmd, o->m);
    add_data_option(cmd, o->data, false)->default_str("built-in");
    add_text_column_option(cmd, o->text_column);
    cmd->add_option("--keep-columns", o->keep_columns,
                    "Data columns (CSV columns or JSONL fields, comma-separated) copied into "
                    "every per-input table beside the input's row in the data file")
        ->delimiter(',');
    add_out_option(cmd, o->out, out_how);
    add_overwrite_flag(cmd, o->overwrite);
    add_max_tokens_option(cmd, o->max_tokens);
    add_samples_option(cmd, o->samples);
    add_analysis_flags(cmd, o->analysis, AnalysisInput::Model);
    add_intervene_option(cmd, o->intervene);
    add_resume_flag(cmd, o->resume);
    cmd->add_option("--attention-memory-mb", o->attention_memory_mb,
                    "Keep one input's attention (pattern and scores counted as fp64) up to this "
                    "size; longer inputs have their rows recomputed in blocks from the captured "
                    "rotated queries and keys")
        ->capture_default_str();
    cmd->add_option("--checkpoint-every", o->checkpoint_every,
                    "Save the accumulator state every K inputs")
        ->capture_default_str();
    add_progress_options(cmd, o->progress);
    cmd->add_flag_callback(
        "--no-report", [o] { o->report = false; }, "Skip report.html");
}

}  // namespace sinkscope::cli
