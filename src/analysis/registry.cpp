// The analysis registry (registry.hpp): one row per analysis, in the order they run.
#include "sinkscope/analysis/registry.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"

// Rows name only the fields they set; the others keep AnalysisInfo's defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace sinkscope::analysis {

// The factories of the built-in analyses (one file each; a row's `make`).
std::unique_ptr<Analysis> make_compositional(const AnalysisContext& c);
std::unique_ptr<Analysis> make_heads(const AnalysisContext& c);
std::unique_ptr<Analysis> make_ref_frame(const AnalysisContext& c, const std::string& which);
std::pair<int64_t, int64_t> parse_region_bounds(const std::string& s);  // ref_frame.cpp
std::unique_ptr<Analysis> make_value_space(const AnalysisContext& c);
std::unique_ptr<Analysis> make_statistics(const AnalysisContext& c);
std::unique_ptr<Analysis> make_sink_eps(const AnalysisContext& c);
std::unique_ptr<Analysis> make_sink_geometry(const AnalysisContext& c);
std::unique_ptr<Analysis> make_entropy_rows(const AnalysisContext& c);
std::unique_ptr<Analysis> make_failure_geometry(const AnalysisContext& c);
std::unique_ptr<Analysis> make_clark2019(const AnalysisContext& c);
// What compare and dynamics read back of each (beside its factory).
using Dir = RunFiles;
void compositional_compare_values(const Dir& dir, std::vector<RunValue>& out);
void heads_compare_values(const Dir& dir, std::vector<RunValue>& out);
void heads_trajectory_values(const Dir& dir, std::vector<RunValue>& out);
void spectra_trajectory_values(const Dir& dir, std::vector<RunValue>& out);
void sink_eps_compare_values(const Dir& dir, std::vector<RunValue>& out);
void sink_eps_trajectory_values(const Dir& dir, std::vector<RunValue>& out);
void sink_geometry_trajectory_values(const Dir& dir, std::vector<RunValue>& out);
void entropy_rows_trajectory_values(const Dir& dir, std::vector<RunValue>& out);

const AnalysisOutput& FinishContext::output(const std::string& name) const {
    const auto it = finished.find(name);
    SS_CHECK(it != finished.end() && it->second, "analysis '", name, "' has not finished");
    return *it->second;
}

void write_output(const AnalysisOutput& out, const RunFiles& dir) {
    for (const auto& t : out.tables) t.table.write(dir, t.name, t.jsonl);
    for (const auto& [path, array] : out.arrays) dir.write(path, io::serialize_npy(array));
    for (const auto& [path, text] : out.texts) dir.write(path, text);
}

namespace {

using C = OptionCommands;
const char* const kFrame = kReferenceFrameGroup;

// Options of the head analyses (spec 3, 4, 7).
std::vector<OptionSpec> heads_options() {
    return {
        field_option<int>(
            "k", [](auto& o) -> auto& { return o.k; },
            "Clusters for every distance matrix (0: best mean silhouette of "
            "dA_perp in 2..12)")
            .in(kHeadGroup)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                if (o.k < 0) throw UsageError("--k must be >= 0, got " + std::to_string(o.k));
            }),
        field_option<std::string>(
            "linkage", [](auto& o) -> auto& { return o.linkage; },
            "Agglomerative clustering of the heads: average (UPGMA), complete, single or ward "
            "(Ward's update on the distances)")
            .in(kHeadGroup)
            .labelled("the clustering linkage")
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                if (o.linkage != "average" && o.linkage != "complete" && o.linkage != "single" &&
                    o.linkage != "ward")
                    throw UsageError("--linkage must be average, complete, single or ward, got '" +
                                     o.linkage + "'");
            }),
        field_option<int64_t>(
            "triples", [](auto& o) -> auto& { return o.triples; },
            "Reversal rates: 0 counts exactly over all triples; N samples N distinct "
            "triples (without replacement; all of them, exactly, where fewer exist) and reports "
            "a 95% Wilson interval with the finite population correction")
            .in(kHeadGroup)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                if (o.triples < 0)
                    throw UsageError("--triples must be >= 0, got " + std::to_string(o.triples));
                // Sampling holds the N drawn triple indices (about 50 bytes each) and costs
                // time in proportion to N; beyond this an exact count (--triples 0, which
                // handles 5e8 triples of 1,024 heads) is both faster and exact.
                if (o.triples > 10000000)
                    throw UsageError(
                        "--triples is capped at 10000000 sampled triples (0 counts every "
                        "triple exactly), got " +
                        std::to_string(o.triples));
            }),
        field_option<double>(
            "regime_lo", [](auto& o) -> auto& { return o.regime_lo; },
            "Regime predictor: classical-safe when rho <= this")
            .in(kHeadGroup)
            .labelled("the regime threshold lo")
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                if (!(std::isfinite(o.regime_lo) && std::isfinite(o.regime_hi) &&
                      o.regime_lo <= o.regime_hi))
                    throw UsageError("--regime-lo must be <= --regime-hi (both finite)");
            }),
        field_option<double>(
            "regime_hi", [](auto& o) -> auto& { return o.regime_hi; },
            "Regime predictor: classical-unsafe when rho >= this")
            .in(kHeadGroup)
            .labelled("the regime threshold hi"),
    };
}

