// `sinkscope perplexity`: exp(mean NLL) of a model over a data file.
#include <cstdio>

#include "command.hpp"
#include "sinkscope/model/commands.hpp"

namespace sinkscope::cli {
namespace {

Registrar reg("perplexity", 82, [](CLI::App& app) {
    auto o = std::make_shared<model::PerplexityOptions>();
    auto* sub = app.add_subcommand("perplexity", "Perplexity over a data file (one sample a line)");
    sub->add_option("--model", o->m.model, "HF directory, .gguf or llama2.c .bin")->required();
    sub->add_option("--data", o->data, "Text (one sample per line), JSONL, CSV or .npy ids")
        ->required();
    sub->add_option("--max-samples", o->max_samples, "0 = all")->capture_default_str();
    sub->add_option("--bos", o->m.bos, "BOS policy: default | always | never")->capture_default_str();
    sub->add_option("--device", o->m.device, "cpu | cuda")->capture_default_str();
    sub->add_option("--dtype", o->m.dtype, "float32 | bfloat16 | float16")->capture_default_str();
    sub->add_option("--tokenizer", o->m.tokenizer, "Tokenizer file (llama2.c tok*.bin)");
    sub->add_option("--threads", o->m.threads, "Torch threads (0 = libtorch default)")
        ->capture_default_str();
    sub->callback([o] { std::fputs(model::perplexity_report(*o).c_str(), stdout); });
});

}  // namespace
}  // namespace sinkscope::cli
