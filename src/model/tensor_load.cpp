// Weight bytes -> torch tensors, with the shape checks that make a wrong file a clear error.
#include "tensor_load.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <ATen/ATen.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/io/weights.hpp"
#include "sinkscope/model/footprint.hpp"

namespace sinkscope::model::detail {

at::ScalarType scalar_type(ComputeDType t) {
    switch (t) {
        case ComputeDType::Float32:
            return at::kFloat;
        case ComputeDType::BFloat16:
            return at::kBFloat16;
        case ComputeDType::Float16:
            return at::kHalf;
        case ComputeDType::Float64:
            return at::kDouble;
    }
    return at::kFloat;
}

at::Device device_of(const RuntimeOptions& r) {
    if (r.meta) return at::Device(at::kMeta);
    return r.device == DeviceKind::Cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
}

// Shape as the config says, a float dtype, byte count as dtype and shape need
// (io::check_convertible).
io::TensorView checked_view(const WeightSource& src, const std::string& name,
                            const std::vector<int64_t>& expected) {
    io::TensorView view = src.store->get(name);  // throws InputError when missing
    const std::string file = view.file.empty() ? src.origin : view.file.string();
    SS_CHECK_INPUT(view.shape == expected, file, "tensor ", name, ": shape ",
                   shape_text(view.shape), " does not match the config (expected ",
                   shape_text(expected), ")");
    SS_CHECK_INPUT(io::weight_dtype_is_float(view.dtype), file, "tensor ", name, ": dtype ",
                   io::weight_dtype_name(view.dtype), " is not a floating-point weight type");
    if (view.file.empty()) view.file = src.origin;
    io::check_convertible(view);
    return view;
}

bool stays_in_file(const io::TensorView& view, at::ScalarType dtype) {
    const int64_t wide = view.numel() * static_cast<int64_t>(c10::elementSize(dtype));
    return view.owner != nullptr && static_cast<int64_t>(view.n_bytes) < wide;
}

bool usable_as_is(const io::TensorView& view, at::ScalarType dtype) {
    using D = io::WeightDType;
    const bool same = (view.dtype == D::F32 && dtype == at::kFloat) ||
                      (view.dtype == D::BF16 && dtype == at::kBFloat16) ||
                      (view.dtype == D::F16 && dtype == at::kHalf) ||
                      (view.dtype == D::F64 && dtype == at::kDouble);
    return same && view.owner != nullptr && view.n_bytes > 0 &&
           reinterpret_cast<uintptr_t>(view.data) % c10::elementSize(dtype) == 0;
}

at::Tensor mapped_tensor(const io::TensorView& view, const std::vector<int64_t>& shape,
                         at::ScalarType dtype) {
    void* data = const_cast<uint8_t*>(view.data);  // read-only mapping: never written
    return at::from_blob(
        data, shape, [owner = view.owner](void*) {}, at::TensorOptions().dtype(dtype));
}

void tally(const WeightSource& src, const io::TensorView& view, bool deferred) {
    WeightFootprint& f = *src.metadata_only;
    ++f.tensor_types[io::weight_dtype_name(view.dtype)];
    int64_t& largest = deferred ? f.largest_deferred : f.largest_numel;
    largest = std::max(largest, view.numel());
}

at::Tensor read_f32(const WeightSource& src, const std::string& name,
                    const std::vector<int64_t>& expected, bool in_place) {
    const io::TensorView view = checked_view(src, name, expected);
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    if (in_place && usable_as_is(view, at::kFloat)) {
        // The file's own bytes: no copy into fresh memory, whose page faults and zeroing were
        // most of a 124M model's load time. Pages are read when first used, so the load does
        // not page in a tensor that no computation reads (the lm_head, when analyze skips the
        // logits).
        return mapped_tensor(view, expected, at::kFloat);
    }
    at::Tensor out = at::empty(expected, f32);  // host f32
    io::convert_to_f32(view, out.data_ptr<float>());
    return out;
}

at::Tensor read_meta(const WeightSource& src, const std::string& name,
                     const std::vector<int64_t>& expected, bool* in_place) {
    const io::TensorView view = checked_view(src, name, expected);
    tally(src, view, /*deferred=*/false);
    *in_place = usable_as_is(view, at::kFloat);
    return at::empty(expected, at::TensorOptions().dtype(at::kFloat).device(at::kMeta));
}

}  // namespace sinkscope::model::detail
