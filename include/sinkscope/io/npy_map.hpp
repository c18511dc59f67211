// Read-only memory map of a .npy file, so attention dumps larger than memory can be streamed one
// input at a time. The header is validated against the file size (io/npy.hpp) before use.
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
      ~NpyMap();
      NpyMap(const NpyMap&) = delete;
      NpyMap& operator=(const NpyMap&) = delete;

      const std::string& origin() const { return origin_; }
      DType dtype() const { return header_.dtype; }
      const std::vector<int64_t>& shape() const { return header_.shape; }
      int64_t numel() const;
      const uint8_t* data() const { return file_.data() + header_.data_offset; }

      // Widens elements [first, first + count) to fp64 into `out` (exact for every dtype).
      void read_f64(int64_t first, int64_t count, double* out) const;
      // Elements [first, first + count) as int64; integer dtypes only (UnsupportedError otherwise).
      void read_i64(int64_t first, int64_t count, int64_t* out) const;

  private:
    std::string origin_;
    MappedFile file_;
    NpyHeader header_;
};

}  // namespace sinkscope::io
