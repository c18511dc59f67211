// `sinkscope analyze`: binds api::AnalyzeOptions and runs the whole analysis of a checkpoint.
#include <malloc.h>

#include <cstdio>
#include <iostream>

#include "analysis_options.hpp"
#include "command.hpp"
#include "model_options.hpp"
#include "sinkscope/api/analyze.hpp"

namespace {

sinkscope::cli::Registrar registrar("analyze", 10, [](CLI::App& app) {
    auto o = std::make_shared<sinkscope::api::AnalyzeOptions>();
    CLI::App* cmd = app.add_subcommand(
        "analyze",
        "Run a checkpoint over a prompt set and compute every analysis: tables (defined in "
        "docs/metrics.md), run.json and an interactive report.html");
    sinkscope::cli::add_model_options(cmd, o->m);
    sinkscope::cli::add_over_context_option(cmd, o->m);
    cmd->add_option("--data", o->data,
                    "Prompts: .txt (one per line), .jsonl (text or ids), .csv (--text-column), "
                    ".npy token ids; default: the built-in set of 211 English sentences. Vision "
                    "models: a .png, a directory of .png files or a .npy image stack")
        ->check(CLI::ExistingPath);
    cmd->add_option("--text-column", o->text_column, "CSV column holding the text")
        ->capture_default_str();
    cmd->add_option("--out", o->out, "Output directory (written whole at the end)")
        ->capture_default_str();
    sinkscope::cli::add_overwrite_flag(cmd, o->overwrite);
    cmd->add_option("--max-tokens", o->max_tokens, "Truncate every input to this many tokens")
        ->capture_default_str();
    cmd->add_option("--samples", o->samples,
                    "Use N samples (0: all): the first N, or with --seed a random subset")
        ->capture_default_str();
    sinkscope::cli::add_analysis_flags(cmd, o->analysis, sinkscope::cli::AnalysisInput::Model);
    cmd->add_flag("--resume", o->resume,
                  "Continue an interrupted run of the same command from its last saved state");
    cmd->add_option("--attention-memory-mb", o->attention_memory_mb,
                    "Store one input's fp64 attention up to this size; longer inputs have their "
                    "rows recomputed in blocks from the captured rotated queries and keys")
        ->capture_default_str();
    cmd->add_option("--checkpoint-every", o->checkpoint_every,
                    "Save the accumulator state every K inputs")
        ->capture_default_str();
    sinkscope::cli::add_progress_option(cmd, o->progress);
    cmd->add_flag_callback(
        "--quiet", [o] { o->progress = "never"; }, "Same as --progress never");
    cmd->add_flag_callback(
        "--no-report", [o] { o->report = false; }, "Skip report.html");
    auto kill_after = sinkscope::cli::add_debug_kill_after(cmd, "inputs");
    cmd->callback([o, kill_after] {
        o->command_line = sinkscope::cli::command_line();
        sinkscope::cli::say_how_to_resume_on_interrupt(o->command_line);
        o->after_input = sinkscope::cli::kill_after_hook(*kill_after);
        // Buffers of long inputs (hidden states, values, row blocks: tens of MB each) come and
        // go once per input. glibc raises its mmap threshold after the first such free and then
        // keeps freed buffers in the heap, so peak RSS would carry every phase's buffers; a
        // fixed threshold returns them to the system when freed.
        mallopt(M_MMAP_THRESHOLD, 4 << 20);
        sinkscope::api::run_analyze(*o, std::cout);
    });
});

}  // namespace
