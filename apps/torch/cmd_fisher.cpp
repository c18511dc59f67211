// `sinkscope fisher`: binds api::FisherCommandOptions (diagonal Fisher information by tensor,
// layer, component and head).
#include <cstdio>
#include <iostream>

#include "command.hpp"
#include "model_options.hpp"
#include "sinkscope/api/fisher.hpp"
#include "vocabulary.hpp"

namespace {

using sinkscope::cli::Existing;
using sinkscope::cli::existing;

sinkscope::cli::Registrar registrar("fisher", 21, [](CLI::App& app) {
    auto o = std::make_shared<sinkscope::api::FisherCommandOptions>();
    CLI::App* cmd = app.add_subcommand(
        "fisher",
        "Fisher information of the parameters on a data set: the mean squared gradient of each "
        "sample's loss (next token; encoders: masked tokens; ViT: the image's class), per "
        "tensor, per layer by component (attention q/k/v/o, mlp, norm, embedding, output) and "
        "per attention head");
    sinkscope::cli::add_model_options(cmd, o->m);
    sinkscope::cli::add_over_context_option(cmd, o->m);
    sinkscope::cli::add_data_option(cmd, o->data, true);
    sinkscope::cli::add_text_column_option(cmd, o->text_column);
    cmd->add_option("--kind", o->kind,
                    "empirical: the data's labels; true: labels drawn from the model's own "
                    "predictions with --seed (the only kind for images, which have no labels)")
        ->capture_default_str();
    // The same text as analyze's --compat: here it adds the notebook's grouping of the tensors
    // by name (fisher.csv rows of convention ruscio2025).
    cmd->add_option("--compat", o->compat,
                    "Semantics: empty (principled, default) or ruscio2025 (the released "
                    "notebooks of the reference-frame paper, quirks included)");
    sinkscope::cli::add_samples_option(cmd, o->samples);
    cmd->add_option("--draws", o->draws,
                    "--kind true: label draws per sample (their squared gradients are averaged)")
        ->capture_default_str();
    sinkscope::cli::add_seed_option(cmd, o->seed);
    cmd->add_option("--mask-rate", o->mask_rate,
                    "Encoders: share of each sample's tokens replaced by the mask token")
        ->capture_default_str();
    sinkscope::cli::add_max_tokens_option(cmd, o->max_tokens);
    sinkscope::cli::add_out_option(cmd, o->out);
    sinkscope::cli::add_overwrite_flag(cmd, o->overwrite);
    sinkscope::cli::add_resume_flag(cmd, o->resume);
    cmd->add_option("--checkpoint-every", o->checkpoint_every,
                    "Save the sums every K samples (for --resume)")
        ->capture_default_str();
    sinkscope::cli::add_progress_options(cmd, o->progress);
    sinkscope::cli::add_distributed_flags(cmd, o->dist);
    auto kill_after = sinkscope::cli::add_debug_kill_after(cmd, "samples");
    cmd->callback([o, kill_after] {
        o->command_line = sinkscope::cli::command_line();
        sinkscope::cli::say_how_to_resume_on_interrupt(o->command_line);
        o->after_sample = sinkscope::cli::kill_after_hook(*kill_after);
        const std::string dir = sinkscope::api::run_fisher(*o, std::cout);
        if (!dir.empty()) std::printf("wrote %s\n", dir.c_str());
    });
});

}  // namespace
