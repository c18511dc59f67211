// `sinkscope patch`: activation patching from a source input into a target input, per hook,
// layer and head (api/patch.hpp).
#include <cstdio>

#include "command.hpp"
#include "model_options.hpp"
#include "sinkscope/api/patch.hpp"

namespace sinkscope::cli {
namespace {

Registrar reg("patch", 84, [](CLI::App& app) {
    auto o = std::make_shared<api::PatchOptions>();
    auto* sub = app.add_subcommand(
        "patch",
        "Activation patching: run the target text again with one hook (a layer's, or one "
        "head's part) taken from the source text's run, for every hook and head chosen, and "
        "table a metric of the logits (patch.csv)");
    add_model_options(sub, o->m);
    sub->add_option("--source", o->source, "Text whose activations are patched in")->required();
    sub->add_option("--target", o->target,
                    "Text run with the patched activations (as many tokens as the source)")
        ->required();
    sub->add_option("--hook-kinds", o->hook_kinds,
                    "Hook kinds swept, comma-separated: embed, resid_pre, resid_mid, "
                    "resid_post, q, k, v, rot_q, rot_k, attn_scores, pattern, z")
        ->capture_default_str();
    sub->add_option("--metric", o->metric,
                    "nll: mean NLL of the source's next tokens (with --answer: of that token "
                    "after the last position); logit_diff: logit(--answer) - logit(--wrong) "
                    "after the last position")
        ->capture_default_str();
    sub->add_option("--answer", o->answer, "One token: its text, or #ID");
    sub->add_option("--wrong", o->wrong, "One token for logit_diff: its text, or #ID");
    sub->add_flag_callback(
        "--no-per-head", [o] { o->per_head = false; }, "Patch whole hooks only, not each head");
    sub->add_flag("--per-position", o->per_position,
                  "Also patch each position alone (the query position of pattern and scores)");
    add_out_option(sub, o->out);
    add_overwrite_flag(sub, o->overwrite);
    sub->callback([o] {
        o->command_line = command_line();
        std::printf("wrote %s\n", api::run_patch(*o).c_str());
    });
});

}  // namespace
}  // namespace sinkscope::cli
