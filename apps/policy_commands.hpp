// The subcommands that run a model or the metric suite, which start with the run-time policy of
// core/allocator.hpp (idle threads that sleep, malloc on huge pages). Read by the launcher
// (launcher.cpp) and by sinkscope-main's preinit function (main.cpp), both before any static
// initialiser has run, so the list cannot come from the subcommand registry (command.hpp): a new
// subcommand of that kind adds its name here. `metrics` on the 1,024-head file of
// bench/compare_python.py: 15.3-15.8 -> 14.3-14.8 s CPU with the policy (bench/README.md).
#pragma once

namespace sinkscope::cli {

// Whether argv[1] is one of `commands`. Plain code: callable before the C library is
// initialised.
template <int N>
inline bool is_subcommand(int argc, char** argv, const char* const (&commands)[N]) {
    if (argc < 2) return false;
    for (const char* c : commands)
        if (__builtin_strcmp(argv[1], c) == 0) return true;
    return false;
}

inline bool takes_runtime_policy(int argc, char** argv) {
    static const char* const kCommands[] = {"analyze",    "prune",    "fisher",
                                            "dynamics",   "train",    "dump",
                                            "perplexity", "generate", "metrics"};
    return is_subcommand(argc, argv, kCommands);
}

// The subcommands sinkscope-lite has (apps/CMakeLists.txt: cmd_*.cpp, the ones that run no
// model); the launcher starts them there, without libtorch.
inline bool runs_without_torch(int argc, char** argv) {
    static const char* const kCommands[] = {"compare", "metrics", "report", "tables", "theorem1"};
    return is_subcommand(argc, argv, kCommands);
}

}  // namespace sinkscope::cli
