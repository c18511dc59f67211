// The schemas of every table sinkscope writes: file name, columns and the metric names of its
// long-format rows. One definition shared by the analyses that write the tables and by the
// report figures that read them, so a renamed column or metric is a compile error on both sides
// instead of an empty figure. Header-only (the report module reads it without linking analysis;
// it needs io, which both link).
#pragma once

#include <string>
#include <vector>

#include "sinkscope/io/table.hpp"
#include "sinkscope/metrics/ref_frame_names.hpp"

namespace sinkscope::analysis::tables {

struct TableSchema {
    const char* name;                  // file stem: <name>.csv (and <name>.jsonl when written)
    std::vector<std::string> columns;  // in file order
    std::string file() const { return std::string(name) + ".csv"; }
};

// Long format of DESIGN.md (heads.csv, value_space.csv).
inline const TableSchema kHeads{"heads", io::make_long_table().columns()};
inline const TableSchema kValueSpace{"value_space", io::make_long_table().columns()};
// Sink_eps (spec 8.q): per head the mean attention to the key, per layer and model the share.
inline const TableSchema kSinkEps{"sink_eps", io::make_long_table().columns()};
// Sink geometry (reference-frame paper 3.3): per head, layer (head -1) and model (layer -1), key
// norms and query-key cosines at the sink (metrics::k_sink_geometry_metrics).
inline const TableSchema kSinkGeometry{"sink_geometry", io::make_long_table().columns()};
// The Clark et al. (2019) pipeline's clusterings, sink kept and dropped, and their ARI
// (metrics/clark2019.hpp).
inline const TableSchema kClark2019{"clark2019",
                                    {"matrix", "layer", "head", "cluster", "k", "mds_x", "mds_y"}};
inline const TableSchema kClark2019Ari{"clark2019_ari", {"first", "second", "k", "ari"}};
// Head-pair distances by the pair's sink mass (metrics/failure_geometry.hpp).
inline const TableSchema kFailureGeometry{"failure_geometry",
                                          {"model", "matrix", "bin_lo", "bin_hi", "n_pairs", "min",
                                           "q05", "q25", "median", "q75", "q95", "max"}};
inline const TableSchema kDistances{
    "distances", {"distance", "layer_a", "head_a", "layer_b", "head_b", "value"}};
inline const TableSchema kDispersion{"dispersion",
                                     {"scope", "layer", "c_perp", "v_b", "rho", "n_rows"}};
// `row`: the input's 0-based row in the data file (analysis/inputs.hpp), for joining to the data.
inline const TableSchema kSinks{"sinks", {"input", "row", "layer", "sink_position"}};
// Per layer and query position, heads.csv sink_mass over the rows at that position.
inline const TableSchema kSinkByPosition{"sink_by_position",
                                         {"layer", "position", "sink_mass", "n_rows"}};

// Section 8 tables: one row per (layer, head, metric, param), mean and population std over the
// inputs; n_skipped (compat graphs only) counts inputs where the notebook skips the cell.
inline const std::vector<std::string> kRefFrameColumns = {
    "model",      "checkpoint", "layer", "head", "metric",     "param",
    "convention", "value",      "std",   "n",    "n_nonfinite"};
// Their names, as the reference-frame members write them (metrics/ref_frame_names.hpp).
using metrics::ref_frame_names::kBetti;
using metrics::ref_frame_names::kEntropy;
using metrics::ref_frame_names::kGraphs;
using metrics::ref_frame_names::kKl;
using metrics::ref_frame_names::kSpectra;
using metrics::ref_frame_names::kTokens;
using metrics::ref_frame_names::kTopology;
inline const TableSchema kTokenKeys{
    "token_keys", {"model", "checkpoint", "layer", "head", "key", "count", "share", "convention"}};
inline constexpr const char* kFrameFile = "frame.json";
// The reference-frame signatures (metrics::read_frame_signatures): one row per signature, its
// reading and the score it gives each frame type; the verdict and margin are in frame.json.
inline const TableSchema kFrameSignatures{
    "frame_signatures",
    {"model", "checkpoint", "signature", "measured", "value", "reading", "prediction",
     "centralized", "distributed", "bidirectional"}};
// regions.csv: per quantity (source table, metric, param) of the reference-frame tables, a
// statistic of a region of layers (early, middle, late, all, a pair "early-middle", a ratio
// "middle/early", "first-last"); `layers` the model layers it covers (docs/metrics.md).
inline const TableSchema kRegions{metrics::ref_frame_names::kRegions,
                                  {"model", "checkpoint", "table", "metric", "param", "region",
                                   "layers", "statistic", "value", "convention"}};

// Head-level analyses (spec 3, 4, 7).
inline constexpr const char* kReversal = "reversal";
inline constexpr const char* kSilhouette = "silhouette";
inline constexpr const char* kClusters = "clusters";
inline constexpr const char* kAri = "ari";
inline constexpr const char* kRegime = "regime";

// Statistics over inputs.
inline const TableSchema kBootstrap{
    "bootstrap",
    {"model", "checkpoint", "table", "layer", "head", "metric", "param", "estimate", "ci_lo",
     "ci_hi", "level", "n", "n_resamples", "seed"}};
inline const TableSchema kCorrelations{
    "correlations", {"model", "checkpoint", "layer", "param", "x", "y", "method", "r", "p", "n"}};
inline const TableSchema kPairedTests{
    "paired_tests",
    {"model", "checkpoint", "table", "layer", "param", "first", "second", "test", "mean_difference",
     "statistic", "df", "p", "n"}};
// --group-by COLUMN: per group of inputs (by their value of a data column) the mean of each
// headline per-input value with its t-interval, and a test between the groups.
inline const TableSchema kGroups{
    "groups",
    {"model", "checkpoint", "table", "layer", "head", "metric", "param", "group_by", "group", "n",
     "mean", "sd", "ci_lo", "ci_hi", "level"}};
inline const TableSchema kGroupTests{
    "group_tests",
    {"model", "checkpoint", "table", "layer", "head", "metric", "param", "group_by", "n_groups",
     "test", "statistic", "df1", "df2", "p", "n"}};
// --per-input: <table>_per_input.csv, one row per (input, layer, head, metric, param); `row` is
// the input's 0-based row in the data file, `weight` the input's weight in the summary mean
// (rows used for heads.csv, 1 elsewhere); the data columns of --keep-columns follow `weight`.
inline const std::vector<std::string> kPerInputColumns = {
    "model", "checkpoint", "input", "row", "layer", "head", "metric", "param", "value", "weight"};
inline std::string per_input_name(const std::string& table) {
    return table + "_per_input";
}

// `sinkscope fisher` (spec 8, Fisher): fisher.csv is the long format (per layer and per head,
// metric names below, convention = the Fisher kind); fisher_tensors.csv one row per parameter
// tensor.
inline const TableSchema kFisher{"fisher", io::make_long_table().columns()};
inline const TableSchema kFisherTensors{
    "fisher_tensors",
    {"model", "checkpoint", "layer", "tensor", "role", "component", "n_params", "fisher",
     "fisher_per_param", "convention"}};
// `sinkscope patch` (api/patch.hpp): one row per hook (and head) patched from the source run.
inline const TableSchema kPatch{"patch",
                                {"hook", "layer", "head", "position", "metric", "value",
                                 "target_value", "source_value", "recovered"}};
// `sinkscope prune`.
inline const TableSchema kPrune{"prune",
                                {"method", "seed", "sparsity", "n_pruned", "measure", "value",
                                 "mean_nll", "n_scored", "change", "pruned_heads"}};
inline const TableSchema kPruneRandom{
    "prune_random", {"sparsity", "n_pruned", "measure", "n_seeds", "mean", "std", "min", "max"}};
inline const TableSchema kPruneOrder{"prune_order",
                                     {"channel", "step", "layer", "head", "redundancy"}};

// `sinkscope dynamics`: per checkpoint (step: training step, empty when the manifest gives only
// labels) the model's and each layer's quantities over training; the exact split of the entropy
// change (spec 6) per pair of checkpoints (pair: consecutive or first_last) and layer; the
// reference-frame type per checkpoint.
inline const TableSchema kTrajectory{
    "trajectory", {"model", "checkpoint", "step", "layer", "head", "metric", "param", "value"}};
inline const TableSchema kEntropySplit{
    "entropy_split",
    {"model", "from", "to", "from_step", "to_step", "pair", "layer", "n_rows", "sink_term",
     "content_term", "delta_entropy", "residual", "sink_share", "unpaired_rows"}};
inline const TableSchema kFrameTypes{
    "frame_types",
    {"model", "checkpoint", "step", "frame_type", "share_first_mid_late", "mean_reference_count"}};

// entropy_rows.npy (analysis entropy_rows): float64 [R, entropy_row::kCount], one row per
// (input, layer, head, query) in that order, its columns named by kEntropyRowColumns (run.json);
// dynamics reads the file back by these positions.
inline constexpr const char* kEntropyRowsFile = "entropy_rows.npy";
namespace entropy_row {
enum Column : int64_t {
    kInput,
    kLayer,
    kHead,
    kQuery,
    kSinkMass,        // s
    kContentMass,     // 1 - s, summed from the content parts (accurate near s = 1)
    kContentEntropy,  // H(pi), nats
    kEntropy,         // H(p), nats, measured on the whole row
    kCount
};
}  // namespace entropy_row
inline const std::vector<std::string> kEntropyRowColumns = {
    "input", "layer", "head", "query", "sink_mass", "content_mass", "content_entropy", "entropy"};

// Metric names read by other analyses or by the report.
namespace metric {
inline constexpr const char* kSinkMass = "sink_mass";
inline constexpr const char* kSinkBalance = "sink_balance";
inline constexpr const char* kEntropy = "entropy";
inline constexpr const char* kBinarySinkEntropy = "binary_sink_entropy";
// H(pi), the content composition renormalised to sum 1, and (1 - s) H(pi), the content term of
// the entropy identity H(p) = H_b(s) + (1 - s) H(pi) (spec 1): both, so the identity can be checked
// from heads.csv alone.
inline constexpr const char* kContentEntropyRenorm = "content_entropy_renorm";
inline constexpr const char* kContentEntropyWeighted = "content_entropy_weighted";
// ||clr(pi)||_2 per row, the head's content concentration (the cross-head content dispersion is
// dispersion.csv's c_perp).
inline constexpr const char* kContentConcentration = "content_concentration";
// dynamics' trajectory: the mean of H(pi) over the rows (entropy_rows.npy).
inline constexpr const char* kContentEntropy = "content_entropy";
inline constexpr const char* kNRows = "n_rows";
// The section 8 metrics (metrics/ref_frame_names.hpp): kDensity, kLambda2, kKlReduction,
// kEntropyAllRows, kSinkMassAllRows, ...
using namespace metrics::ref_frame_names;
inline constexpr const char* kRelativeMagnitude = "relative_magnitude";
// sink_eps.csv: per layer and for the model, the share of heads above eps (spec 8.q).
inline constexpr const char* kSinkEps = "sink_eps";
inline constexpr const char* kTransformationMagnitude = "transformation_magnitude";
// fisher.csv: per layer "fisher_<component>" (component names of model::component_name),
// kFisherAttention (q + k + v + o), kFisherLayerTotal, kAttentionShare; per head kFisherHead
// + "_q" / "_k" / "_v" / "_o" and kFisherHead (their sum); at layer -1 the tensors outside the
// blocks and kFisherModelTotal.
inline constexpr const char* kFisherPrefix = "fisher_";
inline constexpr const char* kFisherAttention = "fisher_attention";
inline constexpr const char* kFisherLayerTotal = "fisher_total";
inline constexpr const char* kFisherModelTotal = "fisher_model_total";
inline constexpr const char* kAttentionShare = "attention_share";
inline constexpr const char* kFisherHead = "fisher_head";
// fisher --compat ruscio2025 (convention ruscio2025): the notebook's name-based grouping.
inline constexpr const char* kFisherNotebookLayer = "fisher_layer_by_name";
inline constexpr const char* kFisherNotebookAttention = "fisher_attention_by_name";
inline constexpr const char* kFisherNotebookMlp = "fisher_mlp_by_name";
inline constexpr const char* kFisherNotebookEmbedding = "fisher_embedding_by_name";
inline constexpr const char* kAttentionShareNotebook = "attention_share_by_name";
}  // namespace metric

}  // namespace sinkscope::analysis::tables
