// Writing safetensors files (the format of huggingface/safetensors: an 8-byte little-endian header
// length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__":
// {string: string}}, then the tensors' bytes, offsets relative to the end of the header). Used by
// `train` for checkpoints that every loader of the project reads back.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sinkscope/io/weights.hpp"

namespace sinkscope::io {

// One tensor to write: F32, F16, BF16, F64, I32 or I64 bytes in row-major order.
struct TensorBytes {
    std::string name;
    WeightDType dtype = WeightDType::F32;
    std::vector<int64_t> shape;
    std::string bytes;  // exactly numel * element size bytes (host byte order = little-endian)
};

// The bytes of a safetensors file holding `tensors` in the given order (names must be unique;
// InternalError otherwise, or when a tensor's byte count does not match its shape). The header
// is padded with spaces to a multiple of 8 bytes, so that every tensor starts 8-byte aligned.
std::string safetensors_file(const std::vector<TensorBytes>& tensors,
                             const std::map<std::string, std::string>& metadata = {});

}  // namespace sinkscope::io
