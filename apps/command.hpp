// Subcommand registry: each apps/cmd_*.cpp registers itself with one static Registrar, so a new
// subcommand is one new file. One exception: a subcommand that runs a model also adds its name
// to policy_commands.hpp (the run-time policy), which is read before any static initialiser has
// run and so cannot come from this registry.
#pragma once

#include <filesystem>
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

// CLI::ExistingFile, ExistingDirectory and ExistingPath (same names in --help), except that a
// path the system cannot look at says why (a symbolic link loop, no permission) instead of
// "does not exist" (issue 46 item 10); `expected`, when given, follows a missing path's message.
enum class Existing { File, Directory, Path };
inline CLI::Validator existing(Existing kind, std::string expected = {}) {
    const char* const name = kind == Existing::File        ? "FILE"
                             : kind == Existing::Directory ? "DIR"
                                                           : "PATH(existing)";
    return CLI::Validator(
        [kind, expected](std::string& path) -> std::string {
            namespace fs = std::filesystem;
            std::error_code ec;
            const fs::file_status st = fs::status(path, ec);
            if (ec && ec != std::errc::no_such_file_or_directory &&
                ec != std::errc::not_a_directory)
                return path + ": " + ec.message();
            if (!fs::exists(st))
                return "Path does not exist: " + path +
                       (expected.empty() ? "" : " (expected " + expected + ")");
            if (kind == Existing::File && fs::is_directory(st))
                return "File is actually a directory: " + path;
            if (kind == Existing::Directory && !fs::is_directory(st))
                return "Directory is actually a file: " + path;
            return "";
        },
        name);
}

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
