// `sinkscope generate`: greedy continuation of a prompt (for parity checks with other runtimes).
#include <cstdio>

#include "command.hpp"
#include "sinkscope/model/commands.hpp"

namespace sinkscope::cli {
namespace {

Registrar reg("generate", 81, [](CLI::App& app) {
    auto o = std::make_shared<model::GenerateOptions>();
    auto* sub = app.add_subcommand("generate", "Greedy generation from a prompt");
    sub->add_option("--model", o->m.model, "HF directory, .gguf or llama2.c .bin")->required();
    sub->add_option("--prompt", o->prompt, "Prompt text")->required();
    sub->add_option("--max-new", o->max_new, "Tokens to generate at most")->capture_default_str();
    sub->add_option("--stop", o->stop, "Token that ends generation: eos | bos | none")
        ->capture_default_str();
    sub->add_option("--bos", o->m.bos, "BOS policy: default | always | never")->capture_default_str();
    sub->add_option("--device", o->m.device, "cpu | cuda")->capture_default_str();
    sub->add_option("--dtype", o->m.dtype, "float32 | bfloat16 | float16")->capture_default_str();
    sub->add_option("--tokenizer", o->m.tokenizer, "Tokenizer file (llama2.c tok*.bin)");
    sub->add_option("--threads", o->m.threads, "Torch threads (0 = libtorch default)")
        ->capture_default_str();
    sub->callback([o] { std::fputs(model::generate_text(*o).c_str(), stdout); });
});

}  // namespace
}  // namespace sinkscope::cli
