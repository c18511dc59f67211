// CLI flags every model subcommand shares (one definition for inspect, generate, perplexity,
// dump and analyze).
#pragma once

#include <CLI/CLI.hpp>

#include "sinkscope/api/model_commands.hpp"

namespace sinkscope::cli {

inline void add_model_options(CLI::App* sub, api::ModelCliOptions& m, bool with_bos = true) {
    sub->add_option("--model", m.model, "HF directory, .gguf or llama2.c .bin")->required();
    if (with_bos)
        sub->add_option("--bos", m.bos, "BOS policy: default (the tokenizer's config) | always | never")
            ->capture_default_str();
    sub->add_option("--device", m.device, "cpu | cuda")->capture_default_str();
    sub->add_option("--dtype", m.dtype, "float32 | bfloat16 | float16")->capture_default_str();
    sub->add_option("--tokenizer", m.tokenizer, "Tokenizer file (llama2.c tok*.bin)");
    sub->add_option("--threads", m.threads,
                    "Threads of the model runtime and the analyses (0 = all cores)")
        ->capture_default_str();
}

}  // namespace sinkscope::cli
