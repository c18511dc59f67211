// `sinkscope theorem1`: binds metrics::Theorem1Options, runs metrics::run_theorem1 and writes
// theorem1.csv and run.json (docs/metrics.md "theorem1.csv").
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>

#include "command.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/io/table.hpp"
#include "sinkscope/metrics/theorem1.hpp"
#include "vocabulary.hpp"

namespace {

namespace fs = std::filesystem;
namespace metrics = sinkscope::metrics;
namespace io = sinkscope::io;

struct Theorem1CommandOptions {
    metrics::Theorem1Options family;
    fs::path out;
    bool overwrite = false;
};

void run_theorem1_command(const Theorem1CommandOptions& o, std::ostream& log) {
    metrics::check_theorem1_options(o.family);
    sinkscope::check_output_dir(o.out, o.overwrite);
    const metrics::Theorem1Result r = metrics::run_theorem1(o.family);

    io::RunRecord record(sinkscope::cli::command_line(), 1);
    sinkscope::OutputDir out(o.out, o.overwrite);
    io::Table table({"metric", "convention", "reversal_measure", "tie_measure", "n_points",
                     "closed_form_measure"});
    for (const metrics::Theorem1Row& row : r.rows)
        table.add_row({row.metric, row.convention, row.reversal_measure, row.tie_measure,
                       row.n_points,
                       row.metric == "dA" ? r.closed_form_measure
                                          : std::numeric_limits<double>::quiet_NaN()});
    table.write(out.staging(), "theorem1", false);
    record.set("subcommand", "theorem1");
    record.set("options", {{"parts", o.family.n_parts},
                           {"grid", o.family.grid},
                           {"t_max", io::json_number(o.family.t_max)}});
    record.set("theorem1", {{"n_points", r.rows.front().n_points},
                            {"closed_form_reversed", r.closed_form_reversed},
                            {"closed_form_min_margin", io::json_number(r.closed_form_min_margin)}});
    record.write(out.staging());
    out.commit();

    const int64_t n = o.family.grid;
    log << "theorem1: D = " << o.family.n_parts << " parts, sink at part 0; " << n
        << "^3 = " << r.rows.front().n_points << " grid points (s_a, s_b in (0,1), t in (0, "
        << io::format_number(o.family.t_max) << "])\n";
    char line[160];
    for (const metrics::Theorem1Row& row : r.rows) {
        std::snprintf(line, sizeof line, "  %-10s %-5s reversal measure %.6f  ties %.6f\n",
                      row.metric.c_str(), row.convention.c_str(), row.reversal_measure,
                      row.tie_measure);
        log << line;
    }
    std::snprintf(line, sizeof line,
                  "  dA closed form (|b(a) - b(b)| > dA_perp(pi, pi_rev)): %.6f "
                  "(nearest point at relative margin %.2e)\n",
                  r.closed_form_measure, r.closed_form_min_margin);
    log << line;
    log << "wrote " << o.out.string() << "\n";
}

sinkscope::cli::Registrar registrar("theorem1", 75, [](CLI::App& app) {
    auto opts = std::make_shared<Theorem1CommandOptions>();
    CLI::App* cmd = app.add_subcommand(
        "theorem1",
        "Theorem 1 of P1 on a grid: for the triple family (anchor a, b with a's content and "
        "another sink mass, c with a's sink mass and mirrored content) the measure of the set "
        "where each row metric says c is nearer (docs/metrics.md, theorem1.csv)");
    cmd->add_option("--parts", opts->family.n_parts,
                    "D: parts of a row (the sink and D-1 content parts), 3..65536")
        ->capture_default_str();
    cmd->add_option("--grid", opts->family.grid,
                    "Cells per axis (s_a, s_b, t), 1..2048; the grid has N^3 points, the cells' "
                    "midpoints")
        ->capture_default_str();
    cmd->add_option("--t-max", opts->family.t_max, "Upper end of the content parameter t in (0, T]")
        ->capture_default_str();
    sinkscope::cli::add_out_option(cmd, opts->out);
    sinkscope::cli::add_overwrite_flag(cmd, opts->overwrite);
    cmd->callback([opts] { run_theorem1_command(*opts, std::cout); });
});

}  // namespace
