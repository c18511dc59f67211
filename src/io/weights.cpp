// Weight views and their conversion to float32 (shared by the safetensors, GGUF and llama2.c
// loaders). Bytes are read with memcpy: mapped tensors need not be aligned for their dtype.
#include "sinkscope/io/weights.hpp"

#include <bit>
#include <cstring>
#include <limits>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/io/ggml_quant.hpp"

namespace sinkscope::io {

const char* weight_dtype_name(WeightDType t) {
    switch (t) {
        case WeightDType::F32:
            return "F32";
        case WeightDType::F16:
            return "F16";
        case WeightDType::BF16:
            return "BF16";
        case WeightDType::F64:
            return "F64";
        case WeightDType::I32:
            return "I32";
        case WeightDType::I64:
            return "I64";
        default:
            break;
    }
    const GgmlTypeInfo* q = ggml_quant_info(t);
    return q ? q->name : "?";
}

bool weight_dtype_is_float(WeightDType t) {
    return t != WeightDType::I32 && t != WeightDType::I64;
}

int64_t TensorView::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

int64_t weight_dtype_n_bytes(WeightDType t, int64_t numel) {
    constexpr int64_t max = std::numeric_limits<int64_t>::max();
    if (numel < 0) return -1;
    int64_t elem = 0;
    switch (t) {
        case WeightDType::F16:
        case WeightDType::BF16:
            elem = 2;
            break;
        case WeightDType::F32:
        case WeightDType::I32:
            elem = 4;
            break;
        case WeightDType::F64:
        case WeightDType::I64:
            elem = 8;
            break;
        default: {
            const GgmlTypeInfo* q = ggml_quant_info(t);
            if (!q || numel % q->block != 0) return -1;
            // block_bytes < 2 * block for every type: no overflow
            return numel / q->block * q->block_bytes;
        }
    }
    if (numel > max / elem) return -1;
    return numel * elem;
}

namespace {

template <typename T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

float bf16_to_f32(uint16_t h) {
    return std::bit_cast<float>(uint32_t(h) << 16);
}

// Product of the dimensions; -1 when one is negative or the product overflows int64.
int64_t checked_numel(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d < 0) return -1;
        if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
        n *= d;
    }
    return n;
}

// Throws InputError unless the view's byte count is exactly what its dtype and shape need.
void check_view(const TensorView& t) {
    const int64_t n = checked_numel(t.shape);
    SS_CHECK_INPUT(n >= 0, t.file.string(), "tensor ", printable(t.name), ": invalid shape ",
                   shape_text(t.shape));
    const int64_t need = weight_dtype_n_bytes(t.dtype, n);
    SS_CHECK_INPUT(need >= 0 && uint64_t(need) == t.n_bytes, t.file.string(), "tensor ",
                   printable(t.name), ": ", t.n_bytes, " bytes but shape ", shape_text(t.shape),
                   " of ", weight_dtype_name(t.dtype), " needs ",
                   need >= 0 ? std::to_string(need) : std::string("a whole number of blocks"));
    // ggml quantizes row by row: a block never straddles two rows (ggml_row_size).
    if (const GgmlTypeInfo* q = ggml_quant_info(t.dtype)) {
        const int64_t row = t.shape.empty() ? 1 : t.shape.back();
        SS_CHECK_INPUT(row % q->block == 0, t.file.string(), "tensor ", printable(t.name),
                       ": row of ", row, " values is not a whole number of ", q->name, " blocks (",
                       q->block, ")");
    }
}

}  // namespace

void check_convertible(const TensorView& t) {
    check_view(t);
    if (t.dtype == WeightDType::I32 || t.dtype == WeightDType::I64)
        throw UnsupportedError(t.file.string(), std::string(weight_dtype_name(t.dtype)) + " in " +
                                                    quote(t.name) +
                                                    " (integer tensor, not a weight)");
}

void convert_to_f32(const TensorView& t, float* out) {
    check_convertible(t);
    const int64_t n = t.numel();
    if (n == 0) return;
    SS_CHECK(t.data != nullptr, "tensor ", printable(t.name), " has no data");
    const uint8_t* p = t.data;
    switch (t.dtype) {
        case WeightDType::F32:
            std::memcpy(out, p, size_t(n) * 4);
            return;
        case WeightDType::F16:
            for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(load<uint16_t>(p + 2 * i));
            return;
        case WeightDType::BF16:
            for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(load<uint16_t>(p + 2 * i));
            return;
        case WeightDType::F64:
            for (int64_t i = 0; i < n; ++i) out[i] = float(load<double>(p + 8 * i));
            return;
        default:
            break;
    }
    if (const GgmlTypeInfo* q = ggml_quant_info(t.dtype)) {
        q->dequantize(p, out, n / q->block);
        return;
    }
    throw InternalError("convert_to_f32: unknown dtype");
}

std::vector<float> to_f32(const TensorView& t) {
    check_view(t);
    std::vector<float> out(size_t(t.numel()));
    convert_to_f32(t, out.data());
    return out;
}

}  // namespace sinkscope::io
