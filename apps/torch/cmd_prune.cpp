// `sinkscope prune`: binds api::PruneOptions (redundancy-based head pruning with perplexity).
#include <cstdio>
#include <iostream>

#include "command.hpp"
#include "model_options.hpp"
#include "sinkscope/api/prune.hpp"
#include "vocabulary.hpp"

namespace {

using sinkscope::cli::Existing;
using sinkscope::cli::existing;

sinkscope::cli::Registrar registrar("prune", 20, [](CLI::App& app) {
    auto o = std::make_shared<sinkscope::api::PruneOptions>();
    CLI::App* cmd = app.add_subcommand(
        "prune",
        "Prune the most redundant attention heads (distance to the nearest surviving head on the "
        "calibration set, greedy) and score the pruned model on held-out data (perplexity; "
        "pseudo-perplexity for encoders, "
        "top-1 agreement for ViT) against "
        "the unpruned model and random pruning");
    sinkscope::cli::add_model_options(cmd, o->m);
    sinkscope::cli::add_over_context_option(cmd, o->m);
    cmd->add_option(
           "--calib", o->calib,
           "Calibration data (head distances, mean z): .txt, .jsonl, .csv, .npy ids; ViT: images")
        ->required()
        ->check(existing(Existing::Path));
    cmd->add_option("--eval", o->eval,
                    "Held-out evaluation data, disjoint from --calib (same formats)")
        ->required()
        ->check(existing(Existing::Path));
    sinkscope::cli::add_text_column_option(cmd, o->text_column);
    cmd->add_option("--channels", o->channels,
                    "Distances that define redundancy: js (Jensen-Shannon on the rows), dA_perp "
                    "(Aitchison distance of the content, sink removed), dA (Aitchison distance "
                    "of the whole row), cosine and euclidean (on the rows); js_drop, "
                    "cosine_drop and euclidean_drop take the classical metric on the content "
                    "(sink removed, renormalised)")
        ->capture_default_str();
    cmd->add_option("--sparsity", o->sparsity,
                    "Fractions of all heads to prune, each in (0, 1); round(fraction x heads)")
        ->capture_default_str();
    cmd->add_option("--ablation", o->ablation,
                    "zero: a pruned head's output is 0; mean: its mean over the calibration set")
        ->capture_default_str();
    cmd->add_option("--budget", o->budget,
                    "model: round(fraction x all heads) pruned anywhere in the model by "
                    "model-wide redundancy; per-layer: round(fraction x heads of a layer) pruned "
                    "in every layer, by redundancy among the layer's heads (random baselines "
                    "too)")
        ->capture_default_str();
    cmd->add_option("--random-seeds", o->random_seeds,
                    "Random-pruning baselines per sparsity (seeds --seed, --seed + 1, ...)")
        ->capture_default_str();
    sinkscope::cli::add_seed_option(cmd, o->seed);
    sinkscope::cli::add_max_tokens_option(cmd, o->max_tokens);
    cmd->add_option("--calib-samples", o->calib_samples,
                    "Use the first N calibration samples (0: all)")
        ->capture_default_str();
    cmd->add_option("--eval-samples", o->eval_samples,
                    "Use the first N evaluation samples (0: all)")
        ->capture_default_str();
    sinkscope::cli::add_out_option(cmd, o->out);
    sinkscope::cli::add_overwrite_flag(cmd, o->overwrite);
    sinkscope::cli::add_resume_flag(cmd, o->resume);
    sinkscope::cli::add_progress_options(cmd, o->progress);
    sinkscope::cli::add_distributed_flags(cmd, o->dist);
    auto kill_after = sinkscope::cli::add_debug_kill_after(cmd, "evaluated points");
    cmd->callback([o, kill_after] {
        o->command_line = sinkscope::cli::command_line();
        sinkscope::cli::say_how_to_resume_on_interrupt(o->command_line);
        o->after_point = sinkscope::cli::kill_after_hook(*kill_after);
        const std::string dir = sinkscope::api::run_prune(*o, std::cout);
        if (!dir.empty()) std::printf("wrote %s\n", dir.c_str());
    });
});

}  // namespace
