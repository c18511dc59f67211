// `sinkscope analyze`: binds analysis::AnalyzeOptions and runs the whole analysis of a checkpoint.
#include <iostream>

#include "analysis_options.hpp"
#include "command.hpp"
#include "model_options.hpp"
#include "sinkscope/analysis/analyze.hpp"

namespace {

sinkscope::cli::Registrar registrar("analyze", 10, [](CLI::App& app) {
    auto o = std::make_shared<sinkscope::analysis::AnalyzeOptions>();
    CLI::App* cmd = app.add_subcommand(
        "analyze",
        "Run a checkpoint over a prompt set and compute every analysis (spec sections 1-4, 7, 8): "
        "tables, run.json and an interactive report.html");
    sinkscope::cli::add_model_options(cmd, o->m);
    cmd->add_option("--data", o->data,
                    "Prompts: .txt (one per line), .jsonl (text or ids), .csv (--text-column), "
                    ".npy token ids; default: the built-in set of 211 English sentences. Vision "
                    "models: a .png, a directory of .png files or a .npy image stack")
        ->check(CLI::ExistingPath);
    cmd->add_option("--text-column", o->text_column, "CSV column holding the text")->capture_default_str();
    cmd->add_option("--out", o->out, "Output directory (written whole at the end)")->capture_default_str();
    sinkscope::cli::add_overwrite_flag(cmd, o->overwrite);
    cmd->add_option("--max-tokens", o->max_tokens, "Truncate every input to this many tokens")
        ->capture_default_str();
    cmd->add_option("--samples", o->samples, "Use the first N samples (0: all)")->capture_default_str();
    sinkscope::cli::add_shared_analysis_flags(
        cmd,
        {&o->analyses, &o->head, &o->compat, &o->per_head, &o->symmetrize,
         &o->topology_max_tokens},
        "Comma-separated analyses (default all): compositional, heads, graphs, topology, kl, "
        "spectra, entropy, tokens, frame, value");
    cmd->add_option("--sink", o->sink,
                    "Sink policy: auto (first for decoders, argmax for encoders), first, bos, "
                    "argmax or a key position")
        ->capture_default_str();
    cmd->add_option("--min-parts", o->min_parts, "Rows with fewer visible keys are excluded")
        ->capture_default_str();
    cmd->add_option("--scope", o->scope, "Head pairs compared: model or layer")->capture_default_str();
    cmd->add_flag("--resume", o->resume,
                  "Continue an interrupted run of the same command from its last saved state");
    cmd->add_option("--attention-memory-mb", o->attention_memory_mb,
                    "Store one input's fp64 attention up to this size; longer inputs have their "
                    "rows recomputed in blocks from the captured rotated queries and keys")
        ->capture_default_str();
    cmd->add_option("--checkpoint-every", o->checkpoint_every,
                    "Save the accumulator state every K inputs")
        ->capture_default_str();
    cmd->add_option("--progress", o->progress,
                    "Progress line on stderr: auto (when stderr is a terminal), always, never")
        ->capture_default_str();
    cmd->add_flag_callback("--quiet", [o] { o->progress = "never"; }, "Same as --progress never");
    cmd->add_flag_callback("--no-report", [o] { o->report = false; }, "Skip report.html");
    cmd->add_option("--debug-kill-after", o->debug_kill_after,
                    "Testing: kill the process with SIGKILL after N inputs")
        ->group("");
    cmd->callback([o] {
        o->command_line = sinkscope::cli::command_line();
        sinkscope::analysis::run_analyze(*o, std::cout);
    });
});

}  // namespace
