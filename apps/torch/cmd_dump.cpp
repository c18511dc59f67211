// `sinkscope dump`: captured hooks as .npy (attention as (N, L, H, T, T)) plus run.json.
#include <cstdio>

#include "command.hpp"
#include "model_options.hpp"
#include "sinkscope/api/model_commands.hpp"

namespace sinkscope::cli {
namespace {

Registrar reg("dump", 83, [](CLI::App& app) {
    auto o = std::make_shared<api::DumpOptions>();
    auto* sub = app.add_subcommand("dump", "Write captured hooks (attention, q/k/v, ...) as .npy");
    add_model_options(sub, o->m);
    add_over_context_option(sub, o->m);
    sub->add_option("--data", o->data,
                    "Text (one sample per line), JSONL, CSV or .npy ids; vision models: a .png, a "
                    "directory of .png files or a .npy image stack")
        ->required();
    sub->add_option("--hooks", o->hooks, "Comma-separated hook globs, or re:REGEX")
        ->capture_default_str();
    sub->add_option("--out", o->out, "Output directory (written whole or not at all)")->required();
    add_overwrite_flag(sub, o->overwrite);
    sub->add_option("--max-samples", o->max_samples, "0 = all")->capture_default_str();
    sub->callback([o] { std::printf("wrote %s\n", api::dump_hooks(*o).c_str()); });
});

}  // namespace
}  // namespace sinkscope::cli
