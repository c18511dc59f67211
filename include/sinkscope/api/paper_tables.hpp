// `sinkscope tables`: the compositional paper's (P1) result tables from finished run directories
// (analyze, metrics, prune, dynamics, compare): reversal rates with intervals, ARI with and
// without the sink, the pruning table with its random baseline, the entropy-collapse split and
// the regime predictor's verdicts; and the reference-frame paper's (P2) from analyze, metrics
// and fisher runs: region tables (regions.csv, docs/metrics.md) and the Fiedler correlation
// flips (graphs.csv); each as CSV, Markdown and LaTeX. Reads run.json and the CSV
// tables only: no model, no torch.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "sinkscope/io/table.hpp"
#include "sinkscope/report/text_tables.hpp"

namespace sinkscope::api {

struct PaperTablesOptions {
    std::vector<std::string> runs;  // run directories as given
    std::filesystem::path out = "runs/tables";
    bool overwrite = false;    // replace an earlier sinkscope result at `out`
    std::string command_line;  // for run.json
};

// One result table: its rows (full precision, as the runs wrote them) and how it is shown as
// text (name, caption, the columns shown as intervals).
struct PaperTable {
    report::TextTableFormat format;
    io::Table table;
    std::string source;             // where its rows come from, for the console and run.json
    std::vector<std::string> runs;  // the runs (as given) that gave rows
};

// What was read: each run argument, its subcommand, its model, and the files the tables came
// from; runs of other subcommands are listed as skipped with a warning.
struct PaperTablesInput {
    struct Run {
        std::string path, subcommand, model;
        std::vector<std::string> files;  // the run's tables that gave rows
        bool skipped = false;
    };
    std::vector<Run> runs;
    std::vector<std::string> warnings;
};

// The tables in their order (p1_reversal, p1_ari, p1_pruning, p1_entropy_collapse,
// p1_regime; p2_topology, p2_spectral, p2_kl_reduction, p2_sink_concentration, p2_tokens,
// p2_fisher, p2_correlation_flips, p2_value_space), empty ones included, from the runs; throws
// InputError naming the file on a missing run directory, one without run.json, a damaged run.json
// or CSV.
std::vector<PaperTable> collect_paper_tables(const std::vector<std::string>& runs,
                                             PaperTablesInput& input);

// Runs the command: reads every run first, then writes <name>.csv, .md and .tex of each table
// with rows, tables.md and tables.tex (all of them, in order) and run.json into `out` (all or
// nothing; UsageError when no table has a row). One console line per table.
void run_tables_command(const PaperTablesOptions& options, std::ostream& log);

}  // namespace sinkscope::api
