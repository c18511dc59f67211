// `sinkscope inspect`: architecture, dims, dtype, tokenizer, BOS policy, hooks, parameter count.
#include <cstdio>

#include "command.hpp"
#include "sinkscope/model/commands.hpp"

namespace sinkscope::cli {
namespace {

Registrar reg("inspect", 80, [](CLI::App& app) {
    auto o = std::make_shared<model::InspectOptions>();
    auto* sub = app.add_subcommand("inspect", "Describe a model: architecture, hooks, tokenizer");
    sub->add_option("--model", o->m.model, "HF directory, .gguf or llama2.c .bin")->required();
    sub->add_option("--device", o->m.device, "cpu | cuda")->capture_default_str();
    sub->add_option("--dtype", o->m.dtype, "float32 | bfloat16 | float16")->capture_default_str();
    sub->add_option("--tokenizer", o->m.tokenizer, "Tokenizer file (llama2.c tok*.bin)");
    sub->add_option("--threads", o->m.threads, "Torch threads (0 = libtorch default)")
        ->capture_default_str();
    sub->add_flag("--all-hooks", o->all_hooks, "List the hooks of every layer");
    sub->callback([o] { std::fputs(model::inspect_model(*o).c_str(), stdout); });
});

}  // namespace
}  // namespace sinkscope::cli
