// Ready-made interventions (issue 52): edits of the forward written as a text spec, applied
// through editing hooks (model/hooks.hpp), usable by `analyze --intervene`, `patch` and Python.
//
// A spec is one intervention or several separated by ';', each NAME[:key=value]...:
//   sink_removal[:renormalize=yes|no]    the sink's column of every pattern row that sees it set
//                                         to 0; renormalised (default) each row is divided by
//                                         what is left (spec section 8 / 10.k: a row left with no
//                                         mass becomes uniform over its visible non-sink keys; a
//                                         row that sees only sinks is left as it is), so the
//                                         rest of the forward reads attention without the sink
//                                         (a model whose rows do not sum to 1: softmax_one,
//                                         sigmoid, the kv slot: each row keeps its total instead,
//                                         the removed weight spread over the other keys in
//                                         proportion); renormalize=no leaves the rows' other
//                                         weights as they are (a row that sees only sinks then
//                                         reads nothing)
//   sink_key:scale=X                     the sink position's key (hook_k, every kv head)
//                                         multiplied by X (0 zeroes it)
//   sink_value:scale=X                   the same for its value (hook_v)
//   head_ablation:mode=zero|mean|resample:heads=L.H,...
//                                         each listed head's output (hook_z) replaced by 0, by
//                                         its mean over the run's inputs (every position), or by
//                                         its value in another input of the run (input n takes
//                                         input (n + 1) mod N; position p reads the source's
//                                         position min(p, T_source - 1))
// Common keys: layers=SPEC (sink_*: the layers edited, "0,2-3"; default all) and sink=first|bos|
// argmax|N (sink_*: where the sink is; default the analyses' --sink, auto = first for causal
// models, argmax for encoders; argmax, the key with the largest mean received attention over
// heads and rows of the layer, is read from the pattern and so only fits sink_removal).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "sinkscope/analysis/inputs.hpp"
#include "sinkscope/metrics/sink.hpp"
#include "sinkscope/model/hooks.hpp"
#include "sinkscope/model/model.hpp"

namespace sinkscope::api {

struct Intervention {
    enum class Kind { SinkRemoval, SinkKey, SinkValue, HeadAblation };
    enum class Ablation { Zero, Mean, Resample };
    Kind kind = Kind::SinkRemoval;
    bool renormalize = true;                         // sink_removal
    double scale = 0.0;                              // sink_key, sink_value
    Ablation ablation = Ablation::Zero;              // head_ablation
    std::vector<std::pair<int64_t, int64_t>> heads;  // head_ablation: (layer, head)
    std::vector<int64_t> layers;                     // sink_*: layers edited (all when empty)
    metrics::SinkPolicy sink;  // sink_*: first, bos (every position of BOS), argmax or a position
    std::string text;          // canonical spec of this intervention
};

struct InterventionPlan {
    std::vector<Intervention> list;
    bool empty() const { return list.empty(); }
    // The canonical spec ("" when empty) and run.json's record of it.
    std::string text() const;
    nlohmann::json record() const;
    // Whether an intervention edits the attention pattern (attention rows must then be captured,
    // never recomputed from the queries and keys).
    bool edits_pattern() const;
    bool needs_mean_z() const;
    bool needs_resample() const;
    // The layers whose hook_z a resample source must provide.
    std::vector<int64_t> resample_layers() const;
};

// Parses `spec` for model `c`; `default_sink` is the analyses' --sink (auto | first | bos |
// argmax | N). UsageError naming the part at fault.
InterventionPlan parse_interventions(const std::string& spec, const model::ModelConfig& c,
                                     const std::string& default_sink = "auto");

// What one input's intervened forward reads beyond the plan.
struct InterventionInput {
    std::vector<int32_t> ids;  // the input's tokens (sink=bos); may be empty for images
    int32_t bos_id = -1;
    at::Tensor z_mean;                       // [n_layers, n_heads, d_head] float64: mode=mean
    std::map<int64_t, at::Tensor> source_z;  // layer -> hook_z [1, T_source, H, d_head]: resample
};

// Adds the plan's editing hooks for one input to `spec`. UsageError when a sink position is past
// the input or sink=bos finds no BOS in it.
void add_interventions(model::CaptureSpec& spec, const InterventionPlan& plan,
                       const model::ModelConfig& c, const InterventionInput& input);

// The editing hooks of a plan for each input of a run (analyze, dynamics, dump --intervene):
// mode=mean reads hook_z's mean over every position of every input of the run (computed here,
// summed in float64), mode=resample the next input's hook_z (forwarded again for each input).
class RunInterventions {
public:
    RunInterventions(const model::Model& m, const analysis::AnalysisInputs& inputs,
                     InterventionPlan plan, int32_t bos_id);
    const InterventionPlan& plan() const { return plan_; }
    model::CaptureSpec edits_for(size_t n) const;

private:
    const model::Model& m_;
    const analysis::AnalysisInputs& inputs_;
    InterventionPlan plan_;
    int32_t bos_id_ = -1;
    at::Tensor z_mean_;
};

// The pattern [batch, H, T, T] with the keys `sinks` removed as sink_removal defines it
// (`causal`, `window`: the visible keys of a row left with no mass). `keep_total`: the rows are
// renormalised to the total they had (a model whose rows do not sum to 1), not to 1.
at::Tensor remove_sinks(const at::Tensor& pattern, const std::vector<int64_t>& sinks,
                        bool renormalize, bool causal, int64_t window, bool keep_total = false);

}  // namespace sinkscope::api
