// All reference-frame analyses of spec section 8 on attention tensors (graphs, topology, sink KL,
// spectra, entropy, token specialisation, reference frame), accumulated over inputs with mergeable
// state, and written as long-format tables. Semantics: principled by default, the released
// notebooks with compat = "ruscio2025" (spec 10.o, PAPERS.md part B).
#pragma once

#include <array>
#include <compare>
#include <cstddef>  // before attention.hpp, which uses size_t without it
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sinkscope/core/progress.hpp"
#include "sinkscope/core/serialize.hpp"
#include "sinkscope/metrics/attention.hpp"
#include "sinkscope/metrics/frame.hpp"
#include "sinkscope/metrics/graph.hpp"
#include "sinkscope/metrics/sink.hpp"
#include "sinkscope/metrics/sink_kl.hpp"
#include "sinkscope/metrics/topology.hpp"

namespace sinkscope::metrics {

// Spec section 8 constants; the defaults of the options below (analysis::AnalysisOptions takes
// its defaults from here).
inline constexpr int64_t k_default_topology_max_tokens = 256;

// The scientific constants of section 8, defaults the spec's values: graph thresholds tau (10.i),
// sink percentiles t (10.k), the effective-density band (10.i), the long-bar persistence (10.j)
// the specialisation rule (10.m) and the frame rule (10.n).
struct RefFrameConstants {
    std::vector<double> graph_thresholds{k_graph_thresholds.begin(), k_graph_thresholds.end()};
    std::vector<double> sink_percentiles{k_sink_percentiles.begin(), k_sink_percentiles.end()};
    double effective_density_lo = k_effective_density_lo;
    double effective_density_hi = k_effective_density_hi;
    double long_bar = k_long_bar;
    double specialised_share = k_specialised_share;
    int64_t specialised_min_inputs = k_specialised_min_inputs;
    // The frame verdict (10.n): centralized when the share of first-position anchors reaches
    // this and the mean reference count stays below that.
    double centralized_share_first = k_centralized_share_first;
    double centralized_max_reference_count = k_centralized_max_reference_count;
    // Which verdict frame.json and the report give: "signatures" (read_frame_signatures, with
    // these prototype reference counts and minimum margin) or "rule" (the rule above, 10.n).
    std::string frame_verdict = "signatures";
    std::vector<double> frame_reference_counts{k_frame_reference_counts.begin(),
                                               k_frame_reference_counts.end()};
    double frame_min_margin = k_frame_min_margin;
    FrameSignatureRule signature_rule() const {
        return {.concentrated = centralized_share_first,
                .reference_counts = {frame_reference_counts.at(0), frame_reference_counts.at(1),
                                     frame_reference_counts.at(2)},
                .min_margin = frame_min_margin,
                .specialised_share = specialised_share,
                .specialised_min_inputs = specialised_min_inputs};
    }
};

// Options of the reference-frame accumulator; the in-class defaults are the spec's values.
struct RefFrameOptions {
    // Comma-separated analyses (ref_frame_members(): graphs, topology, kl, spectra, entropy,
    // tokens, frame), or "all".
    std::string analyses = "all";
    std::string compat;              // "" (principled) or "ruscio2025"
    bool per_head = false;           // graphs, topology and spectra per head too
    std::string symmetrize = "max";  // max | mean (principled topology distance)
    std::string kl_rows = "paired";  // paired | all: rows of kl_before (sink_kl.hpp)
    std::string tokens;              // names the token strings passed to add() in errors
    // The policy whose resolved per-layer sink s is the key of the direct sink mass (spec 0,
    // 10.d, 10.k). add() resolves it per input unless the caller passes the positions.
    SinkPolicy sink{SinkPolicy::Kind::First};
    int64_t threads = 1;  // layers analysed in parallel (results identical)
    // Principled persistent homology of inputs longer than this runs on this many tokens picked
    // evenly (numpy linspace, as compat's B.3 downsampling); the Rips complex of n points needs
    // O(n^3) triangles. 0 = never subsample.
    int64_t topology_max_tokens = k_default_topology_max_tokens;
    RefFrameConstants constants;
    // The model's index of each layer of the inputs (analyze --layers analyses some layers only;
    // empty: input layer l is model layer l) and the model's layer count (0: the inputs'). The
    // layer rules of 10.n (middle and late layers) and 10.o (compat's layer subsets) are taken on
    // the model's indices, so a layer gets the same values whichever other layers are analysed.
    std::vector<int64_t> layer_ids;
    int64_t model_layers = 0;
};

// Options after validation.
struct RefFrameConfig {
    std::vector<std::string> analyses;  // the analyses run, in ref_frame_members() order
    bool runs(const std::string& analysis) const;
    bool compat = false;
    bool per_head = false;
    Symmetrize symmetrize = Symmetrize::Max;
    bool kl_all_rows = false;  // kl_rows = all
    SinkPolicy sink{SinkPolicy::Kind::First};
    int64_t topology_max_tokens = k_default_topology_max_tokens;
    RefFrameConstants constants;
    std::string tokens_file;         // names the token strings in errors
    std::vector<int64_t> layer_ids;  // RefFrameOptions::layer_ids
    int64_t model_layers = 0;
    const char* mode() const { return compat ? "ruscio2025" : "principled"; }
    // The model's index of input layer l, and its layer count, for inputs of n_layers layers.
    int64_t layer_id(int64_t l) const {
        return l >= 0 && !layer_ids.empty() ? layer_ids[static_cast<size_t>(l)] : l;
    }
    int64_t model_layer_count(int64_t n_layers) const {
        return model_layers > 0 ? model_layers : n_layers;
    }
    // The first input layer of the middle and late layers (model index >= floor(L/3), 10.n).
    int64_t mid_late_begin(int64_t n_layers) const;
};
// Throws UsageError naming the bad option value (the checks below, and those of the analyses
// list, the sink, the threads and the layers).
RefFrameConfig resolve_ref_frame_options(const RefFrameOptions& options);

// One check per option of section 8, each throwing UsageError that names the option as the
// command line spells it; resolve_ref_frame_options and the option table (analysis/options.hpp) run
// the same ones, so a rule and its message are written once.
bool in_unit_interval(double v);  // finite and in [0, 1] (a share, a density, a percentile)
void check_compat(const std::string& compat);
void check_symmetrize(const std::string& symmetrize);
void check_kl_rows(const std::string& kl_rows);
void check_topology_max_tokens(int64_t topology_max_tokens);
void check_graph_thresholds(const std::vector<double>& thresholds);
void check_sink_percentiles(const std::vector<double>& percentiles);
void check_effective_density(double lo, double hi);
void check_long_bar(double long_bar);
void check_specialised_share(double share);
void check_specialised_min_inputs(int64_t min_inputs);
void check_frame_share_first(double share);
void check_frame_max_reference_count(double count);
void check_frame_verdict(const std::string& verdict);
void check_frame_reference_counts(const std::vector<double>& counts);
void check_frame_min_margin(double margin);

// The names of the reference-frame analyses, in the order they run (one file each,
// src/metrics/ref_frame_<name>.cpp).
std::vector<std::string> ref_frame_members();

// Layers each analysis visits (spec 10.o for compat; all layers otherwise).
std::vector<int64_t> topology_layers(int64_t n_layers, bool compat);  // also token spec.
std::vector<int64_t> kl_layers(int64_t n_layers, bool compat);

// Mean row entropy (nats) of a [n, n] matrix over rows [0, n): closed rows, zero entries skipped
// (principled, 10.m). Compat (B.7): entries > 100 float eps kept and renormalised.
double mean_row_entropy(const Eigen::MatrixXd& a, bool compat);

// Running mean/variance of one metric over inputs; non-finite values are counted, not summed
// (rmt.ipynb drops inf/NaN when aggregating). Inputs for which the metric does not exist (compat
// graph cells the notebook skips, 10.r) are counted in n_skipped and enter neither. The mean is
// sum / n; the population std comes from the running sum of squared deviations (Welford's
// update, Chan et al.'s merge), not from sum_sq / n - mean^2, which loses ~sqrt(eps) |mean| when
// the inputs agree closely.
struct RefFrameStat {
    double sum = 0;
    double run_mean = 0, m2 = 0;  // Welford: running mean and sum of squared deviations
    int64_t n = 0, n_nonfinite = 0, n_skipped = 0;
    void add(double v);
    void skip() { ++n_skipped; }
    void merge(const RefFrameStat& o);
    double mean() const;  // NaN when n == 0
    double std() const;   // population std over inputs
};

// table: graphs | topology | betti | kl | spectra | entropy | tokens; head -1 = head average
// (or layer-level value), layer -1 = model-level; param: threshold, percentile, eps or key.
struct RefFrameKey {
    std::string table;
    int64_t layer = -1;
    int64_t head = -1;
    std::string metric;
    std::string param;
    auto operator<=>(const RefFrameKey&) const = default;
};

struct RefFrameDiagram {
    int64_t input = 0;  // ordinal of the input within the accumulated set
    int64_t layer = 0;
    int64_t head = -1;
    std::vector<PersistenceBar> bars;
};

// The fields of the saved state (FieldIo, core/serialize.hpp).
void fields(FieldIo& io, RefFrameKey& k);
void fields(FieldIo& io, RefFrameStat& s);
void fields(FieldIo& io, RefFrameDiagram& d);

struct RefFrameResults {
    std::string model;  // written in the model / checkpoint columns (DESIGN.md long format)
    std::string checkpoint;
    RefFrameConfig config;
    int64_t n_inputs = 0;
    int64_t n_layers = 0;
    int64_t n_heads = 0;
    bool any_causal = false;
    std::map<RefFrameKey, RefFrameStat> stats;
    // For the first-to-last fold-change test of the region statistics (region_stats.hpp): per
    // head-average (head -1) metric, over the inputs, each input's value at its last layer minus
    // its value at its first layer (the layers where the input has a finite value of it; the
    // key's layer is that first input layer and its head that last one; the rest as in `stats`).
    std::map<RefFrameKey, RefFrameStat> first_last;
    // (layer, head) -> top-key (token string, or position when no strings) -> inputs
    std::map<std::pair<int64_t, int64_t>, std::map<std::string, int64_t>> top_keys;
    // (layer, head) -> top-key -> ordinal of the first input where it was the top key (compat
    // breaks modal ties by it, as the notebook's insertion-ordered dictionary does; B.10)
    std::map<std::pair<int64_t, int64_t>, std::map<std::string, int64_t>> top_key_first_input;
    std::vector<RefFrameDiagram> diagrams;  // diagrams of the first k_saved_diagram_inputs inputs
    FrameEvidence frame;
    FrameType verdict = FrameType::Distributed;  // set by finish(): the one --frame-verdict names
    FrameType rule_verdict = FrameType::Distributed;  // spec 10.n's rule
    FrameReading frame_reading;                       // the signatures (read_frame_signatures)
    std::vector<std::string> warnings;                // to be printed by the CLI
};

// Diagrams are kept for this many inputs so memory does not grow with N.
inline constexpr int64_t k_saved_diagram_inputs = 8;

struct RefFrameLayerOutput;  // ref_frame.cpp

class RefFrameAccumulator {
public:
    explicit RefFrameAccumulator(const RefFrameOptions& options = {});
    // Adds one input. `token_strings` ([T]) names the keys of token specialisation. `sinks` are
    // the input's resolved sink positions (the pipeline passes those of the head metrics, so
    // every output uses the same ones); null: resolved here from options.sink. Throws
    // InputError naming `source` (the file it came from) on shapes or values that cannot be
    // attention; nothing is accumulated then.
    // `per_input` (may be null) receives this input's values, in the order they enter the
    // running sums (RefFrameStat::add of each key); keys a cell skips (10.r) are absent.
    void add(const AttentionInput& input, const std::vector<std::string>* token_strings = nullptr,
             const std::string& source = "attention", const SinkPositions* sinks = nullptr,
             std::vector<std::pair<RefFrameKey, double>>* per_input = nullptr);
    // Adds one input to every accumulator of `group` in one pass over its rows: the same state
    // as adding it to each in turn. The accumulators differ at most in the analyses they run
    // (RefFrameOptions::analyses) and have seen the same inputs; the first one's threads and
    // progress are used. `per_input`: one list (or null) per accumulator, as add()'s.
    static void add_together(
        const std::vector<RefFrameAccumulator*>& group, const AttentionInput& input,
        const std::vector<std::string>* token_strings, const std::string& source,
        const SinkPositions* sinks,
        const std::vector<std::vector<std::pair<RefFrameKey, double>>*>& per_input);
    // Combines another shard's state (same options, same model).
    void merge(const RefFrameAccumulator& other);
    // Derived values (effectiveness, consistency, verdict, warnings).
    RefFrameResults finish() const;

    int64_t n_inputs() const { return state_.n_inputs; }
    // Exact state for resumable runs: the group's fields, then each member's (visit_state).
    void save(BinaryWriter& w) const;
    void load(BinaryReader& r);
    // Reports add()'s progress through an input as stage "reference-frame analyses", in layers
    // finished.
    void set_progress(StageProgress fn) { progress_ = std::move(fn); }

private:
    void apply(const AttentionInput& input, const std::vector<RefFrameLayerOutput>& outputs,
               std::vector<std::pair<RefFrameKey, double>>* per_input);
    // Saves (io over a writer: nothing is changed) or loads `state` field by field.
    void visit_state(FieldIo& io, RefFrameResults& state) const;

    StageProgress progress_;
    RefFrameResults state_;
    int64_t threads_ = 1;
};

}  // namespace sinkscope::metrics
