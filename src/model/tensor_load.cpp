// Weight bytes -> torch tensors, with the shape checks that make a wrong file a clear error.
#include "tensor_load.hpp"

#include <cstdint>
#include <cstring>
#include <sstream>

#include <ATen/ATen.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/weights.hpp"

namespace sinkscope::model::detail {

at::ScalarType scalar_type(ComputeDType t) {
    switch (t) {
        case ComputeDType::Float32: return at::kFloat;
        case ComputeDType::BFloat16: return at::kBFloat16;
        case ComputeDType::Float16: return at::kHalf;
        case ComputeDType::Float64:
            return at::kDouble;
    }
    return at::kFloat;
}

at::Device device_of(const RuntimeOptions& r) {
    return r.device == DeviceKind::Cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
}

namespace {
std::string shape_str(const std::vector<int64_t>& s) {
    std::ostringstream out;
    out << '[';
    for (size_t i = 0; i < s.size(); ++i) out << (i ? ", " : "") << s[i];
    out << ']';
    return out.str();
}
}  // namespace

at::Tensor read_f32(const WeightSource& src, const std::string& name,
                    const std::vector<int64_t>& expected, bool in_place) {
    const io::TensorView view = src.store->get(name);  // throws InputError when missing
    const std::string file = view.file.empty() ? src.origin : view.file.string();
    SS_CHECK_INPUT(view.shape == expected, file, "tensor ", name, ": shape ", shape_str(view.shape),
                   " does not match the config (expected ", shape_str(expected), ")");
    SS_CHECK_INPUT(io::weight_dtype_is_float(view.dtype), file, "tensor ", name, ": dtype ",
                   io::weight_dtype_name(view.dtype), " is not a floating-point weight type");
    int64_t numel = 1;
    for (int64_t d : expected) numel *= d;
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    if (view.dtype == io::WeightDType::F32) {
        SS_CHECK_INPUT(view.n_bytes == static_cast<size_t>(numel) * sizeof(float), file, "tensor ",
                       name, ": ", view.n_bytes, " bytes for ", numel, " f32 values");
        if (in_place && view.owner && view.n_bytes > 0 &&
            reinterpret_cast<uintptr_t>(view.data) % alignof(float) == 0) {
            // The file's own bytes: no copy into fresh memory, whose page faults and zeroing
            // were most of a 124M model's load time. Pages are read when first used, so the
            // load does not page in a tensor that no computation reads (the lm_head, when
            // analyze skips the logits).
            void* data = const_cast<uint8_t*>(view.data);  // read-only mapping: never written
            return at::from_blob(
                data, expected, [owner = view.owner](void*) {}, f32);
        }
    }
    at::Tensor out = at::empty(expected, f32);  // host f32
    if (view.dtype == io::WeightDType::F32) {
        std::memcpy(out.data_ptr<float>(), view.data, view.n_bytes);
    } else {
        io::convert_to_f32(view, out.data_ptr<float>());
    }
    return out;
}

}  // namespace sinkscope::model::detail
