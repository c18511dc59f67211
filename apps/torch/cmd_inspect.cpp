// `sinkscope inspect`: architecture, dims, dtype, tokenizer, BOS policy, hooks, parameter count.
#include <cstdio>

#include "command.hpp"
#include "model_options.hpp"
#include "sinkscope/api/model_commands.hpp"

namespace sinkscope::cli {
namespace {

Registrar reg("inspect", 80, [](CLI::App& app) {
    auto o = std::make_shared<api::InspectOptions>();
    auto* sub = app.add_subcommand("inspect", "Describe a model: architecture, hooks, tokenizer");
    add_model_options(sub, o->m, false);
    sub->add_flag("--all-hooks", o->all_hooks, "List the hooks of every layer");
    sub->add_flag("--load", o->load_weights,
                  "Also read and convert every weight, as a command that runs the model does "
                  "(without it inspect reads only the metadata: names, shapes, types)");
    sub->callback([o] { std::fputs(api::inspect_model(*o).c_str(), stdout); });
});

}  // namespace
}  // namespace sinkscope::cli
