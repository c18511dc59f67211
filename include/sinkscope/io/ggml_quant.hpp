// GGML tensor types: one table row per type (ggml_type id, name, block geometry) and, for the
// types sinkscope reads as weights, the WeightDType and the block dequantizer to float32. The
// GGUF reader sizes tensors from this table, the GGUF weight store maps types through it and
// convert_to_f32 dequantizes with it, so each fact lives here once. Torch-free.
//
// Block layouts and dequantization semantics follow ggml (ggml-common.h block_* structs and
// ggml-quants.c dequantize_row_*); the implementation in ggml_quant.cpp keeps ggml's order of
// float operations and is compiled without FMA contraction, so the values equal the reference
// dequantization (ggml's C code, gguf-py's float32 numpy) bit for bit.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>

#include "sinkscope/io/weights.hpp"

namespace sinkscope::io {

// Decodes `n_blocks` consecutive blocks at `src` into n_blocks * block floats at `dst`.
using DequantizeFn = void (*)(const uint8_t* src, float* dst, int64_t n_blocks);

struct GgmlTypeInfo {
    uint32_t id;                       // ggml_type number as stored in a GGUF tensor description
    const char* name;                  // ggml's name, upper case ("Q4_K")
    int64_t block;                     // values per block (1 for plain types)
    int64_t block_bytes;               // bytes per block
    std::optional<WeightDType> dtype;  // how sinkscope reads it; nullopt: listed, not read
    DequantizeFn dequantize;           // block types sinkscope reads; nullptr otherwise
};

// The row of GGML type `id`, or nullptr for an id ggml does not define (or no longer defines).
const GgmlTypeInfo* ggml_type_info(uint32_t id);
// The row of a block-quantized WeightDType; nullptr for the plain F32/F16/BF16/F64/I32/I64.
const GgmlTypeInfo* ggml_quant_info(WeightDType t);

// The 16 values of the IQ4_NL code book (ggml-common.h kvalues_iq4nl).
inline constexpr int8_t k_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                              1,    13,   25,  38,  53,  69,  89,  113};

// IEEE binary16 bits -> float, exact: shift exponent and mantissa into place, rebias the
// exponent, and let one float subtraction normalise subnormals (no per-bit loop).
inline float f16_to_f32(uint16_t h) {
    constexpr uint32_t exp_mask = 0x7c00u << 13;  // half exponent field after the shift
    uint32_t bits = uint32_t(h & 0x7fff) << 13;   // exponent + mantissa
    const uint32_t exp = bits & exp_mask;
    bits += (127 - 15) << 23;  // rebias
    if (exp == exp_mask) {
        bits += (128 - 16) << 23;  // Inf / NaN: exponent all ones
    } else if (exp == 0) {         // zero / subnormal: m * 2^-24 = (2^-14 + m * 2^-24) - 2^-14
        bits += 1 << 23;
        bits = std::bit_cast<uint32_t>(std::bit_cast<float>(bits) -
                                       std::bit_cast<float>(uint32_t(113) << 23));
    }
    return std::bit_cast<float>(bits | uint32_t(h & 0x8000) << 16);
}

}  // namespace sinkscope::io
