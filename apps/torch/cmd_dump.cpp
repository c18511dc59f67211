// `sinkscope dump`: captured hooks as .npy (attention as (N, L, H, T, T)) plus run.json.
#include <cstdio>

#include "command.hpp"
#include "model_options.hpp"
#include "sinkscope/api/model_commands.hpp"
#include "vocabulary.hpp"

namespace sinkscope::cli {
namespace {

Registrar reg("dump", 83, [](CLI::App& app) {
    auto o = std::make_shared<api::DumpOptions>();
    auto* sub = app.add_subcommand("dump", "Write captured hooks (attention, q/k/v, ...) as .npy");
    add_model_options(sub, o->m);
    add_over_context_option(sub, o->m);
    add_data_option(sub, o->data, true);
    add_text_column_option(sub, o->text_column);
    sub->add_option("--hooks", o->hooks, "Comma-separated hook globs, or re:REGEX")
        ->capture_default_str();
    add_intervene_option(sub, o->intervene);
    add_out_option(sub, o->out);
    add_overwrite_flag(sub, o->overwrite);
    add_samples_option(sub, o->samples, "--max-samples");
    add_seed_option(sub, o->seed);
    add_max_tokens_option(sub, o->max_tokens);
    add_progress_options(sub, o->progress);
    sub->callback([o] { std::printf("wrote %s\n", api::dump_hooks(*o).c_str()); });
});

}  // namespace
}  // namespace sinkscope::cli
