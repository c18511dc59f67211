// .npy / .npz arrays (NumPy format 1.0-3.0), written here: dtypes f2, f4, f8, i4, i8, little
// endian, C order, any rank. Headers and data lengths are checked before anything is read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sinkscope/core/run_files.hpp"

namespace sinkscope::io {

enum class DType { F16, F32, F64, I32, I64 };

const char* dtype_descr(DType t);  // "<f4", ...
size_t dtype_size(DType t);

struct NpyArray {
    DType dtype = DType::F64;
    std::vector<int64_t> shape;  // C order
    std::vector<uint8_t> data;   // little-endian raw bytes, numel * dtype_size

    int64_t numel() const;
    // Converts to double (f2/f4/f8/i4/i8 all widen exactly).
    std::vector<double> to_f64() const;
    std::vector<int64_t> to_i64() const;  // integer dtypes only (throws otherwise)
};

// What a .npy header says, after every length was checked against the file size: the data
// occupies bytes [data_offset, data_offset + data_bytes) and nothing follows it.
struct NpyHeader {
    DType dtype = DType::F64;
    std::vector<int64_t> shape;
    size_t data_offset = 0;
    size_t data_bytes = 0;
};
NpyHeader parse_npy_header(const uint8_t* bytes, size_t size, const std::string& origin);

// Reads one .npy file. `name` (default: the path) is used in error messages.
NpyArray read_npy(const std::filesystem::path& path);
// Parses an in-memory .npy image; `origin` names it in errors (e.g. "x.npz:attn.npy").
NpyArray parse_npy(const uint8_t* bytes, size_t size, const std::string& origin);
// The .npy file `rel` of a run's files (on disk or in memory).
NpyArray read_npy(const RunFiles& dir, const std::string& rel);

void write_npy(const std::filesystem::path& path, const NpyArray& array);
std::string serialize_npy(const NpyArray& array);

// Helpers that build arrays from typed buffers.
NpyArray make_npy_f64(std::vector<int64_t> shape, const std::vector<double>& values);
NpyArray make_npy_f32(std::vector<int64_t> shape, const std::vector<float>& values);
NpyArray make_npy_i64(std::vector<int64_t> shape, const std::vector<int64_t>& values);

// .npz: a zip archive of .npy members. Reading supports stored (uncompressed) members only;
// writing produces stored members. Keys are member names without ".npy".
std::map<std::string, NpyArray> read_npz(const std::filesystem::path& path);
void write_npz(const std::filesystem::path& path, const std::map<std::string, NpyArray>& arrays);

// IEEE half <-> float conversions used by the f2 dtype (also by model loaders).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);

}  // namespace sinkscope::io
