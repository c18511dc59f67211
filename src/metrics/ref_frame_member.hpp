// The members of the reference-frame group (RefFrameAccumulator, ref_frame.hpp): each analysis of
// spec section 8 (and the paper's per-layer attention statistics) is one Member in its own file,
// ref_frame_<name>.cpp. The group reads each layer's rows once (the shared pass: the head average,
// per-head matrices, entropies and top keys, as the selected members ask) and calls every selected
// member on what it computed; a member puts its values, keeps what it needs besides them in
// RefFrameResults, merges it and derives its finished values. A new analysis is a new file, its
// extern below and its line in members() (ref_frame.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "sinkscope/metrics/ref_frame.hpp"

namespace sinkscope::metrics {

// What one layer of one input contributes; layers run on worker threads and their outputs are
// applied in layer order, so results do not depend on the thread count.
struct RefFrameLayerOutput {
    std::vector<std::pair<RefFrameKey, double>> values;
    std::vector<RefFrameKey> skipped;  // metrics this input does not have (compat graphs, 10.r)
    std::vector<RefFrameDiagram> diagrams;
    std::vector<RefFrameDiagram> head_diagrams;  // --per-head: after the average's in `diagrams`
    std::vector<std::pair<int64_t, std::string>> top_keys;  // (head, key)
    std::array<int64_t, 3> classes{};                       // anchors per PositionClass
    int64_t reference_count = -1;                           // -1: not computed
    // Middle and late layers: each head's anchor as (its place, its token or ""), by head.
    std::vector<std::pair<std::string, std::string>> anchors;
};

namespace ref_frame {

// What the shared pass over a layer's rows computes for a member.
struct LayerNeeds {
    bool avg = false;           // the head average [n, n]
    bool top = false;           // each head's top key (frame.hpp)
    bool head_entropy = false;  // each head's row entropy (10.m; compat B.7)
    bool head_matrix = false;   // with --per-head, each head's matrix (matrix() per head)
    LayerNeeds& operator|=(const LayerNeeds& o) {
        avg |= o.avg, top |= o.top, head_entropy |= o.head_entropy, head_matrix |= o.head_matrix;
        return *this;
    }
};

// One layer of one input as the members read it, after the shared pass.
struct LayerView {
    const AttentionInput& in;
    int64_t l = 0;
    const RefFrameConfig& c;
    int64_t input_id = 0;
    const std::vector<std::string>* token_strings = nullptr;  // [T] or null
    const std::vector<int64_t>& layer_sinks;                  // the input's sink per layer
    bool mid_late = false;            // a middle or late layer (model index >= floor(L/3), 10.n)
    const Eigen::MatrixXd& avg;       // [n, n] head average (empty unless a member needs it)
    const std::vector<int64_t>& top;  // [H] top key per head (when a member needs it)
    RefFrameLayerOutput& out;

    void put(const char* table, int64_t h, const std::string& metric, const std::string& param,
             double v) const {
        out.values.emplace_back(RefFrameKey{table, l, h, metric, param}, v);
    }
    // Whether this layer's model index is in `model_layers` (the layer rules of 10.n, 10.o).
    bool in_layers(const std::vector<int64_t>& model_layers) const;
    int64_t model_layers() const { return c.model_layer_count(in.n_layers); }
};

class Member {
public:
    virtual ~Member() = default;
    virtual const char* name() const = 0;
    // The tables whose values it owns (RefFrameKey::table).
    virtual std::vector<std::string> tables() const = 0;
    virtual LayerNeeds needs(const RefFrameConfig&, bool /*mid_late*/) const { return {}; }
    // Whether it reads the input's resolved sink of each layer (LayerView::layer_sinks).
    virtual bool reads_sinks() const { return false; }
    // Values of one matrix: the head average (h = -1) or, with --per-head, head h.
    virtual void matrix(const LayerView&, int64_t /*h*/, const Eigen::MatrixXd&) const {}
    // Values of head h from the shared pass (its row entropy when asked, else NaN).
    virtual void head(const LayerView&, int64_t /*h*/, double /*entropy*/) const {}
    // Values of the layer, after every head and the average.
    virtual void layer(const LayerView&) const {}
    // Takes what it keeps besides its table values from layer l's output (layers in order).
    virtual void apply(const RefFrameLayerOutput&, int64_t /*l*/, int64_t /*input_id*/,
                       RefFrameResults&) const {}
    // Merges that part of another shard's state, whose inputs follow the `n_before` of `into`.
    virtual void merge(const RefFrameResults& /*other*/, int64_t /*n_before*/,
                       RefFrameResults&) const {}
    // Derived values from the accumulated `state` into `r` (a copy of it), and warnings.
    virtual void finish(const RefFrameResults& /*state*/, RefFrameResults& /*r*/) const {}
    // Saves or loads (one visit for both) what it keeps in the state besides the table values.
    virtual void visit_state(FieldIo&, RefFrameResults&) const {}
};

// Every member, in the order they run (ref_frame_members()).
const std::vector<const Member*>& members();

// The members' objects (one file each).
extern const Member& graphs_member;
extern const Member& topology_member;
extern const Member& kl_member;
extern const Member& spectra_member;
extern const Member& entropy_member;
extern const Member& tokens_member;
extern const Member& frame_member;
extern const Member& attention_stats_member;

std::string param_of(double v);  // a numeric param column value (format_number)

}  // namespace ref_frame
}  // namespace sinkscope::metrics
