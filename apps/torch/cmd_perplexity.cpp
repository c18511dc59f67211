// `sinkscope perplexity`: exp(mean NLL) of a model over a data file.
#include <cstdio>

#include "command.hpp"
#include "model_options.hpp"
#include "sinkscope/api/model_commands.hpp"

namespace sinkscope::cli {
namespace {

Registrar reg("perplexity", 82, [](CLI::App& app) {
    auto o = std::make_shared<api::PerplexityOptions>();
    auto* sub = app.add_subcommand("perplexity",
                                   "Perplexity over a data file (one sample a line): next-token "
                                   "for decoders, masked-LM pseudo-perplexity for encoders");
    add_model_options(sub, o->m);
    add_over_context_option(sub, o->m);
    add_data_option(sub, o->data, true);
    add_text_column_option(sub, o->text_column);
    add_samples_option(sub, o->samples, "--max-samples");
    add_seed_option(sub, o->seed);
    add_max_tokens_option(sub, o->max_tokens);
    add_progress_options(sub, o->progress);
    sub->add_option("--head-mask", o->head_mask,
                    "Heads to ablate (output set to 0), LAYER.HEAD separated by commas: 0.3,1.0");
    sub->add_option("--stride", o->stride,
                    "Decoders: sliding-window evaluation of inputs longer than the model's "
                    "context (Hugging Face's perplexity guide): windows of the context length "
                    "move by N tokens; each token is scored once, with the tokens before it in "
                    "its window as context (0: no windows; inputs are cut to the context, see "
                    "--over-context)")
        ->capture_default_str();
    sub->callback([o] { std::fputs(api::perplexity_report(*o).c_str(), stdout); });
});

}  // namespace
}  // namespace sinkscope::cli
