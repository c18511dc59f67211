// Internal: the layer ranks of analyze --split layers (issue 47): the model's blocks split into
// contiguous stages over the ranks of a pipeline. Each input's residual stream passes from one
// stage to the next, and the pipeline's first rank gathers the hooks every stage captured into
// one ForwardResult, the very tensors one whole forward captures (model.hpp LayerRange), so the
// analyses it then runs write the one-process tables.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "sinkscope/api/distributed.hpp"
#include "sinkscope/model/model.hpp"

namespace sinkscope::api {

// The ranks form world / S pipelines of S consecutive ranks (S = `stages`): pipeline g holds
// ranks [g S, (g + 1) S), and its rank of stage s runs blocks [L s / S, L (s + 1) / S)
// (api::shard_range) of a model of L blocks, touching no other block's weights.

// The blocks [begin, end) of stage `stage` of `stages`; UsageError when there are more stages
// than the model has blocks (a rank would hold none).
std::pair<int64_t, int64_t> layer_stage(int64_t n_layers, int64_t stage, int64_t stages);

// One input's forward through this rank's pipeline (every rank of the pipeline calls it, with
// the same input and capture): each stage receives the stream entering it from the rank before
// and sends the one leaving it to the rank after (Communicator::send / recv), then sends its
// hooks to the pipeline's first rank. At the first rank: every hook `capture` selects, of every
// stage; at the others: an empty result. The logits are not gathered (analyze reads none).
model::ForwardResult staged_forward(const model::Model& m, model::ModelInput input,
                                    const model::CaptureSpec& capture, Communicator& comm,
                                    int64_t stages);

// A tensor map as bytes and back (the captured hooks a stage sends rank 0): for each tensor its
// name, dtype, shape and contiguous host bytes. The reader checks every field (`origin` names the
// sender in its InputError).
std::string tensors_to_bytes(const std::map<std::string, at::Tensor>& tensors);
std::map<std::string, at::Tensor> tensors_from_bytes(const std::string& bytes,
                                                     const std::string& origin);

}  // namespace sinkscope::api