std::vector<OptionSpec> graphs_options() {
    return {
        field_option<std::vector<double>>(
            "graph_thresholds", [](auto& o) -> auto& { return o.constants.graph_thresholds; },
            "Attention graph thresholds tau: edge i->j when the head-averaged A_ij > tau")
            .in(kFrame)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                metrics::check_graph_thresholds(o.constants.graph_thresholds);
            }),
        OptionSpec{.key = "effective_density",
                   .help = "A threshold is effective for a layer when its mean graph density is in "
                           "[LO, HI]",
                   .group = kFrame,
                   .get =
                       [](const AnalysisOptions& o) {
                           return OptionValue(std::pair(o.constants.effective_density_lo,
                                                        o.constants.effective_density_hi));
                       },
                   .set =
                       [](AnalysisOptions& o, const OptionValue& v) {
                           std::tie(o.constants.effective_density_lo,
                                    o.constants.effective_density_hi) =
                               std::get<std::pair<double, double>>(v);
                       },
                   .check =
                       [](const AnalysisOptions& o, const OptionCheckContext&) {
                           metrics::check_effective_density(o.constants.effective_density_lo,
                                                            o.constants.effective_density_hi);
                       }},
        // Read by every reference-frame analysis (regions.csv); declared once, here.
        extra_option<std::string>(
            "region_bounds", "thirds",
            "Layer regions of regions.csv: thirds (early < floor(L/3) <= middle < floor(2L/3) "
            "<= late, model layers) or M,N (middle from model layer M, late from N)")
            .in(kFrame)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                parse_region_bounds(o.value<std::string>("region_bounds"));
            }),
    };
}

std::vector<OptionSpec> topology_options() {
    return {
        field_option<std::string>(
            "symmetrize", [](auto& o) -> auto& { return o.symmetrize; },
            "Persistent-homology distance 1 - max(A_ij, A_ji) (max) or 1 - mean (mean)")
            .in(kFrame)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                metrics::check_symmetrize(o.symmetrize);
            }),
        field_option<int64_t>(
            "topology_max_tokens", [](auto& o) -> auto& { return o.topology_max_tokens; },
            "Persistent homology of longer inputs runs on this many evenly picked tokens (the "
            "Rips complex grows as n^3); 0 = all tokens")
            .in(kFrame)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                metrics::check_topology_max_tokens(o.topology_max_tokens);
            }),
        field_option<double>(
            "long_bar", [](auto& o) -> auto& { return o.constants.long_bar; },
            "Persistence above which a topology bar counts as long")
            .in(kFrame)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                metrics::check_long_bar(o.constants.long_bar);
            }),
    };
}

std::vector<OptionSpec> kl_options() {
    return {
        field_option<std::string>(
            "kl_rows", [](auto& o) -> auto& { return o.kl_rows; },
            "Rows of kl_before in kl.csv: paired = only the rows that also give kl_after (a row "
            "with no key outside the sink set has none), so kl_reduction compares the same "
            "rows; all = every row")
            .in(kFrame)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                metrics::check_kl_rows(o.kl_rows);
            }),
        field_option<std::vector<double>>(
            "sink_percentiles", [](auto& o) -> auto& { return o.constants.sink_percentiles; },
            "Sink sets for the KL analysis: keys whose incoming mass is at or above this "
            "percentile (as a fraction)")
            .in(kFrame)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                metrics::check_sink_percentiles(o.constants.sink_percentiles);
            }),
    };
}

std::vector<OptionSpec> tokens_options() {
    return {
        field_option<double>(
            "specialised_share", [](auto& o) -> auto& { return o.constants.specialised_share; },
            "A head is specialised when one key is its top key in at least this share of the "
            "inputs...")
            .in(kFrame)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                metrics::check_specialised_share(o.constants.specialised_share);
            }),
        field_option<int64_t>(
            "specialised_min_inputs",
            [](auto& o) -> auto& { return o.constants.specialised_min_inputs; },
            "...and it was seen on at least this many inputs")
            .in(kFrame)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                metrics::check_specialised_min_inputs(o.constants.specialised_min_inputs);
            }),
    };
}

