// Subcommand registry: each apps/cmd_*.cpp registers itself with one static Registrar, so a new
// subcommand is one new file. One exception: a subcommand that runs a model also adds its name
// to model_commands.hpp (the run-time policy), which is read before any static initialiser has
// run and so cannot come from this registry.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace sinkscope::cli {

struct Command {
    std::string name;
    int order;                             // position in `sinkscope --help`
    std::function<void(CLI::App&)> setup;  // adds the subcommand, its options and callback
};

std::vector<Command>& registry();

struct Registrar {
    Registrar(std::string name, int order, std::function<void(CLI::App&)> setup) {
        registry().push_back({std::move(name), order, std::move(setup)});
    }
};

// The full command line, for run.json.
const std::string& command_line();

// --overwrite, the same for every command that writes (rules in core/output_dir.hpp).
inline void add_overwrite_flag(CLI::App* cmd, bool& overwrite, const std::string& what = "--out") {
    cmd->add_flag("--overwrite", overwrite,
                  "Replace an earlier sinkscope result at " + what +
                      " (only the files sinkscope wrote there, listed in its run_files.json; "
                      "anything else there is kept; without it an existing non-empty " +
                      what + " is refused and left untouched)");
}

}  // namespace sinkscope::cli
