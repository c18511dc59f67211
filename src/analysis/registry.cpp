// The analysis registry (registry.hpp): one row per analysis, in the order they run.
#include "sinkscope/analysis/registry.hpp"

#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"

// Rows name only the fields they set; the others keep AnalysisInfo's defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace sinkscope::analysis {

const AnalysisOutput& FinishContext::output(const std::string& name) const {
    const auto it = finished.find(name);
    SS_CHECK(it != finished.end() && it->second, "analysis '", name, "' has not finished");
    return *it->second;
}

void write_output(const AnalysisOutput& out, const std::filesystem::path& dir) {
    for (const auto& t : out.tables) t.table.write(dir, t.name, t.jsonl);
    for (const auto& [path, array] : out.arrays) {
        std::filesystem::create_directories((dir / path).parent_path());
        io::write_npy(dir / path, array);
    }
    for (const auto& [path, text] : out.texts) {
        std::filesystem::create_directories((dir / path).parent_path());
        write_file_atomic(dir / path, text);
    }
}

const std::vector<AnalysisInfo>& registry() {
    auto section8 = [](const char* which) {
        return [which](const AnalysisContext& c) { return make_section8(c, which); };
    };
    namespace t = tables;
    namespace m = tables::metric;
    // A headline per head (heads.csv) or per layer (the layer's head average).
    auto per_head = [](const char* metric) {
        return Headline{.table = t::kHeads.name, .metric = metric, .per_head = true};
    };
    auto per_layer = [](const char* table, const char* metric) {
        return Headline{.table = table, .metric = metric};
    };
    static const std::vector<AnalysisInfo> rows = {
        {.name = "compositional",
         .description = "sink vs content split per head, Aitchison and classical head distance "
                        "matrices, content/sink dispersion and rho",
         .layer_scope = true,
         .headlines = {per_head(m::kSinkMass), per_head(m::kEntropy),
                       per_head(m::kBinarySinkEntropy), per_head(m::kContentEntropyRenorm),
                       per_head(m::kContentEntropyWeighted)},
         .make = make_compositional},
        {.name = "heads",
         .description = "reversal rates, MDS and clustering with ARI, regime predictor on the "
                        "compositional distance matrices",
         .layer_scope = true,
         .after = {"compositional"},
         .make = make_heads},
        {.name = "graphs",
         .description = "thresholded attention graphs: density, Laplacian spectrum, star-likeness, "
                        "centralization",
         .headlines = {per_layer(t::kGraphs, m::kDensity), per_layer(t::kGraphs, m::kLambda2),
                       per_layer(t::kGraphs, m::kLaplacianGap),
                       per_layer(t::kGraphs, m::kCentralization),
                       per_layer(t::kGraphs, m::kDegreeVariance), per_layer(t::kGraphs, m::kGini),
                       per_layer(t::kGraphs, m::kStarCombined)},
         .make = section8("graphs")},
        {.name = "topology",
         .description = "persistent homology of 1 - attention: bars, Betti curves",
         .make = section8("topology")},
        {.name = "kl",
         .description = "KL divergence of heads from their average before/after sink removal, "
                        "sink concentration, direct sink mass",
         .headlines = {per_layer(t::kKl, m::kKlReduction)},
         .make = section8("kl")},
        {.name = "spectra",
         .description = "singular-value spectra of attention vs Marchenko-Pastur",
         .make = section8("spectra")},
        {.name = "entropy",
         .description = "row entropy of the head-averaged attention",
         .headlines = {per_layer(t::kEntropy, m::kEntropyAllRows)},
         .make = section8("entropy")},
        {.name = "tokens",
         .description = "token specialisation: each head's top key and its consistency",
         .needs = {.token_strings = true},
         .make = section8("tokens")},
        {.name = "frame",
         .description = "reference-frame type from where the anchors sit",
         .make = section8("frame")},
        {.name = "value",
         .description = "value space: reference tokens, relative magnitude and direction of their "
                        "contribution, transformation magnitude, alignment",
         .needs = {.hidden_states = true},
         .headlines = {per_layer(t::kValueSpace.name, m::kRelativeMagnitude)},
         .make = make_value_space},
        {.name = "sink_eps",
         .description =
             "Sink_eps: share of heads whose mean attention to position 0 (--sink-eps-key) "
             "exceeds eps (--sink-eps, default 0.3), per layer and for the model",
         .make = make_sink_eps},
        {.name = "entropy_rows",
         .description = "every row's sink mass and entropy parts (entropy_rows.npy), so runs on "
                        "the same inputs can be paired row by row (sinkscope dynamics); only when "
                        "named",
         .in_all = false,
         .make = make_entropy_rows},
        {.name = "statistics",
         .description = "over inputs: bootstrap intervals of the headline numbers (--bootstrap), "
                        "correlations with p-values, paired test of KL before/after sink removal, "
                        "group means and tests (--group-by)",
         .needs = {.per_input_values = true},
         .make = make_statistics},
    };
    return rows;
}

const AnalysisInfo& find_analysis(const std::string& name) {
    for (const auto& info : registry())
        if (name == info.name) return info;
    std::string known;
    for (const auto& info : registry()) known += std::string(known.empty() ? "" : ", ") + info.name;
    throw UsageError("--analyses: unknown analysis '" + name + "' (known: all, " + known + ")");
}

}  // namespace sinkscope::analysis