std::vector<OptionSpec> frame_options() {
    return {
        field_option<double>(
            "frame_share_first",
            [](auto& o) -> auto& { return o.constants.centralized_share_first; },
            "Reference frame is centralized when at least this share of the mid/late layers' "
            "anchors is the first position...")
            .in(kFrame)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                metrics::check_frame_share_first(o.constants.centralized_share_first);
            }),
        field_option<double>(
            "frame_max_reference_count",
            [](auto& o) -> auto& { return o.constants.centralized_max_reference_count; },
            "...and the mean number of reference tokens is below this")
            .in(kFrame)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                metrics::check_frame_max_reference_count(
                    o.constants.centralized_max_reference_count);
            }),
        field_option<std::string>(
            "frame_verdict", [](auto& o) -> auto& { return o.constants.frame_verdict; },
            "Which reference-frame verdict frame.json and the report give: signatures (the "
            "paper's signatures together, with a margin; 'inconclusive' when they disagree) or "
            "rule (the two cutoffs above alone)")
            .in(kFrame)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                metrics::check_frame_verdict(o.constants.frame_verdict);
            }),
        field_option<std::vector<double>>(
            "frame_reference_counts",
            [](auto& o) -> auto& { return o.constants.frame_reference_counts; },
            "Signature verdict: the mean reference counts of a centralized, distributed and "
            "bidirectional frame (the paper's); a run's count scores the two it lies between")
            .in(kFrame)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                metrics::check_frame_reference_counts(o.constants.frame_reference_counts);
            }),
        field_option<double>(
            "frame_min_margin", [](auto& o) -> auto& { return o.constants.frame_min_margin; },
            "Signature verdict: inconclusive when the winning type leads the next by less than "
            "this share of the signatures measured")
            .in(kFrame)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                metrics::check_frame_min_margin(o.constants.frame_min_margin);
            }),
    };
}

std::vector<OptionSpec> value_options() {
    return {
        field_option<double>(
            "reference_threshold", [](auto& o) -> auto& { return o.reference_threshold; },
            "Value space: a key is a reference when its column mean exceeds this")
            .in(kFrame)
            .only(C::ModelOnly)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                if (!(std::isfinite(o.reference_threshold) && o.reference_threshold >= 0))
                    throw UsageError("--reference-threshold must be a number >= 0");
            }),
        field_option<double>(
            "reference_fallback", [](auto& o) -> auto& { return o.reference_fallback; },
            "Value space: without such keys, the top fraction of keys by column mean")
            .in(kFrame)
            .only(C::ModelOnly)
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                if (!metrics::in_unit_interval(o.reference_fallback) ||
                    !metrics::in_unit_interval(o.reference_cap))
                    throw UsageError(
                        "--reference-fallback and --reference-cap must be fractions in [0, 1]");
            }),
        field_option<double>(
            "reference_cap", [](auto& o) -> auto& { return o.reference_cap; },
            "Value space: at most this fraction of the keys are references")
            .in(kFrame)
            .only(C::ModelOnly),
    };
}

std::vector<OptionSpec> sink_eps_options() {
    return {
        field_option<double>(
            "sink_eps", [](auto& o) -> auto& { return o.sink_eps; },
            "Sink_eps: a head counts as a sink head when its mean attention to "
            "key --sink-eps-key exceeds this (Gu et al. 2025)")
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                if (!(std::isfinite(o.sink_eps) && o.sink_eps >= 0 && o.sink_eps < 1))
                    throw UsageError("--sink-eps must be in [0, 1)");
            }),
        field_option<int64_t>(
            "sink_eps_key", [](auto& o) -> auto& { return o.sink_eps_key; },
            "Key position Sink_eps measures")
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                if (o.sink_eps_key < 0) throw UsageError("--sink-eps-key must be >= 0");
            }),
    };
}

