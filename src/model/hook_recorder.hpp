// Internal (model families): the hook recorder a forward keeps its captured tensors with, and
// the capture buffers' pool (model.hpp release_capture_buffers).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "sinkscope/model/model.hpp"

namespace sinkscope::model::detail {

// The type in which a family computes what HF computes in f32 whatever the model's dtype
// (softmax, RMS normalisation, logits, the f32 norm scales): f32, or f64 for a float64 model.
inline at::ScalarType accum_type(at::ScalarType dtype) {
    return dtype == at::kDouble ? at::kDouble : at::kFloat;
}

// True inside a model::GradientScope on this thread: forwards then record the autograd graph
// instead of running under c10::InferenceMode (model/gradients.hpp).
bool gradients_recorded();

// Keeps the hooks a CaptureSpec selects in a ForwardResult and runs its editing hooks.
// Also holds the scratch buffers attend() reuses across the query blocks and layers of the one
// forward the recorder belongs to, so a block's temporaries are not fresh pages every time.
class HookRecorder {
public:
    HookRecorder(const CaptureSpec& capture, ForwardResult& result)
        : capture_(capture), result_(result) {}
    ~HookRecorder();  // the pool keeps only the buffers this forward took (model.hpp)
    HookRecorder(const HookRecorder&) = delete;
    HookRecorder& operator=(const HookRecorder&) = delete;
    // The activation `t` at a hook point after the CaptureSpec's editing hooks (t itself when
    // none replaced it), kept in the result when the spec selects the hook. The forward goes on
    // with what this returns.
    [[nodiscard]] at::Tensor keep(HookPoint point, int64_t layer, const at::Tensor& t);
    bool wants(HookPoint point, int64_t layer) const;
    // Whether an editing hook matches the hook point.
    bool edits(HookPoint point, int64_t layer) const;
    // A contiguous tensor of `sizes` in scratch slot `slot` (< kScratchSlots): a view of a buffer
    // that grows on demand and lives as long as the recorder. Its contents are undefined; a
    // later call with the same slot reuses the memory.
    static constexpr int kScratchSlots = 3;
    at::Tensor scratch(int slot, at::IntArrayRef sizes, const at::TensorOptions& options);
    // A contiguous tensor of `sizes` for a captured square, contents undefined: from the pool of
    // release_capture_buffers (model.hpp) when it is 32 MiB or more and a free buffer of the pool
    // fits, else fresh (on huge pages where large).
    at::Tensor capture_buffer(at::IntArrayRef sizes, const at::TensorOptions& options);

private:
    const CaptureSpec& capture_;
    ForwardResult& result_;
    at::Tensor scratch_[kScratchSlots];  // flat buffers
    std::vector<const void*> taken_;     // pool buffers (data pointers) this forward took
};

}  // namespace sinkscope::model::detail
