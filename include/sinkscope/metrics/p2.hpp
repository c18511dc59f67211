// All P2 analyses of spec section 8 on attention tensors (graphs, topology, sink KL, spectra,
// entropy, token specialisation, reference frame), accumulated over inputs with mergeable
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

#include <nlohmann/json.hpp>

#include "sinkscope/core/progress.hpp"
#include "sinkscope/core/serialize.hpp"
#include "sinkscope/metrics/attention.hpp"
#include "sinkscope/metrics/frame.hpp"
#include "sinkscope/metrics/sink.hpp"
#include "sinkscope/metrics/topology.hpp"

namespace sinkscope::metrics {

// Options 1:1 with the CLI flags of `sinkscope metrics`; the in-class defaults are the only
// defaults.
struct P2Options {
    std::string analyses = "graphs,topology,kl,spectra,entropy,tokens,frame";  // --analyses
    std::string compat;              // --compat: "" (principled) or "ruscio2025"
    bool per_head = false;           // --per-head: graphs, topology and spectra per head too
    std::string symmetrize = "max";  // --symmetrize max|mean (principled topology distance)
    std::string tokens;              // --tokens FILE: read by the CLI, strings passed to add()
    // --sink: the policy whose resolved per-layer sink s is the key of the direct sink mass (spec
    // 0, 10.d, 10.k). add() resolves it per input unless the caller passes the positions.
    SinkPolicy sink{SinkPolicy::Kind::First};
    int64_t threads = 1;             // --threads: layers analysed in parallel (results identical)
    // --topology-max-tokens: principled persistent homology of inputs longer than this runs on
    // this many tokens picked evenly (numpy linspace, as compat's B.3 downsampling); the Rips
    // complex of n points needs O(n^3) triangles. 0 = never subsample.
    int64_t topology_max_tokens = 256;
};

// Options after validation.
struct P2Config {
    bool graphs = true, topology = true, kl = true, spectra = true, entropy = true, tokens = true,
         frame = true;
    bool compat = false;
    bool per_head = false;
    Symmetrize symmetrize = Symmetrize::Max;
    SinkPolicy sink{SinkPolicy::Kind::First};
    int64_t topology_max_tokens = 256;
    std::string tokens_file;  // names the token strings in errors
    const char* mode() const { return compat ? "ruscio2025" : "principled"; }
};
// Throws UsageError naming the bad option value.
P2Config resolve_p2_options(const P2Options& options);

// Layers each analysis visits (spec 10.o for compat; all layers otherwise).
std::vector<int64_t> topology_layers(int64_t n_layers, bool compat);  // also token spec.
std::vector<int64_t> kl_layers(int64_t n_layers, bool compat);

// Mean row entropy (nats) of a [n, n] matrix over rows [0, n): closed rows, zero entries skipped
// (principled, 10.m). Compat (B.7): entries > 100 float eps kept and renormalised.
double mean_row_entropy(const Eigen::MatrixXd& a, bool compat);

// Running mean/variance of one metric over inputs; non-finite values are counted, not summed
// (rmt.ipynb drops inf/NaN when aggregating). Inputs for which the metric does not exist (compat
// graph cells the notebook skips, 10.r) are counted in n_skipped and enter neither.
struct P2Stat {
    double sum = 0, sum_sq = 0;
    int64_t n = 0, n_nonfinite = 0, n_skipped = 0;
    void add(double v);
    void skip() { ++n_skipped; }
    void merge(const P2Stat& o);
    double mean() const;  // NaN when n == 0
    double std() const;   // population std over inputs
};

// table: graphs | topology | betti | kl | spectra | entropy | tokens; head -1 = head average
// (or layer-level value), layer -1 = model-level; param: threshold, percentile, eps or key.
struct P2Key {
    std::string table;
    int64_t layer = -1;
    int64_t head = -1;
    std::string metric;
    std::string param;
    auto operator<=>(const P2Key&) const = default;
};

struct P2Diagram {
    int64_t input = 0;  // ordinal of the input within the accumulated set
    int64_t layer = 0;
    int64_t head = -1;
    std::vector<PersistenceBar> bars;
};

struct P2Results {
    std::string model;  // written in the model / checkpoint columns (DESIGN.md long format)
    std::string checkpoint;
    P2Config config;
    int64_t n_inputs = 0;
    int64_t n_layers = 0;
    int64_t n_heads = 0;
    bool any_causal = false;
    std::map<P2Key, P2Stat> stats;
    // (layer, head) -> top-key (token string, or position when no strings) -> inputs
    std::map<std::pair<int64_t, int64_t>, std::map<std::string, int64_t>> top_keys;
    // (layer, head) -> top-key -> ordinal of the first input where it was the top key (compat
    // breaks modal ties by it, as the notebook's insertion-ordered dictionary does; B.10)
    std::map<std::pair<int64_t, int64_t>, std::map<std::string, int64_t>> top_key_first_input;
    std::vector<P2Diagram> diagrams;  // diagrams of the first k_saved_diagram_inputs inputs
    FrameEvidence frame;
    FrameType verdict = FrameType::Distributed;  // set by finish()
    std::vector<std::string> warnings;           // to be printed by the CLI
};

// Diagrams are kept for this many inputs so memory does not grow with N.
inline constexpr int64_t k_saved_diagram_inputs = 8;

class P2Accumulator {
  public:
    explicit P2Accumulator(const P2Options& options = {});
    // Adds one input. `token_strings` ([T]) names the keys of token specialisation. `sinks` are
    // the input's resolved sink positions (the pipeline passes those of the head metrics, so
    // every output uses the same ones); null: resolved here from options.sink. Throws
    // InputError naming `source` (the file it came from) on shapes or values that cannot be
    // attention; nothing is accumulated then.
    void add(const AttentionInput& input, const std::vector<std::string>* token_strings = nullptr,
             const std::string& source = "attention", const SinkPositions* sinks = nullptr);
    // Combines another shard's state (same options, same model).
    void merge(const P2Accumulator& other);
    // Derived values (effectiveness, consistency, verdict, warnings).
    P2Results finish() const;

    int64_t n_inputs() const { return state_.n_inputs; }
    // Exact state for resumable runs (src/metrics/accumulator_state.cpp).
    void save(BinaryWriter& w) const;
    void load(BinaryReader& r);
    // Reports add()'s progress through an input as stage "section 8", in layers finished.
    void set_progress(StageProgress fn) { progress_ = std::move(fn); }

  private:
    StageProgress progress_;
    P2Results state_;
    int64_t threads_ = 1;
};

// Writes graphs.csv, topology.csv, betti.csv, diagrams/*.npy, kl.csv, spectra.csv, entropy.csv,
// tokens.csv, token_keys.csv, frame.json (whatever was computed) under `dir`.
void write_p2_outputs(const P2Results& results, const std::filesystem::path& dir);

// Conventions and constants that produced the results (for run.json).
nlohmann::json p2_conventions(const P2Results& results);

// A few human-readable lines for stdout.
std::string summarize_p2(const P2Results& results);

}  // namespace sinkscope::metrics
