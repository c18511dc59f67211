// `sinkscope generate`: greedy continuation of a prompt (for parity checks with other runtimes).
#include <cstdio>

#include "command.hpp"
#include "model_options.hpp"
#include "sinkscope/api/model_commands.hpp"

namespace sinkscope::cli {
namespace {

Registrar reg("generate", 81, [](CLI::App& app) {
    auto o = std::make_shared<api::GenerateOptions>();
    auto* sub = app.add_subcommand("generate", "Greedy generation from a prompt");
    add_model_options(sub, o->m);
    sub->add_option("--prompt", o->prompt, "Prompt text")->required();
    sub->add_option("--max-new", o->max_new, "Tokens to generate at most")->capture_default_str();
    sub->add_option("--stop", o->stop, "Token that ends generation: eos | bos | none")
        ->capture_default_str();
    sub->callback([o] { std::fputs(api::generate_text(*o).c_str(), stdout); });
});

}  // namespace
}  // namespace sinkscope::cli
