// CLI flags of analysis::AnalysisOptions, shared by `sinkscope metrics` and `sinkscope analyze`
// (one definition, so the two commands cannot drift apart; defaults come from the struct).
#pragma once

#include <CLI/CLI.hpp>

#include "sinkscope/analysis/options.hpp"
#include "sinkscope/analysis/registry.hpp"

namespace sinkscope::cli {

enum class AnalysisInput { AttentionFile, Model };

inline void add_analysis_flags(CLI::App* cmd, analysis::AnalysisOptions& o, AnalysisInput input) {
    const bool model = input == AnalysisInput::Model;
    std::string names, named_only;
    for (const auto& info : analysis::registry())
        if (model || !info.needs.hidden_states)
            (info.in_all ? names : named_only) +=
                std::string((info.in_all ? names : named_only).empty() ? "" : ", ") + info.name;
    cmd->add_option("--analyses", o.analyses,
                    "Comma-separated analyses (default all): " + names +
                        (named_only.empty() ? std::string()
                                            : "; only when named: " + named_only + " (all," +
                                                  named_only + " adds it to the others)"))
        ->delimiter(',')
        ->group("Analyses");
    cmd->add_option("--sink", o.sink,
                    "Sink policy: auto (first for causal attention, argmax for bidirectional), "
                    "first, bos, argmax (per layer; model-wide for model-scope comparisons) or a "
                    "key position")
        ->capture_default_str()
        ->group("Rows and sinks");
    cmd->add_option("--min-parts", o.min_parts,
                    "Rows with fewer visible keys are excluded and counted (>= 2)")
        ->capture_default_str()
        ->group("Rows and sinks");
    cmd->add_option("--scope", o.scope,
                    "Head pairs compared: model (all heads, one sink per input) or layer (pairs "
                    "within a layer, per-layer sinks)")
        ->capture_default_str()
        ->group("Rows and sinks");
    if (!model)
        cmd->add_option("--zeros", o.zeros,
                        "Zero policy for probability rows: error, or replace:DELTA "
                        "(multiplicative replacement, log-ratio quantities only)")
            ->capture_default_str()
            ->group("Rows and sinks");

    const char* heads = "Head analyses";
    cmd->add_option("--k", o.k,
                    "Clusters for every distance matrix (0: best mean silhouette of dA_perp in "
                    "2..12)")
        ->capture_default_str()
        ->group(heads);
    cmd->add_option("--triples", o.triples,
                    "Reversal rates: 0 counts exactly over all triples; N samples N triples and "
                    "reports a 95% Wilson interval")
        ->capture_default_str()
        ->group(heads);
    cmd->add_option_function<uint64_t>(
           "--seed", [&o](const uint64_t& v) { o.seed = v; },
           "One seed for everything random: the triple sampler, the bootstrap and, with "
           "--samples, a random subset of the inputs (default: seed 0 and the first N samples)")
        ->group(heads);
    cmd->add_option("--regime-lo", o.regime_lo, "Regime predictor: classical-safe when rho <= this")
        ->capture_default_str()
        ->group(heads);
    cmd->add_option("--regime-hi", o.regime_hi,
                    "Regime predictor: classical-unsafe when rho >= this")
        ->capture_default_str()
        ->group(heads);

    const char* s8 = "Reference-frame analyses";
    cmd->add_option("--compat", o.compat,
                    "Semantics: empty (principled, default) or ruscio2025 (the released notebooks "
                    "of the reference-frame paper, quirks included)")
        ->group(s8);
    cmd->add_flag("--per-head", o.per_head,
                  "Graphs, topology and spectra per head as well as on the head average")
        ->group(s8);
    cmd->add_option("--symmetrize", o.symmetrize,
                    "Persistent-homology distance 1 - max(A_ij, A_ji) (max) or 1 - mean (mean)")
        ->capture_default_str()
        ->group(s8);
    cmd->add_option("--kl-rows", o.kl_rows,
                    "Rows of kl_before in kl.csv: paired = only the rows that also give kl_after "
                    "(a row with no key outside the sink set has none), so kl_reduction compares "
                    "the same rows; all = every row")
        ->capture_default_str()
        ->group(s8);
    cmd->add_option("--topology-max-tokens", o.topology_max_tokens,
                    "Persistent homology of longer inputs runs on this many evenly picked tokens "
                    "(the Rips complex grows as n^3); 0 = all tokens")
        ->capture_default_str()
        ->group(s8);
    cmd->add_option("--graph-thresholds", o.constants.graph_thresholds,
                    "Attention graph thresholds tau: edge i->j when the head-averaged A_ij > tau")
        ->delimiter(',')
        ->capture_default_str()
        ->group(s8);
    cmd->add_option("--sink-percentiles", o.constants.sink_percentiles,
                    "Sink sets for the KL analysis: keys whose incoming mass is at or above this "
                    "percentile (as a fraction)")
        ->delimiter(',')
        ->capture_default_str()
        ->group(s8);
    cmd->add_option_function<std::vector<double>>(
           "--effective-density",
           [&o](const std::vector<double>& v) {
               if (v.size() != 2) throw CLI::ValidationError("--effective-density", "give LO,HI");
               o.constants.effective_density_lo = v[0], o.constants.effective_density_hi = v[1];
           },
           "A threshold is effective for a layer when its mean graph density is in [LO, HI] "
           "(default 0.05,0.95)")
        ->delimiter(',')
        ->group(s8);
    cmd->add_option("--long-bar", o.constants.long_bar,
                    "Persistence above which a topology bar counts as long")
        ->capture_default_str()
        ->group(s8);
    cmd->add_option("--specialised-share", o.constants.specialised_share,
                    "A head is specialised when one key is its top key in at least this share "
                    "of the inputs...")
        ->capture_default_str()
        ->group(s8);
    cmd->add_option("--specialised-min-inputs", o.constants.specialised_min_inputs,
                    "...and it was seen on at least this many inputs")
        ->capture_default_str()
        ->group(s8);
    cmd->add_option("--frame-share-first", o.constants.centralized_share_first,
                    "Reference frame is centralized when at least this share of the mid/late "
                    "layers' anchors is the first position...")
        ->capture_default_str()
        ->group(s8);
    cmd->add_option("--frame-max-reference-count", o.constants.centralized_max_reference_count,
                    "...and the mean number of reference tokens is below this")
        ->capture_default_str()
        ->group(s8);
    if (model) {
        cmd->add_option("--reference-threshold", o.reference_threshold,
                        "Value space: a key is a reference when its column mean exceeds this")
            ->capture_default_str()
            ->group(s8);
        cmd->add_option("--reference-fallback", o.reference_fallback_fraction,
                        "Value space: without such keys, the top fraction of keys by column mean")
            ->capture_default_str()
            ->group(s8);
        cmd->add_option("--reference-cap", o.reference_cap_fraction,
                        "Value space: at most this fraction of the keys are references")
            ->capture_default_str()
            ->group(s8);
    }

    const char* stats = "Per input and statistics";
    cmd->add_flag("--per-input", o.per_input,
                  "Also write every analysis' values per input: <table>_per_input.csv (long "
                  "format with an input column; the summary is their weighted mean)")
        ->group(stats);
    cmd->add_option("--sink-eps", o.sink_eps,
                    "Sink_eps: a head counts as a sink head when its mean attention to key "
                    "--sink-eps-key exceeds this (Gu et al. 2025)")
        ->capture_default_str();
    cmd->add_option("--sink-eps-key", o.sink_eps_key, "Key position Sink_eps measures")
        ->capture_default_str();
    cmd->add_option("--bootstrap", o.bootstrap,
                    "Bootstrap resamples over inputs for confidence intervals of the headline "
                    "numbers (bootstrap.csv; 0: none; typical 1000)")
        ->capture_default_str()
        ->group(stats);
    cmd->add_option("--confidence", o.confidence,
                    "Level of the bootstrap intervals and of the --group-by intervals")
        ->capture_default_str()
        ->group(stats);
    if (model)
        cmd->add_option("--group-by", o.group_by,
                        "Group the inputs by this column of the --data file (carried along as "
                        "with --keep-columns): groups.csv has each group's mean and t-interval "
                        "of the headline per-input values, group_tests.csv a test between the "
                        "groups (Welch's t for two, one-way ANOVA for more)")
            ->group(stats);
    if (!model)  // analyze: --threads of the model options sets both
        cmd->add_option("--threads", o.threads,
                        "Worker threads of the analyses (0 = all cores; results do not depend "
                        "on it)")
            ->capture_default_str();
}

}  // namespace sinkscope::cli
