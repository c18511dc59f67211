// sinkscope command line: parses the subcommand and maps library errors to one line + exit code.
#include <algorithm>
#include <cstdio>
#include <exception>

#include "command.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/system.hpp"

namespace sinkscope::cli {

std::vector<Command>& registry() {
    static std::vector<Command> commands;
    return commands;
}

static std::string g_command_line;
const std::string& command_line() { return g_command_line; }

}  // namespace sinkscope::cli

int main(int argc, char** argv) {
    using namespace sinkscope;
    for (int i = 0; i < argc; ++i) cli::g_command_line += (i ? " " : "") + std::string(argv[i]);

    CLI::App app{
        "sinkscope: what attention is doing around attention sinks.\n"
        "Runs checkpoints or reads attention dumps and computes the compositional (Aitchison)\n"
        "and reference-frame analyses of spec/METRICS.md, with every convention recorded.",
        "sinkscope"};
    app.set_version_flag("--version", version_string() + " (" + git_commit() + ")");
    app.require_subcommand(1);
    auto& commands = cli::registry();
    std::sort(commands.begin(), commands.end(),
              [](const auto& a, const auto& b) { return a.order < b.order; });
    for (auto& c : commands) c.setup(app);

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        // One line, like every other error (CLI11 would add a second "Run with --help" line).
        std::fprintf(stderr, "sinkscope: error: %s (see sinkscope --help)\n", e.what());
        return static_cast<int>(ErrorKind::Usage);
    } catch (const Error& e) {
        std::fprintf(stderr, "sinkscope: error: %s\n", e.what());
        return e.exit_code();
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "sinkscope: error: out of memory\n");
        return 6;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sinkscope: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
