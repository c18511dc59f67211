// CLI flags shared by `sinkscope metrics` and `sinkscope analyze` for the analyses both run
// (one definition, so the two commands cannot drift apart).
#pragma once

#include <CLI/CLI.hpp>

#include "sinkscope/metrics/head_analyses.hpp"

namespace sinkscope::cli {

struct SharedAnalysisFlags {
    std::vector<std::string>* analyses;
    metrics::HeadAnalysisOptions* head;
    std::string* compat;
    bool* per_head;
    std::string* symmetrize;
    int64_t* topology_max_tokens;
};

inline void add_shared_analysis_flags(CLI::App* cmd, const SharedAnalysisFlags& f,
                                      const std::string& analyses_help) {
    cmd->add_option("--analyses", *f.analyses, analyses_help)->delimiter(',');
    cmd->add_option("--k", f.head->k,
                    "Clusters for every distance matrix (0: best mean silhouette of dA_perp in "
                    "2..12, spec 4)")
        ->capture_default_str();
    cmd->add_option("--triples", f.head->triples,
                    "Reversal rates: 0 counts exactly over all triples (spec 3); N samples N "
                    "triples and reports a 95% Wilson interval")
        ->capture_default_str();
    cmd->add_option("--seed", f.head->seed, "Seed of the triple sampler")->capture_default_str();
    cmd->add_option("--regime-lo", f.head->regime_lo,
                    "Regime predictor: classical-safe when rho <= this (spec 7)")
        ->capture_default_str();
    cmd->add_option("--regime-hi", f.head->regime_hi,
                    "Regime predictor: classical-unsafe when rho >= this (spec 7)")
        ->capture_default_str();
    cmd->add_option("--compat", *f.compat,
                    "Section 8 semantics: empty (principled, default) or ruscio2025 (the released "
                    "notebooks, PAPERS.md part B)");
    cmd->add_flag("--per-head", *f.per_head,
                  "Graphs, topology and spectra per head as well as on the head average");
    cmd->add_option("--symmetrize", *f.symmetrize,
                    "Persistent-homology distance 1 - max(A_ij, A_ji) (max) or 1 - mean (mean)")
        ->capture_default_str();
    cmd->add_option("--topology-max-tokens", *f.topology_max_tokens,
                    "Principled persistent homology of longer inputs runs on this many evenly "
                    "picked tokens (the Rips complex grows as n^3); 0 = all tokens")
        ->capture_default_str();
}

}  // namespace sinkscope::cli
