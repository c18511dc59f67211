// `sinkscope compare`: binds the options of api::CompareOptions and runs the command.
#include <iostream>

#include "command.hpp"
#include "sinkscope/api/compare.hpp"
#include "vocabulary.hpp"

namespace {

sinkscope::cli::Registrar registrar("compare", 40, [](CLI::App& app) {
    auto opts = std::make_shared<sinkscope::api::CompareOptions>();
    CLI::App* cmd = app.add_subcommand(
        "compare",
        "Join finished runs (analyze, dynamics, prune, fisher) into cross-model tables and "
        "figures, and test the regime predictor: thresholds fitted on some runs, applied "
        "unchanged to the others");
    cmd->add_option("runs", opts->runs,
                    "Run directories; a dynamics run stands for every checkpoint it analysed")
        ->required()
        ->expected(1, -1);
    sinkscope::cli::add_out_option(cmd, opts->out);
    sinkscope::cli::add_overwrite_flag(cmd, opts->overwrite);
    cmd->add_option("--fit", opts->fit,
                    "Runs (named as given above) on which the regime thresholds lo/hi are chosen; "
                    "without it the defaults 0.2 / 0.5 are used")
        ->expected(1, -1);
    cmd->add_option("--apply", opts->apply,
                    "Runs (named as given above) the chosen thresholds are applied to and scored "
                    "on (default: every run not given to --fit)")
        ->expected(1, -1);
    cmd->add_flag("--allow-mixed", opts->allow_mixed,
                  "Compare runs whose inputs or conventions differ (the differences are listed "
                  "in run.json and the report) instead of refusing them");
    cmd->add_flag_callback(
        "--no-report", [opts] { opts->report = false; }, "Skip report.html");
    cmd->callback([opts] {
        opts->command_line = sinkscope::cli::command_line();
        sinkscope::api::run_compare_command(*opts, std::cout);
    });
});

}  // namespace
