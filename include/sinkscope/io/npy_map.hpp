// Read-only memory map of a .npy file, so attention dumps larger than memory can be streamed one
// input at a time. The header is validated against the file size (io/npy.hpp) before use. The
// same reader also serves arrays that already live in memory (the Python bindings' numpy arrays),
// borrowed without a copy and read through their strides, so C order, Fortran order and slices
// are all read in place.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "sinkscope/io/mmap_file.hpp"
#include "sinkscope/io/npy.hpp"

namespace sinkscope::io {

class NpyMap {
public:
    // Maps `path`; throws IoError when it cannot be opened, InputError/UnsupportedError for a
    // malformed or unsupported header (naming the file).
    explicit NpyMap(const std::filesystem::path& path);
    // Borrows `data` (owned by the caller, alive as long as this object): elements of `dtype` in
    // `shape`, element k at byte offset sum_d index_d * byte_strides[d]; empty strides: C order.
    // `origin` names the array in errors.
    NpyMap(std::string origin, DType dtype, std::vector<int64_t> shape, const void* data,
           std::vector<int64_t> byte_strides = {});
    ~NpyMap();
    NpyMap(const NpyMap&) = delete;
    NpyMap& operator=(const NpyMap&) = delete;

    const std::string& origin() const { return origin_; }
    DType dtype() const { return header_.dtype; }
    const std::vector<int64_t>& shape() const { return header_.shape; }
    int64_t numel() const;
    // Start of the elements; with non-C-order strides element k is not at data() + k * size.
    const uint8_t* data() const { return data_; }
    bool c_order() const { return strides_.empty(); }

    // Widens elements [first, first + count) to fp64 into `out` (exact for every dtype).
    void read_f64(int64_t first, int64_t count, double* out) const;
    // Elements [first, first + count) as int64; integer dtypes only (UnsupportedError otherwise).
    void read_i64(int64_t first, int64_t count, int64_t* out) const;

private:
    std::string origin_;
    MappedFile file_;
    NpyHeader header_;
    const uint8_t* data_ = nullptr;
    std::vector<int64_t> strides_;  // byte strides; empty: C order
};

}  // namespace sinkscope::io
