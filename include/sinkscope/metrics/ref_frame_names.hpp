// The names the reference-frame analyses write: their tables (RefFrameKey::table, <name>.csv) and
// the metrics of their rows (RefFrameKey::metric). One definition, used by the members that write
// them (src/metrics/ref_frame_*.cpp) and, through analysis/tables.hpp, by the table writer, the
// report, compare and dynamics: a renamed metric is a compile error everywhere.
#pragma once

namespace sinkscope::metrics::ref_frame_names {

// Tables.
inline constexpr const char* kGraphs = "graphs";
inline constexpr const char* kTopology = "topology";
inline constexpr const char* kBetti = "betti";
inline constexpr const char* kKl = "kl";
inline constexpr const char* kSpectra = "spectra";
inline constexpr const char* kEntropy = "entropy";
inline constexpr const char* kTokens = "tokens";
inline constexpr const char* kAttentionStats = "attention_stats";
// The region and trend statistics of every per-layer (head -1) quantity of the tables above
// but betti (region_stats.hpp; written by the analysis layer, src/analysis/ref_frame.cpp).
inline constexpr const char* kRegions = "regions";

// graphs (spec 10.i): per threshold.
inline constexpr const char* kDensity = "density";
inline constexpr const char* kLambda2 = "lambda2";
inline constexpr const char* kLaplacianGap = "laplacian_gap";
inline constexpr const char* kStarBasic = "star_basic";
inline constexpr const char* kStarCombined = "star_combined";
inline constexpr const char* kGini = "gini";
inline constexpr const char* kCentralization = "centralization";
inline constexpr const char* kDegreeVariance = "degree_variance";
inline constexpr const char* kNNodes = "n_nodes";
inline constexpr const char* kEffective = "effective";
inline constexpr const char* kEffectivenessScore = "effectiveness_score";
// The threshold correlation map (layer and head -1): per threshold, Pearson's r across the layers
// between lambda2 and a structure metric (name appended: r_lambda2_centralization, ...) and its
// p-value; per pair of consecutive thresholds where r changes sign, the second threshold.
inline constexpr const char* kFiedlerR = "r_lambda2_";
inline constexpr const char* kFiedlerP = "p_lambda2_";
inline constexpr const char* kFiedlerSignFlip = "sign_flip_lambda2_";
// Per threshold, on the undirected graph of W = (B + B^T)/2 without self-loops (graph_paths.hpp):
// mean hop distance over the pairs a path joins (compat: on the largest component, n <= 30),
// the share of pairs joined (principled only) and networkx's average clustering.
inline constexpr const char* kAvgShortestPath = "avg_shortest_path";
inline constexpr const char* kReachablePairShare = "reachable_pair_share";
inline constexpr const char* kClustering = "clustering";

// topology (10.j): per dimension d, the metric with "_dim<d>" appended; betti: "betti<d>".
inline constexpr const char* kNBars = "n_bars";
inline constexpr const char* kNEssential = "n_essential";
inline constexpr const char* kTotalPersistence = "total_persistence";
inline constexpr const char* kNLong = "n_long";
inline constexpr const char* kMeanPersistence = "mean_persistence";
inline constexpr const char* kMaxPersistence = "max_persistence";
inline constexpr const char* kBettiPrefix = "betti";

// kl (10.k).
inline constexpr const char* kKlBefore = "kl_before";
inline constexpr const char* kKlAfter = "kl_after";
inline constexpr const char* kKlReduction = "kl_reduction";
inline constexpr const char* kSinkConcentration = "sink_concentration";
inline constexpr const char* kSinkConcentrationPercent = "sink_concentration_percent";  // compat
inline constexpr const char* kNSinks = "n_sinks";
inline constexpr const char* kRowsExcluded = "rows_excluded";
// Section 8 quantities over every row (any D, per input, then over inputs): named apart from
// heads.csv entropy / sink_mass, which pool the rows with D >= min_parts.
inline constexpr const char* kSinkMassAllRows = "sink_mass_all_rows";

// spectra (10.l; compat B.9).
inline constexpr const char* kStableRank = "stable_rank";
inline constexpr const char* kParticipationRatio = "participation_ratio";
inline constexpr const char* kMpKs = "mp_ks";
inline constexpr const char* kSigma1Sq = "sigma1_sq";
inline constexpr const char* kSpectralGap = "spectral_gap";                       // compat
inline constexpr const char* kEigParticipationRatio = "eig_participation_ratio";  // compat
inline constexpr const char* kMpKl = "mp_kl";                                     // compat
// rmt.ipynb's (compat): the share of the column sums on the columns >= their 90th percentile,
// and the mean over rows of -sum a log2(a + 1e-10).
inline constexpr const char* kRmtSinkConcentration = "rmt_sink_concentration";  // compat
inline constexpr const char* kRmtRowEntropyBits = "rmt_row_entropy_bits";       // compat

// entropy (10.m; compat B.7).
inline constexpr const char* kEntropyAllRows = "entropy_all_rows";
inline constexpr const char* kMatrixEntropyBits = "matrix_entropy_bits";  // compat, per head

// tokens (10.m): "share_" + position class name, per head and input.
inline constexpr const char* kSharePrefix = "share_";
inline constexpr const char* kConsistency = "consistency";
inline constexpr const char* kSpecialised = "specialised";
inline constexpr const char* kHeadsModalShare = "heads_modal_share";

// attention_stats (B.2 head average; P2 notebooks, spec/PAPERS.md B.3): over the n x n entries.
inline constexpr const char* kAttentionMean = "attention_mean";
inline constexpr const char* kAttentionMax = "attention_max";
inline constexpr const char* kAttentionStd = "attention_std";

}  // namespace sinkscope::metrics::ref_frame_names
