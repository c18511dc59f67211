// `sinkscope report`: re-renders report.html of a run directory from its tables.
#include <cstdio>

#include "command.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/report/report.hpp"

namespace sinkscope::cli {
namespace {

struct ReportOptions {
    std::string run_dir;
    bool overwrite = false;
};

Registrar reg("report", 90, [](CLI::App& app) {
    auto opts = std::make_shared<ReportOptions>();
    auto* sub =
        app.add_subcommand("report", "Re-render report.html of a run directory from its tables");
    sub->add_option(
           "--run", opts->run_dir,
           "A finished run's directory (analyze, metrics, dynamics, prune, fisher or compare)")
        ->required()
        ->check(existing(Existing::Directory));
    add_overwrite_flag(sub, opts->overwrite, "--run/report.html");
    sub->callback([opts] {
        auto path = report::write_report(opts->run_dir, opts->overwrite);
        std::printf("wrote %s\n", path.string().c_str());
    });
});

}  // namespace
}  // namespace sinkscope::cli
