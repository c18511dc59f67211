// `sinkscope dynamics`: binds api::DynamicsOptions and runs every checkpoint of a manifest.
#include <iostream>

#include "analyze_flags.hpp"
#include "command.hpp"
#include "sinkscope/api/dynamics.hpp"

namespace {

sinkscope::cli::Registrar registrar("dynamics", 22, [](CLI::App& app) {
    auto o = std::make_shared<sinkscope::api::DynamicsOptions>();
    auto run = std::make_shared<sinkscope::api::AnalyzeOptions>();
    CLI::App* cmd = app.add_subcommand(
        "dynamics",
        "Run the same prompts through every checkpoint of a training run (one model in memory at "
        "a time) and follow the analyses over training: sink mass, entropy and its exact split "
        "into a sink and a content part, Sink_eps, flip rates, spectra, frame type; without "
        "--data, the built-in set of 211 English sentences");
    cmd->add_option("--checkpoints", o->manifest,
                    "Manifest of the series: JSON ({\"checkpoints\": [{\"step\", \"path\"}]}, as "
                    "`sinkscope train` writes it) or CSV with columns path and step and/or label; "
                    "relative paths are relative to the manifest")
        ->required()
        ->check(sinkscope::cli::existing(sinkscope::cli::Existing::File));
    sinkscope::cli::add_model_options(cmd, run->m, true, false);
    sinkscope::cli::add_analyze_run_flags(
        cmd, run,
        "one analysis folder per checkpoint under checkpoints/, kept as each finishes, and the "
        "tables across checkpoints");
    cmd->add_flag("--checkpoint-reports", o->checkpoint_reports,
                  "Also write report.html in every checkpoint's folder");
    sinkscope::cli::add_distributed_flags(cmd, run->dist);
    auto kill_after = sinkscope::cli::add_debug_kill_after(cmd, "checkpoints");
    cmd->callback([o, run, kill_after] {
        o->run = *run;
        o->run.command_line = sinkscope::cli::command_line();
        sinkscope::cli::say_how_to_resume_on_interrupt(o->run.command_line);
        o->after_checkpoint = sinkscope::cli::kill_after_hook(*kill_after);
        sinkscope::api::run_dynamics(*o, std::cout);
    });
});

}  // namespace
