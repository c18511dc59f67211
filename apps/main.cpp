// sinkscope command line: parses the subcommand and maps library errors to one line + exit code.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "command.hpp"
#include "policy_commands.hpp"
#include "sinkscope/core/allocator.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/fs_error.hpp"
#include "sinkscope/core/limits.hpp"
#include "sinkscope/core/system.hpp"

namespace sinkscope::cli {

std::vector<Command>& registry() {
    static std::vector<Command> commands;
    return commands;
}

static std::string g_command_line;
const std::string& command_line() {
    return g_command_line;
}

namespace {

// CLI11 reads integers with strtoll/strtoull, which saturate: "99999999999999999999" would become
// the largest value instead of an error. Every integer option is checked here first.
CLI::Validator integer_in_range(bool is_unsigned) {
    return CLI::Validator(
        [is_unsigned](std::string& v) -> std::string {
            const char* b = v.data();
            const char* e = v.data() + v.size();
            if (b != e && *b == '+') ++b;
            const bool decimal = b != e && std::all_of(b + (*b == '-'), e,
                                                       [](char c) { return c >= '0' && c <= '9'; });
            if (!decimal) return {};  // CLI11's own conversion judges other forms
            std::from_chars_result r{};
            if (is_unsigned) {
                uint64_t x = 0;
                r = std::from_chars(b, e, x);
            } else {
                int64_t x = 0;
                r = std::from_chars(b, e, x);
            }
            if (r.ec == std::errc::result_out_of_range) return v + " is out of range";
            return {};
        },
        "", "integer_in_range");
}

// What every subcommand gets: --limit, and the range check of its integer options.
void add_common_options(CLI::App* sub) {
    for (CLI::Option* opt : sub->get_options()) {
        const std::string type = opt->get_type_name();
        if (type == "INT" || type == "UINT") opt->check(integer_in_range(type == "UINT"));
    }
    sub->add_option_function<std::vector<std::string>>(
           "--limit",
           [](const std::vector<std::string>& v) {
               for (const std::string& a : v) set_limit(a);
           },
           "Raise (or lower) a limit on what an input file may make sinkscope allocate, as "
           "NAME=N; repeatable. NAME (default): " +
               [] {
                   std::string names;
                   size_t n = 0;
                   const LimitInfo* t = limit_table(&n);
                   for (size_t i = 0; i < n; ++i)
                       names += (i ? ", " : "") + std::string(t[i].name) + " (" +
                                std::to_string(t[i].default_value) + ")";
                   return names;
               }())
        ->type_name("NAME=N")
        ->group("Limits");
}

}  // namespace

}  // namespace sinkscope::cli

// The last guard of the one-line rule: whatever text reached a message unescaped (a file's bytes,
// an option value) cannot end the line or send terminal escapes, nor make it pages long.
static std::string one_line(const char* message) {
    constexpr size_t kMaxMessageBytes = 4096;
    return sinkscope::printable(message, kMaxMessageBytes);
}

static int run_command(int argc, char** argv) {
    using namespace sinkscope;
    cli::g_command_line.clear();
    for (int i = 0; i < argc; ++i) cli::g_command_line += (i ? " " : "") + std::string(argv[i]);

    CLI::App app{
        "sinkscope: what attention is doing around attention sinks.\n"
        "Runs checkpoints or reads attention dumps and computes the compositional (Aitchison)\n"
        "and reference-frame analyses, with every convention recorded. Every quantity is\n"
        "defined in docs/metrics.md; exit codes: 2 usage, 3 input, 4 unsupported, 5 I/O,\n"
        "70 internal (docs/user_guide.md).",
        "sinkscope"};
    app.set_version_flag("--version", version_string() + " (" + git_commit() + ")");
    app.require_subcommand(1);
    auto& commands = cli::registry();
    std::sort(commands.begin(), commands.end(),
              [](const auto& a, const auto& b) { return a.order < b.order; });
    for (auto& c : commands) c.setup(app);
    for (CLI::App* sub : app.get_subcommands({})) cli::add_common_options(sub);

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
        std::fprintf(stderr, "sinkscope: error: %s (see sinkscope --help)\n",
                     one_line(e.what()).c_str());
        return static_cast<int>(ErrorKind::Usage);
    } catch (const Error& e) {
        std::fprintf(stderr, "sinkscope: error: %s\n", one_line(e.what()).c_str());
        return e.exit_code();
    } catch (const std::filesystem::filesystem_error& fe) {
        const IoError e = io_error_from(fe);  // one line naming the path, not libstdc++'s text
        std::fprintf(stderr, "sinkscope: error: %s\n", one_line(e.what()).c_str());
        return e.exit_code();
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "sinkscope: error: out of memory\n");
        return 6;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sinkscope: error: %s\n", one_line(e.what()).c_str());
        return 1;
    }
    return 0;
}

