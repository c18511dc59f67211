// Perplexity evaluation that reports each scored sample (src/model/evaluation.cpp): the
// overloads of compute_perplexity (sliding_window.hpp) and compute_masked_perplexity (model.hpp)
// behind `sinkscope perplexity`'s progress line.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sinkscope/model/model.hpp"
#include "sinkscope/model/sliding_window.hpp"

namespace sinkscope::model {

// Called after each sample is scored, in sample order, on the calling thread: samples done and
// tokens scored so far. It sees the results, it does not change them.
using SampleDone = std::function<void(int64_t done, int64_t tokens)>;

PerplexityResult compute_perplexity(const Model& model,
                                    const std::vector<std::vector<int32_t>>& samples,
                                    const HeadMask* mask, const SlidingWindow& window,
                                    const SampleDone& done);
PerplexityResult compute_masked_perplexity(const Model& model,
                                           const std::vector<std::vector<int32_t>>& samples,
                                           const MaskedLmOptions& options, const HeadMask* mask,
                                           const SampleDone& done);

}  // namespace sinkscope::model
