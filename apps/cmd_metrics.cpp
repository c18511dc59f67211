// `sinkscope metrics`: binds the options of api::MetricsCommandOptions and runs the command.
#include <iostream>

#include "analysis_options.hpp"
#include "command.hpp"
#include "sinkscope/api/metrics.hpp"
#include "vocabulary.hpp"

namespace {

using sinkscope::cli::Existing;
using sinkscope::cli::existing;

sinkscope::cli::Registrar registrar("metrics", 70, [](CLI::App& app) {
    auto opts = std::make_shared<sinkscope::api::MetricsCommandOptions>();
    CLI::App* cmd = app.add_subcommand(
        "metrics",
        "Every analysis on an attention dump from any framework: compositional metrics and the "
        "reference-frame analyses (every quantity is defined in docs/metrics.md)");
    auto* attention = cmd->add_option("--attention", opts->attention,
                                      "Attention probabilities .npy shaped (N, L, H, T, T) or "
                                      "(L, H, T, T), dtype f2/f4/f8")
                          ->check(existing(Existing::File));
    auto* example = cmd->add_flag("--example", opts->example,
                                  "Use the built-in example (8 inputs x 4 layers x 4 heads x 16 "
                                  "tokens, causal) instead of --attention; also writes it as "
                                  "attention.npy into --out");
    attention->excludes(example);
    cmd->add_option("--scores", opts->scores,
                    "Pre-softmax scores .npy of the same shape (masked = -inf); when given every "
                    "quantity comes from their fp64 log-softmax")
        ->check(existing(Existing::File));
    auto* causal = cmd->add_flag_callback(
        "--causal", [opts] { opts->masking = "causal"; },
        "Row i sees keys j <= i (default: auto-detect: causal iff "
        "everything above the diagonal is exactly 0)");
    auto* bidir = cmd->add_flag_callback(
        "--bidirectional", [opts] { opts->masking = "bidirectional"; },
        "Row i sees every (non-padding) key");
    causal->excludes(bidir);
    cmd->add_option("--window", opts->window,
                    "Sliding window W of causal attention: row i sees keys "
                    "i-W+1..i (0 = none)")
        ->capture_default_str();
    cmd->add_option("--lengths", opts->lengths,
                    "Real lengths (N,) of padded encoder inputs; padding keys are absent parts and "
                    "padding queries are skipped")
        ->check(existing(Existing::File));
    cmd->add_option("--token-ids", opts->token_ids,
                    "Token ids (N, T) of the inputs (for --sink bos)")
        ->check(existing(Existing::File));
    sinkscope::cli::add_analysis_flags(cmd, opts->analysis,
                                       sinkscope::cli::AnalysisInput::AttentionFile);
    cmd->add_option("--tokens", opts->tokens,
                    "JSONL, one array of token strings per input, naming keys in token "
                    "specialisation")
        ->check(existing(Existing::File));
    sinkscope::cli::add_out_option(cmd, opts->out);
    sinkscope::cli::add_overwrite_flag(cmd, opts->overwrite);
    cmd->add_flag_callback(
        "--no-report", [opts] { opts->report = false; }, "Skip report.html");
    cmd->callback([opts] {
        opts->command_line = sinkscope::cli::command_line();
        sinkscope::api::run_metrics_command(*opts, std::cout);
    });
});

}  // namespace
