// Head-level aggregation (spec/METRICS.md section 2, 10.d, 10.g): streaming, mergeable
// accumulators that turn one input's attention at a time into per-head means, head-by-head
// distance matrices and the content/sink dispersion. Memory is O(n_heads^2), independent of the
// number of inputs.
//
// Stable interface (other modules build on it): HeadResults::distances holds n x n matrices,
// n = n_layers * n_heads, head index = layer * n_heads + head, under exactly these names:
//   "dA", "dA_perp", "sink_term"                    Aitchison family, root mean square over rows
//   "cosine_keep", "cosine_drop", "js_keep", "js_drop", "euclidean_keep", "euclidean_drop"
//                                                   classical metrics, arithmetic mean over rows
// (keep = on the row p, drop = on the content composition pi; JS in nats, not its square root).
// Diagonals are 0. With Scope::Layer only pairs inside one layer are compared; all others are NaN.
// A pair with no common usable row is NaN. HeadResults::layer_distances (same names) holds the
// within-layer pairs computed with each layer's own sink (10.d) in model scope, for per-layer
// outputs; it is empty when every layer's sink was the model-wide one for every input.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "sinkscope/core/progress.hpp"
#include "sinkscope/core/serialize.hpp"
#include "sinkscope/metrics/attention.hpp"
#include "sinkscope/metrics/row.hpp"
#include "sinkscope/metrics/sink.hpp"

namespace sinkscope::metrics {

inline constexpr std::array<const char*, 9> kDistanceNames = {
    "dA",      "dA_perp", "sink_term",      "cosine_keep",   "cosine_drop",
    "js_keep", "js_drop", "euclidean_keep", "euclidean_drop"};

enum class Scope {
    Model,  // every pair of heads of the model; one sink per input (model-wide argmax, 10.d)
    Layer,  // only pairs within a layer; each layer uses its own sink
};
Scope parse_scope(const std::string& text);  // "model" | "layer"; UsageError otherwise
const char* to_string(Scope scope);

struct HeadOptions {
    SinkPolicy sink;        // spec 0; Auto resolves per input from its masking
    ZeroPolicy zeros;       // spec 1, 10.c (probabilities only)
    int64_t min_parts = 3;  // rows with fewer visible keys are excluded (spec 0, >= 2 by 10.p)
    Scope scope = Scope::Model;
    std::string origin = "attention";  // names the source in error messages (a file name)
    int n_threads = 1;                 // threads for the pairwise loops; 0 = all cores. Results are
                                       // identical for every thread count.
};
// The thread count `requested` stands for (0 = std::thread::hardware_concurrency()).
int resolved_threads(int requested);

struct HeadLabel {
    int64_t layer = 0;
    int64_t head = 0;
};

// Means over the rows a head used (its layer's sink visible, D >= min_parts).
struct HeadMeans {
    double sink_mass = 0;
    double sink_balance = 0;
    double entropy = 0;
    double binary_sink_entropy = 0;
    double content_entropy = 0;           // mean H(pi)
    double content_entropy_weighted = 0;  // mean (1 - s) H(pi): entropy = binary + this
    // mean ||clr(pi)||_2: the head's own content concentration, independent of its sink mass
    // (0 for uniform content; beside the cross-head content dispersion C_perp of Dispersion)
    double content_concentration = 0;
    int64_t n_rows = 0;
};

// Content dispersion C_perp, sink dispersion V_b (population variance, 10.g) and their sink
// share rho = V_b / (V_b + C_perp), averaged over rows (spec 2).
struct Dispersion {
    int64_t layer = -1;  // -1: the model, all n_layers * n_heads heads as one set (10.g)
    double c_perp = 0;
    double v_b = 0;
    double rho = 0;
    int64_t n_rows = 0;  // row sets (input, query) that entered
};

// Row bookkeeping. A "row" is one (input, layer, head, query) with query < length.
struct RowCounts {
    int64_t n_inputs = 0;
    int64_t rows_total = 0;
    int64_t rows_used = 0;               // entered the per-layer outputs (head means, dispersion)
    int64_t rows_excluded = 0;           // D < min_parts
    int64_t sink_not_visible = 0;        // the layer's sink is outside the row (10.e)
    int64_t rows_used_model = 0;         // entered the model-scope comparisons
    int64_t sink_not_visible_model = 0;  // the model-wide sink is outside the row
};

struct HeadResults {
    int64_t n_layers = 0;
    int64_t n_heads = 0;
    Scope scope = Scope::Model;
    std::vector<HeadLabel> heads;                      // [n_layers * n_heads]
    std::vector<HeadMeans> means;                      // [n_layers * n_heads]
    std::map<std::string, Eigen::MatrixXd> distances;  // names: kDistanceNames, each [n, n]
    // Model scope only, when some input's per-layer sink differs from its model-wide one:
    // within-layer pairs with each layer's sink (10.d), other pairs NaN; each [n, n]. Empty
    // otherwise (the within-layer blocks of `distances` then use the same sinks).
    std::map<std::string, Eigen::MatrixXd> layer_distances;
    std::vector<Dispersion> layers;  // [n_layers], per-layer sinks
    Dispersion model;                // model-wide sink, all heads
    RowCounts counts;
    // Per layer and query position: the mean sink mass over the heads and inputs of the rows at
    // that position that the head means use (D >= min_parts, the layer's sink visible).
    struct PositionMean {
        int64_t layer = 0, position = 0;
        double sink_mass = 0;
        int64_t n_rows = 0;
    };
    std::vector<PositionMean> by_position;  // layer-major, positions with rows only
};

class HeadAccumulator {
public:
    HeadAccumulator(int64_t n_layers, int64_t n_heads, HeadOptions options = {});

