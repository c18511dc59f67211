// `sinkscope analyze`: binds api::AnalyzeOptions and runs the whole analysis of a checkpoint.
#include <cstdio>
#include <iostream>

#include "analyze_flags.hpp"
#include "command.hpp"
#include "sinkscope/api/analyze.hpp"

namespace {

sinkscope::cli::Registrar registrar("analyze", 10, [](CLI::App& app) {
    auto o = std::make_shared<sinkscope::api::AnalyzeOptions>();
    CLI::App* cmd = app.add_subcommand(
        "analyze",
        "Run a checkpoint over a prompt set and compute every analysis: tables (defined in "
        "docs/metrics.md), run.json and an interactive report.html; without --data, the "
        "built-in set of 211 English sentences");
    sinkscope::cli::add_model_options(cmd, o->m);
    sinkscope::cli::add_analyze_run_flags(cmd, o);
    cmd->add_option("--layers", o->layers,
                    "Analyse these layers only (indices from 0 and ranges, e.g. 0,5,10-12; "
                    "default all): the forward runs every layer, the analyses read the chosen "
                    "ones, and the tables name them by their index in the model");
    cmd->add_option("--checkpoint", o->checkpoint,
                    "Label written in the checkpoint column of every table and in run.json");
    sinkscope::cli::add_distributed_flags(cmd, o->dist);
    cmd->add_option("--split", o->split,
                    "What the processes of a distributed run share: inputs (each its share of "
                    "the inputs, each holding the whole model) or layers (each its share of the "
                    "model's layers, for every input: a model too large for one machine)")
        ->capture_default_str();
    cmd->add_option("--stages", o->stages,
                    "With --split layers: processes per copy of the model (each runs its share "
                    "of the layers); the world size divided by it is the number of copies, each "
                    "analysing its share of the inputs (default: the whole world, one copy)");
    auto kill_after = sinkscope::cli::add_debug_kill_after(cmd, "inputs");
    cmd->callback([o, kill_after] {
        o->command_line = sinkscope::cli::command_line();
        sinkscope::cli::say_how_to_resume_on_interrupt(o->command_line);
        o->after_input = sinkscope::cli::kill_after_hook(*kill_after);
        sinkscope::api::run_analyze(*o, std::cout);
    });
});

}  // namespace
