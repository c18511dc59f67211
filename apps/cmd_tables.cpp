// `sinkscope tables`: binds the options of api::PaperTablesOptions and runs the command.
#include <iostream>

#include "command.hpp"
#include "sinkscope/api/paper_tables.hpp"
#include "vocabulary.hpp"

namespace {

sinkscope::cli::Registrar registrar("tables", 45, [](CLI::App& app) {
    auto opts = std::make_shared<sinkscope::api::PaperTablesOptions>();
    CLI::App* cmd = app.add_subcommand(
        "tables",
        "Write the compositional paper's (P1) result tables from finished runs: reversal rates "
        "with intervals, ARI with and without the sink, pruning against the random baseline, the "
        "entropy-collapse split and the regime predictor's verdicts; and the reference-frame "
        "paper's (P2): region tables (topology, spectra, KL reduction, sink concentration, "
        "tokens, Fisher norms, value space) and the Fiedler correlation flips; as CSV, Markdown "
        "and LaTeX");
    cmd->add_option("runs", opts->runs,
                    "Run directories: analyze and metrics (reversal, ARI, P2's region and "
                    "correlation tables), prune (pruning), dynamics (entropy split), compare "
                    "(regime), fisher (P2's Fisher table); others are skipped with a warning")
        ->required()
        ->expected(1, -1);
    sinkscope::cli::add_out_option(cmd, opts->out);
    sinkscope::cli::add_overwrite_flag(cmd, opts->overwrite);
    cmd->callback([opts] {
        opts->command_line = sinkscope::cli::command_line();
        sinkscope::api::run_tables_command(*opts, std::cout);
    });
});

}  // namespace
