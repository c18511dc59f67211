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
                    "without it the defaults 0.2 / 0.5 (on rho) are used")
        ->expected(1, -1);
    cmd->add_option("--apply", opts->apply,
                    "Runs (named as given above) the chosen thresholds are applied to and scored "
                    "on (default: every run not given to --fit)")
        ->expected(1, -1);
    cmd->add_option("--regime-outcome", opts->regime_outcome,
                    "What the regime predictor is scored against: pruning (the regime a prune "
                    "run of the model measured: classical-unsafe when the classical channel "
                    "inflates the measure beyond the random baseline's spread at a sparsity "
                    "while dA_perp stays within it) or flip_rate (classical-unsafe when the "
                    "pooled flip rate >= 0.15)")
        ->capture_default_str();
    cmd->add_option("--regime-statistic", opts->regime_statistic,
                    "The predictor's statistic: rho (V_b / (V_b + C_perp), 0-1) or v_b (the "
                    "variance of the heads' sink balance, nats^2; needs --fit)")
        ->capture_default_str();
    cmd->add_option("--regime-channel", opts->regime_channel,
                    "The classical prune channel whose outcome is judged (a channel of "
                    "`sinkscope prune --channels` other than dA_perp)")
        ->capture_default_str();
    cmd->add_option("--regime-min-width", opts->regime_min_width,
                    "Least width hi - lo of the fitted abstain band, in the statistic's unit, so "
                    "a fit cannot collapse it to a point")
        ->capture_default_str();
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