    // Adds one input (its n_layers / n_heads must match); returns the resolved sink positions.
    // Bad data throws InputError naming options.origin and the (input, layer, head, query, key)
    // index; `input_index` < 0 means "count of inputs added so far".
    // `sinks`: the input's positions already resolved with options.sink (null: resolved here).
    // `per_input` (may be null) receives this input's head means ([n_layers * n_heads], rows it
    // used in n_rows; a head without rows has n_rows 0 and NaN means).
    SinkPositions add(const AttentionInput& input, int64_t input_index = -1,
                      const SinkPositions* sinks = nullptr,
                      std::vector<HeadMeans>* per_input = nullptr);
    // Adds another accumulator's state (same shape and options): merge == one pass over both.
    void merge(const HeadAccumulator& other);
    HeadResults finish() const;
    // Exact state for resumable runs (src/metrics/accumulator_state.cpp).
    void save(BinaryWriter& w) const;
    void load(BinaryReader& r);

    const HeadOptions& options() const { return options_; }
    const RowCounts& counts() const { return counts_; }
    // Reports add()'s progress through an input as stage "head metrics", in visible keys.
    void set_progress(StageProgress fn) { progress_ = std::move(fn); }

private:
    StageProgress progress_;
    // Pairwise sums of one group of heads that are compared with each other: all heads
    // (Scope::Model) or one layer (Scope::Layer). Lower triangles are used.
    struct PairGroup {
        int64_t first_head = 0, n = 0;
        int64_t n_rows = 0;
        // [n, n] sums over rows of dA_perp^2 and (b - b')^2; dA^2 is their sum (spec 1).
        Eigen::MatrixXd sq_content, sq_balance;
        std::array<Eigen::MatrixXd, 6> classical;  // [n, n] sums: cos k/d, js k/d, euc k/d
        // Heads [first, first + size) with every sum zero.
        static PairGroup zeros(int64_t first, int64_t size) {
            PairGroup g;
            g.first_head = first;
            g.n = size;
            g.sq_content.setZero(size, size);
            g.sq_balance.setZero(size, size);
            for (auto& m : g.classical) m.setZero(size, size);
            return g;
        }
    };
    struct HeadSums {
        double sink_mass = 0, sink_balance = 0, entropy = 0, binary_sink_entropy = 0,
               content_entropy = 0, content_entropy_weighted = 0, content_concentration = 0;
        int64_t n_rows = 0;
    };
    static HeadMeans means_of(const HeadSums& s);
    struct DispersionSums {
        double c_perp = 0, v_b = 0;
        int64_t n_rows = 0;
    };

    int64_t n_layers_, n_heads_;
    HeadOptions options_;
    RowCounts counts_;
    std::vector<HeadSums> head_sums_;  // [n]
    struct PositionSums {
        double sink_mass = 0;
        int64_t n_rows = 0;
    };
    // [n_layers][query position], grown to the longest input seen.
    std::vector<std::vector<PositionSums>> position_sums_;
    std::vector<DispersionSums> layer_disp_;  // [n_layers]
    DispersionSums model_disp_;
    std::vector<PairGroup> groups_;
    // Model scope: one group per layer with each layer's sink, created at the first input whose
    // layer sinks differ from the model-wide one (seeded with the within-layer block of the model
    // group: every earlier input used the same sink there). Empty otherwise.
    std::vector<PairGroup> layer_groups_;

    friend struct HeadKernel;
};

}  // namespace sinkscope::metrics