// Testing only: with SINKSCOPE_TEST_BATCH set and one argument FILE, each line of FILE is one
// command line, fields
// separated by tabs: an output prefix, then the arguments. Each runs in a forked child (a fresh
// copy of this process, so one crash or exit stays its own) with stdout and stderr in
// PREFIX.out / PREFIX.err; one line per case on stdout gives its exit status (128 + N for signal
// N; 124 when it ran past SINKSCOPE_TEST_BATCH_TIMEOUT seconds, default 60, and was killed).
// Loading libtorch takes about a second per process; the CLI edge tests run hundreds of cases.
static int run_batch(const char* file, char* argv0) {
    std::ifstream in(file);
    if (!in) {
        std::fprintf(stderr, "sinkscope: error: cannot read %s\n", file);
        return 5;
    }
    const char* limit = std::getenv("SINKSCOPE_TEST_BATCH_TIMEOUT");
    const int timeout_s = limit ? std::atoi(limit) : 60;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        std::vector<std::string> fields;
        for (size_t a = 0, b; a <= line.size(); a = b + 1) {
            b = line.find('\t', a);
            if (b == std::string::npos) b = line.size();
            fields.push_back(line.substr(a, b - a));
        }
        std::fflush(nullptr);
        const pid_t pid = ::fork();
        if (pid < 0) return 5;
        if (pid == 0) {
            if (!std::freopen((fields[0] + ".out").c_str(), "w", stdout) ||
                !std::freopen((fields[0] + ".err").c_str(), "w", stderr))
                ::_exit(5);
            std::vector<char*> args{argv0};
            for (size_t i = 1; i < fields.size(); ++i) args.push_back(fields[i].data());
            args.push_back(nullptr);
            const int code = run_command(int(args.size() - 1), args.data());
            std::fflush(nullptr);
            ::_exit(code);
        }
        int status = 0, waited_ms = 0;
        while (::waitpid(pid, &status, WNOHANG) == 0) {
            if (waited_ms >= timeout_s * 1000) {
                ::kill(pid, SIGKILL);
                ::waitpid(pid, &status, 0);
                status = -1;
                break;
            }
            ::usleep(2000);
            waited_ms += 2;
        }
        const int code = status == -1          ? 124
                         : WIFEXITED(status)   ? WEXITSTATUS(status)
                         : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                               : 1;
        std::printf("%d\n", code);
        std::fflush(stdout);
    }
    return 0;
}

namespace {
// The run-time policy (idle threads, huge pages) of the commands of policy_commands.hpp when this
// executable was started without the launcher (launcher.cpp, core/allocator.hpp). Runs before
// the C library is initialised: plain code only.
void runtime_policy(int argc, char** argv, char** envp) {
    if (sinkscope::cli::takes_runtime_policy(argc, argv))
        sinkscope::restart_with_runtime_policy(argv, envp);
}
}  // namespace

[[gnu::section(".preinit_array"),
  gnu::used]] static void (*const preinit_runtime_policy)(int, char**, char**) = runtime_policy;

int main(int argc, char** argv) {
    sinkscope::set_allocator_policy();  // once, for the whole process
    if (std::getenv("SINKSCOPE_TEST_BATCH") && argc == 2) return run_batch(argv[1], argv[0]);
    return run_command(argc, argv);
}
