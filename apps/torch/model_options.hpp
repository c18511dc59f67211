// CLI flags every model subcommand shares (one definition for inspect, generate, perplexity,
// dump and analyze).
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "sinkscope/api/distributed.hpp"
#include "sinkscope/api/model_commands.hpp"
#include "sinkscope/core/error.hpp"
#include "vocabulary.hpp"

namespace sinkscope::cli {

// The model shipped with sinkscope (models/default, trained by `sinkscope train`; its README
// says how): $SINKSCOPE_DEFAULT_MODEL, else models/default beside the executable's folder
// (build/sinkscope -> models/default) or inside it, else the source tree it was built from.
inline std::string default_model_dir() {
    namespace fs = std::filesystem;
    if (const char* env = std::getenv("SINKSCOPE_DEFAULT_MODEL"); env && *env) return env;
    std::vector<fs::path> candidates;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        candidates.push_back(exe.parent_path().parent_path() / "models" / "default");
        candidates.push_back(exe.parent_path() / "models" / "default");
    }
#ifdef SINKSCOPE_DEFAULT_MODEL_DIR
    candidates.push_back(SINKSCOPE_DEFAULT_MODEL_DIR);
#endif
    for (const fs::path& c : candidates)
        if (fs::exists(c / "config.json", ec)) return c.string();
    throw UsageError(
        "--model not given and the default model (models/default of the source tree) was not "
        "found beside the executable; pass --model or set SINKSCOPE_DEFAULT_MODEL");
}

// `with_model` false: the command names its models otherwise (dynamics: a manifest).
inline void add_model_options(CLI::App* sub, api::ModelCliOptions& m, bool with_bos = true,
                              bool with_model = true) {
    if (with_model) {
        sub->add_option("--model", m.model,
                        "HF directory, .gguf or llama2.c .bin (default: the small model shipped "
                        "in models/default)")
            ->check(existing(Existing::Path,
                             "a Hugging Face model directory (config.json + model.safetensors or "
                             "pytorch_model.bin), a .gguf file or a llama2.c .bin checkpoint"));
        // Runs after this subcommand's flags are parsed and before its callback.
        sub->parse_complete_callback([&m] {
            if (!m.model.empty()) return;
            m.model = default_model_dir();
            api::print_note("no --model: using the default model " + m.model);
        });
    }
    if (with_bos)
        sub->add_option("--bos", m.bos,
                        "BOS policy: default (the tokenizer's config) | always | never")
            ->capture_default_str();
    sub->add_option("--device", m.device, "cpu | cuda")->capture_default_str();
    sub->add_option("--dtype", m.dtype, "float32 | bfloat16 | float16 | float64")
        ->capture_default_str();
    sub->add_option("--tokenizer", m.tokenizer, "Tokenizer file (llama2.c tok*.bin)")
        ->check(existing(Existing::File));
    sub->add_flag("--widen-weights", m.widen_weights,
                  "Convert every weight to --dtype at load instead of keeping bf16, f16 and "
                  "quantized matrices in the file and widening each as it is used: more memory, "
                  "no conversion in each forward; the results are identical");
    add_threads_option(sub, m.threads);
}

// --over-context of the commands that feed data to a model.
inline void add_over_context_option(CLI::App* cmd, api::ModelCliOptions& m) {
    cmd->add_option("--over-context", m.over_context,
                    "Inputs longer than the model's context (its max_position_embeddings, GGUF "
                    "context_length or llama2.c seq_len): cap (cut them to it, with a note on "
                    "the console) or refuse (stop with an input error)")
        ->capture_default_str();
}

// Several processes (api/distributed.hpp): flags over the torchrun environment.
inline void add_distributed_flags(CLI::App* cmd, api::DistOptions& d) {
    cmd->add_option("--world-size", d.world_size,
                    "Processes of a distributed run (default: WORLD_SIZE, else 1)");
    cmd->add_option("--rank", d.rank, "This process's rank in [0, world size) (default: RANK)");
    cmd->add_option("--master", d.master,
                    "HOST:PORT of rank 0's rendezvous (default: MASTER_ADDR:MASTER_PORT)");
    cmd->add_option("--dist-timeout", d.timeout_s,
                    "Seconds to wait for the other processes; a silent one ends the run")
        ->capture_default_str();
}

// Hidden --debug-kill-after N / --debug-interrupt-after N for the resume tests: the returned
// value is read in the command's callback by kill_after_hook().
struct DebugStop {
    int64_t kill_after = 0;       // SIGKILL after N units (an abrupt end: no message)
    int64_t interrupt_after = 0;  // SIGINT after N units (as Ctrl-C)
};
inline std::shared_ptr<DebugStop> add_debug_kill_after(CLI::App* cmd, const std::string& unit) {
    auto n = std::make_shared<DebugStop>();
    cmd->add_option("--debug-kill-after", n->kill_after,
                    "Testing: kill the process with SIGKILL after N " + unit)
        ->group("");
    cmd->add_option("--debug-interrupt-after", n->interrupt_after,
                    "Testing: interrupt the process with SIGINT after N " + unit)
        ->group("");
    return n;
}
// The api's after-each-unit callback that stops the process after the n-th unit (none: n <= 0).
inline std::function<void(int64_t)> kill_after_hook(const DebugStop& stop) {
    if (stop.kill_after <= 0 && stop.interrupt_after <= 0) return {};
    return [stop](int64_t done) {
        if (done != stop.kill_after && done != stop.interrupt_after) return;
        std::fflush(nullptr);
        ::raise(done == stop.kill_after ? SIGKILL : SIGINT);
    };
}

// Ctrl-C (SIGINT) or SIGTERM during a resumable command: one line saying how to continue, then
// exit 130. The state file saved every few units stays in the output's staging folder, and the
// same command with --resume continues from it. The line is composed now, because a signal
// handler may only write() and _exit().
inline void say_how_to_resume_on_interrupt(const std::string& command_line) {
    static std::string note;
    note =
        "\nsinkscope: interrupted; to continue from the last saved state, run the same "
        "command with --resume: " +
        command_line + (command_line.find(" --resume") == std::string::npos ? " --resume" : "") +
        "\n";
    struct sigaction sa {};
    sa.sa_handler = [](int) {
        ssize_t ignored = ::write(2, note.data(), note.size());
        (void)ignored;
        ::_exit(130);
    };
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace sinkscope::cli
