// What building a model takes, told from a checkpoint's metadata alone: a metadata-only build
// (LoadOptions::metadata_only) runs the family's own loader on tensors without data, so every
// count here follows the real load exactly (which tensors are read, tied matrices once, fused
// tensors split, float32 tensors used in the file's pages).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace sinkscope::model {

// Every count is that of a build at one compute dtype (value_bytes): which tensors stay in the
// file's pages depends on it (float32 file values are used in place by a float32 model; bf16 /
// f16 file values stay in the file under a float32 or float64 model, quantized ones under any).
struct WeightFootprint {
    int value_bytes = 4;         // bytes per value of the build's compute dtype
    int64_t n_params = 0;        // as Model::n_params
    int64_t numel_in_place = 0;  // float32 file values a CPU float32 model uses where they lie
    int64_t numel_copied = 0;    // values converted into memory of the model's own
    // bf16 / f16 / quantized (float32 under float64) file values a CPU model keeps in the file's
    // pages and widens at each use (RuntimeOptions::widen_at_load unset; issue 47)
    int64_t numel_deferred = 0;
    int64_t largest_numel = 0;     // the largest tensor converted at load
    int64_t largest_deferred = 0;  // the largest tensor widened at use
    int64_t file_bytes = 0;        // the weight files on disk (mapped while the model loads)
    int64_t n_files = 0;
    std::map<std::string, int64_t> tensor_types;  // dtype in the file -> tensors read of it

    // Peak memory of the process's own (not the file's mapped pages, which the kernel can drop
    // and read again) to build and run the model on the CPU:
    //   value_bytes * numel_copied,
    //   plus 8 * largest_numel: a tensor passes through at most two float32 host copies (the
    //   converted file values and a layout change: transpose, Q/K row order) before its
    //   compute-dtype copy, and each is freed before the next tensor is read,
    //   plus the widening of the largest deferred tensor at use: its float32 conversion, a
    //   layout change, and its compute-dtype copy unless float32 (8 or 8 + value_bytes a value).
    // Not included: the file pages (file_bytes) and a forward's activations.
    int64_t load_bytes() const {
        const int64_t widen = 8 + (value_bytes == 4 ? 0 : value_bytes);
        return value_bytes * numel_copied + 8 * largest_numel + widen * largest_deferred;
    }
};

}  // namespace sinkscope::model
