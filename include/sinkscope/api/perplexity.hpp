// Perplexity of a loaded model on token ids: the evaluation behind `sinkscope perplexity`, shared
// with the Python bindings (Model.perplexity). Torch side (it takes a model::Model).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sinkscope/model/evaluation.hpp"
#include "sinkscope/model/model.hpp"

namespace sinkscope::api {

struct PerplexityValue {
    model::PerplexityResult result;
    bool pseudo = false;        // encoders: masked-LM pseudo-perplexity (15% masked, `seed`)
    uint64_t seed = 0;          // pseudo only
    int64_t window_length = 0;  // > 0: sliding-window evaluation with `stride`
    int64_t stride = 0;
};

// `head_mask`: "LAYER.HEAD,..." heads zero-ablated (empty: none). stride > 0 (decoders):
// windows of the model's context moved by `stride` tokens (UsageError / UnsupportedError as the
// CLI reports them).
PerplexityValue evaluate_perplexity(const model::Model& m,
                                    const std::vector<std::vector<int32_t>>& samples,
                                    const std::string& head_mask, int64_t stride,
                                    std::optional<uint64_t> seed,
                                    const model::SampleDone& done = {});

// The stride check of `sinkscope perplexity` (before any input is read): whether windows apply.
bool sliding_perplexity(const model::Model& m, int64_t stride);

}  // namespace sinkscope::api
