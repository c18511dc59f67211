// `sinkscope metrics`: binds the options of metrics::MetricsCommandOptions and runs the command.
#include <iostream>

#include "analysis_options.hpp"
#include "command.hpp"
#include "sinkscope/metrics/command.hpp"

namespace {

sinkscope::cli::Registrar registrar("metrics", 70, [](CLI::App& app) {
    auto opts = std::make_shared<sinkscope::metrics::MetricsCommandOptions>();
    CLI::App* cmd = app.add_subcommand(
        "metrics",
        "Every analysis of spec/METRICS.md on an attention dump from any framework: compositional "
        "metrics (sections 1-4, 7) and the reference-frame analyses of section 8");
    auto* attention = cmd->add_option("--attention", opts->attention,
                                      "Attention probabilities .npy shaped (N, L, H, T, T) or "
                                      "(L, H, T, T), dtype f2/f4/f8")
                          ->check(CLI::ExistingFile);
    auto* example = cmd->add_flag("--example", opts->example,
                                  "Use the built-in example (8 inputs x 4 layers x 4 heads x 16 "
                                  "tokens, causal) instead of --attention; also writes it as "
                                  "attention.npy into --out");
    attention->excludes(example);
    cmd->add_option("--scores", opts->scores,
                    "Pre-softmax scores .npy of the same shape (masked = -inf); when given every "
                    "quantity comes from their fp64 log-softmax (spec 10.b)")
        ->check(CLI::ExistingFile);
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
                    "padding queries are skipped (spec 10.p)")
        ->check(CLI::ExistingFile);
    cmd->add_option("--token-ids", opts->token_ids,
                    "Token ids (N, T) of the inputs (for --sink bos)")
        ->check(CLI::ExistingFile);
    cmd->add_option(
           "--sink", opts->sink,
           "Sink policy: auto (first for causal, argmax for bidirectional), first, bos, "
           "argmax (per layer; model-wide for model-scope comparisons, spec 10.d) or a key "
           "position")
        ->capture_default_str();
    cmd->add_option(
        "--bos-id", opts->bos_id,
        "BOS/CLS token id, required with --sink bos (several BOS in an input: the first)");
    cmd->add_option("--zeros", opts->zeros,
                    "Zero policy for probability rows: error, or replace:DELTA (multiplicative "
                    "replacement, log-ratio quantities only, spec 10.c)")
        ->capture_default_str();
    cmd->add_option("--min-parts", opts->min_parts,
                    "Rows with fewer visible keys are excluded and counted (>= 2)")
        ->capture_default_str();
    cmd->add_option("--scope", opts->scope,
                    "Head pairs compared: model (all heads, one sink per input) or layer (pairs "
                    "within a layer, per-layer sinks; other pairs NaN)")
        ->capture_default_str();
    sinkscope::cli::add_shared_analysis_flags(
        cmd,
        {&opts->analyses, &opts->head, &opts->compat, &opts->per_head, &opts->symmetrize,
         &opts->topology_max_tokens},
        "Comma-separated analyses (default all): compositional, heads (reversal, clustering, "
        "regime), graphs, topology, kl, spectra, entropy, tokens, frame");
    cmd->add_option("--tokens", opts->tokens,
                    "JSONL, one array of token strings per input, naming keys in token "
                    "specialisation")
        ->check(CLI::ExistingFile);
    cmd->add_option("--out", opts->out, "Output directory (written whole or not at all)")
        ->required();
    sinkscope::cli::add_overwrite_flag(cmd, opts->overwrite);
    cmd->callback([opts] {
        opts->command_line = sinkscope::cli::command_line();
        sinkscope::metrics::run_metrics_command(*opts, std::cout);
    });
});

}  // namespace
