// The subcommands that run a model, which start with the run-time policy of core/allocator.hpp
// (idle threads that sleep, malloc on huge pages). Read by the launcher (launcher.cpp) and by
// sinkscope-main's preinit function (main.cpp), both before any static initialiser has run, so
// the list cannot come from the subcommand registry (command.hpp): a new subcommand that runs a
// model adds its name here.
#pragma once

namespace sinkscope::cli {

// Plain code: callable before the C library is initialised.
inline bool runs_a_model(int argc, char** argv) {
    static const char* const kModelCommands[] = {"analyze", "prune", "fisher",     "dynamics",
                                                 "train",   "dump",  "perplexity", "generate"};
    if (argc < 2) return false;
    for (const char* c : kModelCommands)
        if (__builtin_strcmp(argv[1], c) == 0) return true;
    return false;
}

}  // namespace sinkscope::cli
