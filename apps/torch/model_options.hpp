// CLI flags every model subcommand shares (one definition for inspect, generate, perplexity,
// dump and analyze).
#pragma once

#include <signal.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "sinkscope/api/model_commands.hpp"

namespace sinkscope::cli {

inline void add_model_options(CLI::App* sub, api::ModelCliOptions& m, bool with_bos = true) {
    sub->add_option("--model", m.model, "HF directory, .gguf or llama2.c .bin")->required();
    if (with_bos)
        sub->add_option("--bos", m.bos, "BOS policy: default (the tokenizer's config) | always | never")
            ->capture_default_str();
    sub->add_option("--device", m.device, "cpu | cuda")->capture_default_str();
    sub->add_option("--dtype", m.dtype, "float32 | bfloat16 | float16 | float64")
        ->capture_default_str();
    sub->add_option("--tokenizer", m.tokenizer, "Tokenizer file (llama2.c tok*.bin)");
    sub->add_option("--threads", m.threads,
                    "Threads of the model runtime and the analyses (0 = all cores)")
        ->capture_default_str();
}

// --progress of the resumable commands (parsed by api::parse_progress_mode).
inline void add_progress_option(CLI::App* cmd, std::string& progress) {
    cmd->add_option("--progress", progress,
                    "Progress line on stderr: auto (when stderr is a terminal), always, never")
        ->capture_default_str();
}

// Hidden --debug-kill-after N for the resume tests: the returned value is read in the command's
// callback by kill_after_hook().
inline std::shared_ptr<int64_t> add_debug_kill_after(CLI::App* cmd, const std::string& unit) {
    auto n = std::make_shared<int64_t>(0);
    cmd->add_option("--debug-kill-after", *n,
                    "Testing: kill the process with SIGKILL after N " + unit)
        ->group("");
    return n;
}
// The api's after-each-unit callback that kills the process after the n-th unit (none: n <= 0).
inline std::function<void(int64_t)> kill_after_hook(int64_t n) {
    if (n <= 0) return {};
    return [n](int64_t done) {
        if (done != n) return;
        std::fflush(nullptr);
        ::raise(SIGKILL);
    };
}

}  // namespace sinkscope::cli
