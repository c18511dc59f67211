// `sinkscope train`: binds api::TrainOptions (train a small decoder on a text corpus).
#include <cstdio>
#include <iostream>

#include "command.hpp"
#include "model_options.hpp"
#include "sinkscope/api/train.hpp"
#include "vocabulary.hpp"

namespace {

using sinkscope::cli::Existing;
using sinkscope::cli::existing;

sinkscope::cli::Registrar registrar("train", 25, [](CLI::App& app) {
    auto o = std::make_shared<sinkscope::api::TrainOptions>();
    CLI::App* cmd = app.add_subcommand(
        "train",
        "Train a small Llama- or GPT-2-style decoder on a plain-text corpus (AdamW, warm-up + "
        "cosine, gradient clipping) and write Hugging Face checkpoints every other command loads, "
        "with a manifest (step, tokens, loss, Sink_eps, path); the same weights need the same "
        "--seed and --threads");
    auto* preset =
        cmd->add_option("--preset", o->preset, "Built-in settings: tiny, tiny-gpt2, default");
    auto* config = cmd->add_option("--config", o->config, "JSON file of training settings")
                       ->check(existing(Existing::File));
    preset->excludes(config);
    cmd->add_option("--text", o->text, "The corpus: a plain UTF-8 text file")
        ->required()
        ->check(existing(Existing::File));
    sinkscope::cli::add_out_option(cmd, o->out, "staged in OUT.partial until done");
    cmd->add_option("--steps", o->steps, "Optimizer steps (0: the preset's or config's)")
        ->capture_default_str();
    cmd->add_option("--checkpoint-every", o->checkpoint_every,
                    "Write a checkpoint (and the resumable state) every K steps (0: the "
                    "preset's, or steps / 4)")
        ->capture_default_str();
    cmd->add_option("--vocab", o->vocab,
                    "Byte-level BPE vocabulary size learned on the corpus (0: bytes only; -1: "
                    "the preset's or config's)")
        ->capture_default_str();
    cmd->add_option("--attention-function", o->attention_function,
                    "Attention function (default: the preset's or config's, softmax): softmax, "
                    "softmax_one (an extra zero logit, rows sum to < 1) or sigmoid (no "
                    "normalisation); written to config.json as sinkscope_attention");
    cmd->add_flag("--no-bos", o->no_bos,
                  "Pack sequences without BOS (seq_len corpus tokens, the first one arbitrary); "
                  "the tokenizer written with the model then adds no BOS by default");
    cmd->add_flag("--kv-bias", o->kv_bias,
                  "A learnable key/value slot in every layer: one more key and value per head "
                  "that every query sees, starting at 0 (softmax only); written to config.json "
                  "as sinkscope_kv_bias");
    sinkscope::cli::add_seed_option(cmd, o->seed);
    sinkscope::cli::add_threads_option(cmd, o->threads);
    cmd->add_option("--sink-eps", o->sink_eps,
                    "eps of the Sink_eps recorded per checkpoint (share of heads whose mean "
                    "attention to position 0 exceeds eps)")
        ->capture_default_str();
    sinkscope::cli::add_overwrite_flag(cmd, o->overwrite);
    sinkscope::cli::add_resume_flag(cmd, o->resume);
    sinkscope::cli::add_progress_options(cmd, o->progress);
    auto kill_after = sinkscope::cli::add_debug_kill_after(cmd, "steps");
    cmd->callback([o, kill_after] {
        o->command_line = sinkscope::cli::command_line();
        sinkscope::cli::say_how_to_resume_on_interrupt(o->command_line);
        o->after_step = sinkscope::cli::kill_after_hook(*kill_after);
        const std::string dir = sinkscope::api::run_train(*o, std::cout);
        std::printf("wrote %s\n", dir.c_str());
    });
});

}  // namespace