std::vector<OptionSpec> statistics_options() {
    return {
        field_option<int64_t>(
            "bootstrap", [](auto& o) -> auto& { return o.bootstrap; },
            "Bootstrap resamples over inputs for confidence intervals of the "
            "headline numbers (bootstrap.csv; 0: none; typical 1000)")
            .in(kStatisticsGroup)
            .not_compared()
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                if (o.bootstrap < 0) throw UsageError("--bootstrap must be >= 0 (0: no intervals)");
                if (o.bootstrap != 0 && o.bootstrap < 100)
                    throw UsageError(
                        "--bootstrap needs at least 100 resamples for a percentile interval, "
                        "got " +
                        std::to_string(o.bootstrap));
                if (o.bootstrap > 1000000)
                    throw UsageError("--bootstrap is capped at 1000000 resamples");
            }),
        field_option<double>(
            "confidence", [](auto& o) -> auto& { return o.confidence; },
            "Level of the bootstrap intervals and of the --group-by intervals")
            .in(kStatisticsGroup)
            .not_compared()
            .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                if (!(std::isfinite(o.confidence) && o.confidence > 0 && o.confidence < 1))
                    throw UsageError("--confidence must be in (0, 1)");
            }),
        field_option<std::string>(
            "group_by", [](auto& o) -> auto& { return o.group_by; },
            "Group the inputs by this column of the --data file (carried along as with "
            "--keep-columns): groups.csv has each group's mean and t-interval of the headline "
            "per-input values, group_tests.csv a test between the groups (Welch's t for two, "
            "one-way ANOVA for more)")
            .in(kStatisticsGroup)
            .only(C::ModelOnly)
            .not_compared()
            .checked([](const AnalysisOptions& o, const OptionCheckContext& c) {
                if (!o.group_by.empty() && !(c.input && c.input->data_columns))
                    throw UsageError(
                        "--group-by groups inputs by a column of their data file: it needs "
                        "`sinkscope analyze --data FILE` (an attention file has no data "
                        "columns)");
            }),
    };
}

