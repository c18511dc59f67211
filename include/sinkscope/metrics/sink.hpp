// Sink policies (spec section 0, resolved detail 10.d): which key of each (input, layer) is the
// sink part.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sinkscope/metrics/attention.hpp"

namespace sinkscope::metrics {

struct SinkPolicy {
    enum class Kind {
        Auto,      // first for causal inputs, argmax for bidirectional ones (spec 0 defaults)
        First,     // key position 0
        Bos,       // first position whose token id is bos_id (needs AttentionInput::token_ids)
        Argmax,    // key with the largest column mean (10.d); per layer and model-wide
        Position,  // a fixed key position
    };
    Kind kind = Kind::Auto;
    int64_t position = 0;  // Position only
    int64_t bos_id = -1;   // Bos only
};
// "auto", "first", "bos", "argmax" or a non-negative integer; throws UsageError otherwise.
// The BOS id is set separately (bos_id).
SinkPolicy parse_sink_policy(const std::string& text);
std::string to_string(const SinkPolicy& policy);  // "first", "bos(id=1)", "position(5)", ...
// Auto resolved for the given masking (First or Argmax); other kinds unchanged.
SinkPolicy resolve_auto(const SinkPolicy& policy, Masking masking);

// Resolved sink key positions of one input.
struct SinkPositions {
    std::vector<int64_t> per_layer;  // [n_layers]: used by per-layer outputs
    int64_t model = 0;               // shared by all heads for model-scope comparisons (10.d)
};

// Resolves the policy for one input. Argmax uses the closed visible rows, masked entries
// counting 0, averaged over the `length` real query rows and all heads; ties go to the lowest
// position. Bos throws InputError("token ids", ...) when the input holds no BOS token.
SinkPositions resolve_sinks(const AttentionInput& input, const SinkPolicy& policy);

// Column means used by argmax: [n_tokens] for one layer (layer >= 0) or all layers (layer < 0).
std::vector<double> key_column_mean(const AttentionInput& input, int64_t layer);

}  // namespace sinkscope::metrics
