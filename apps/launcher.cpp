// `sinkscope` as users start it: a small program without libtorch that starts sinkscope-main
// from its own folder (or, for the subcommands that run no model, sinkscope-lite, the same
// program without libtorch, where the build made one), with the same arguments and, for the
// commands that run a model or the metric suite (policy_commands.hpp), the environment plus the
// run-time policy it lacks (core/allocator.hpp: these variables take effect only in a process
// that starts with them).
// Started directly, sinkscope-main restarts itself once to get them, which costs a second loading
// of libtorch's ~290 shared libraries (0.3 s); from here the policy costs nothing.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "policy_commands.hpp"
#include "sinkscope/core/allocator.hpp"

int main(int argc, char** argv, char** envp) {
    // This file's path, however it was started (a symlink, PATH): the programs lie beside it.
    std::string exe;
    std::vector<char> path(4096);
    const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size() - 1);
    exe = n > 0 ? std::string(path.data(), static_cast<size_t>(n)) : std::string(argv[0]);
    const size_t slash = exe.rfind('/');
    const std::string dir = slash == std::string::npos ? std::string() : exe.substr(0, slash + 1);
    exe = dir + "sinkscope-main";
    if (sinkscope::cli::runs_without_torch(argc, argv) &&
        ::access((dir + "sinkscope-lite").c_str(), X_OK) == 0)
        exe = dir + "sinkscope-lite";
    std::vector<char*> env(sinkscope::environment_size(envp) + sinkscope::kRuntimePolicySize + 1);
    const bool policy = sinkscope::cli::takes_runtime_policy(argc, argv);
    if (policy) sinkscope::add_runtime_policy(envp, env.data());
    ::execve(exe.c_str(), argv, policy ? env.data() : envp);
    std::fprintf(stderr, "sinkscope: cannot start %s: %s\n", exe.c_str(), std::strerror(errno));
    return 127;
}