std::vector<AnalysisInfo>& rows() {
    auto ref_frame = [](const char* which) {
        return [which](const AnalysisContext& c) { return make_ref_frame(c, which); };
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
    static std::vector<AnalysisInfo> rows = {
        {.name = "compositional",
         .description = "sink vs content split per head, Aitchison and classical head distance "
                        "matrices, content/sink dispersion and rho",
         .layer_scope = true,
         .headlines = {per_head(m::kSinkMass), per_head(m::kEntropy),
                       per_head(m::kBinarySinkEntropy), per_head(m::kContentEntropyRenorm),
                       per_head(m::kContentEntropyWeighted)},
         .make = make_compositional,
         .compare_values = compositional_compare_values},
        {.name = "heads",
         .description = "reversal rates, MDS and clustering with ARI, regime predictor on the "
                        "compositional distance matrices",
         .layer_scope = true,
         .after = {"compositional"},
         .options = heads_options(),
         .make = make_heads,
         .compare_values = heads_compare_values,
         .trajectory_values = heads_trajectory_values},
        {.name = "failure_geometry",
         .description = "where classical metrics stop separating heads: every head-pair "
                        "distance (cosine, JS, Euclidean, keep and drop; dA, dA_perp) by the "
                        "pair's sink mass, as quantile bands per sink-mass bin",
         .layer_scope = true,
         .after = {"compositional"},
         .options = {field_option<int>(
                         "failure_bins", [](auto& o) -> auto& { return o.failure_bins; },
                         "Equal sink-mass bins of [0, 1] of failure_geometry.csv")
                         .in(kHeadGroup)
                         .checked([](const AnalysisOptions& o, const OptionCheckContext&) {
                             if (o.failure_bins < 1 || o.failure_bins > 1000)
                                 throw UsageError("--failure-bins must be in 1..1000, got " +
                                                  std::to_string(o.failure_bins));
                         })},
         .make = make_failure_geometry},
        {.name = "clark2019",
         .description = "the standard BERT head-clustering pipeline (Clark et al. 2019: JS of "
                        "rows smoothed 0.001/T + 0.999 p, summed over rows), with the sink kept "
                        "and dropped, clustered (--linkage, --k) and compared by ARI; only when "
                        "named",
         .in_all = false,
         .make = make_clark2019},
        {.name = "graphs",
         .description = "thresholded attention graphs: density, Laplacian spectrum, star-likeness, "
                        "centralization",
         .headlines = {per_layer(t::kGraphs, m::kDensity), per_layer(t::kGraphs, m::kLambda2),
                       per_layer(t::kGraphs, m::kLaplacianGap),
                       per_layer(t::kGraphs, m::kCentralization),
                       per_layer(t::kGraphs, m::kDegreeVariance), per_layer(t::kGraphs, m::kGini),
                       per_layer(t::kGraphs, m::kStarCombined)},
         .options = graphs_options(),
         .make = ref_frame("graphs")},
        {.name = "topology",
         .description = "persistent homology of 1 - attention: bars, Betti curves",
         .options = topology_options(),
         .make = ref_frame("topology")},
        {.name = "kl",
         .description = "KL divergence of heads from their average before/after sink removal, "
                        "sink concentration, direct sink mass",
         .headlines = {per_layer(t::kKl, m::kKlReduction)},
         .options = kl_options(),
         .make = ref_frame("kl")},
        {.name = "spectra",
         .description = "singular-value spectra of attention vs Marchenko-Pastur",
         .make = ref_frame("spectra"),
         .trajectory_values = spectra_trajectory_values},
        {.name = "entropy",
         .description = "row entropy of the head-averaged attention",
         .headlines = {per_layer(t::kEntropy, m::kEntropyAllRows)},
         .make = ref_frame("entropy")},
        {.name = "tokens",
         .description = "token specialisation: each head's top key and its consistency",
         .needs = {.token_strings = true},
         .options = tokens_options(),
         .make = ref_frame("tokens")},
        {.name = "frame",
         .description = "reference-frame type from where the anchors sit",
         .options = frame_options(),
         .make = ref_frame("frame")},
        {.name = "attention_stats",
         .description = "mean, maximum and standard deviation of the entries of each layer's "
                        "head-averaged attention (the reference-frame paper's per-layer "
                        "statistics); only when named",
         .in_all = false,
         .make = ref_frame("attention_stats")},
        {.name = "value",
         .description = "value space: reference tokens, relative magnitude and direction of their "
                        "contribution, transformation magnitude, alignment",
         .needs = {.hidden_states = true},
         .headlines = {per_layer(t::kValueSpace.name, m::kRelativeMagnitude)},
         .options = value_options(),
         .make = make_value_space},
        {.name = "sink_geometry",
         .description = "sink geometry: per head the key norm at the sink against the other keys' "
                        "norms, and the queries' cosine with the sink's key against the others' "
                        "(after any rotary embedding)",
         .needs = {.queries_keys = true},
         .make = make_sink_geometry,
         .trajectory_values = sink_geometry_trajectory_values},
        {.name = "sink_eps",
         .description =
             "Sink_eps: share of heads whose mean attention to position 0 (--sink-eps-key) "
             "exceeds eps (--sink-eps, default 0.3), per layer and for the model",
         .options = sink_eps_options(),
         .make = make_sink_eps,
         .compare_values = sink_eps_compare_values,
         .trajectory_values = sink_eps_trajectory_values},
        {.name = "entropy_rows",
         .description = "every row's sink mass and entropy parts (entropy_rows.npy), so runs on "
                        "the same inputs can be paired row by row (sinkscope dynamics); only when "
                        "named",
         .in_all = false,
         .make = make_entropy_rows,
         .trajectory_values = entropy_rows_trajectory_values},
        {.name = "statistics",
         .description = "over inputs: bootstrap intervals of the headline numbers (--bootstrap), "
                        "correlations with p-values, paired test of KL before/after sink removal, "
                        "group means and tests (--group-by)",
         .needs = {.per_input_values = true},
         .options = statistics_options(),
         .make = make_statistics},
    };
    return rows;
}

}  // namespace

const std::vector<AnalysisInfo>& registry() {
    return rows();
}

void register_analysis(AnalysisInfo info) {
    std::vector<AnalysisInfo>& r = rows();
    for (const auto& row : r)
        if (std::string(row.name) == info.name)
            throw UsageError(std::string("analysis '") + info.name + "' is registered twice");
    const std::vector<OptionSpec>& taken = option_specs();
    for (const OptionSpec& s : info.options)
        for (const OptionSpec& other : taken)
            if (other.key == s.key)
                throw UsageError("option '" + s.key + "' of analysis '" + info.name +
                                 "' is already an option" +
                                 (other.analysis.empty() ? std::string(" of every analysis")
                                                         : " of '" + other.analysis + "'"));
    // Before statistics, which reads the per-input values of every analysis before it.
    const auto stats = std::find_if(r.begin(), r.end(), [](const AnalysisInfo& row) {
        return std::string(row.name) == "statistics";
    });
    r.insert(stats, std::move(info));
}

const AnalysisInfo& find_analysis(const std::string& name) {
    for (const auto& info : registry())
        if (name == info.name) return info;
    std::string known;
    for (const auto& info : registry()) known += std::string(known.empty() ? "" : ", ") + info.name;
    throw UsageError("--analyses: unknown analysis '" + name + "' (known: all, " + known + ")");
}

}  // namespace sinkscope::analysis
