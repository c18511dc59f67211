// Perplexity of samples longer than the model's context: the sliding-window evaluation of
// Hugging Face's perplexity guide (compute_perplexity of model.hpp is the one-window case).
#pragma once

#include <cstdint>
#include <vector>

#include "sinkscope/model/model.hpp"

namespace sinkscope::model {

// Windows of `length` tokens start at 0, stride, 2 stride, ... until one reaches the sample's
// end; each window scores only its new tokens (those after the previous window's end), each with
// every earlier token of its window as context, so every token is scored once. A token that
// starts a window has no context there and is not scored (with stride == length the windows are
// non-overlapping chunks, each scored like a sample of its own). length 0: every sample whole, in
// one forward.
struct SlidingWindow {
    int64_t length = 0;
    int64_t stride = 0;  // 1 <= stride <= length
};

// compute_perplexity with samples longer than window.length evaluated in windows; UsageError for
// a stride outside [1, length].
PerplexityResult compute_perplexity(const Model& model,
                                    const std::vector<std::vector<int32_t>>& samples,
                                    const HeadMask* mask, const SlidingWindow& window);

}  // namespace sinkscope::model
