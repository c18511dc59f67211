// Memory-mapped .npy reading (POSIX mmap); element access widens to fp64 / int64.
#include "sinkscope/io/npy_map.hpp"

#include <cerrno>
#include <cstring>

#include "sinkscope/core/error.hpp"

namespace sinkscope::io {

NpyMap::NpyMap(const std::filesystem::path& path) : origin_(path.string()), file_(path) {
    static const uint8_t kEmpty[1] = {0};
    header_ = parse_npy_header(file_.data() ? file_.data() : kEmpty, file_.size(), origin_);
}

NpyMap::~NpyMap() = default;

int64_t NpyMap::numel() const {
    int64_t n = 1;
    for (auto d : header_.shape) n *= d;
    return n;
}

void NpyMap::read_f64(int64_t first, int64_t count, double* out) const {
    SS_CHECK(first >= 0 && count >= 0 && first + count <= numel(), "range [", first, ", ",
             first + count, ") outside ", numel(), " elements of ", origin_);
    const uint8_t* p = data();
    switch (header_.dtype) {
        case DType::F16:
            for (int64_t k = 0; k < count; ++k) {
                uint16_t h;
                std::memcpy(&h, p + 2 * (first + k), 2);
                out[k] = half_to_float(h);
            }
            break;
        case DType::F32:
            for (int64_t k = 0; k < count; ++k) {
                float v;
                std::memcpy(&v, p + 4 * (first + k), 4);
                out[k] = v;
            }
            break;
        case DType::F64:
            std::memcpy(out, p + 8 * first, 8 * size_t(count));
            break;
        case DType::I32:
            for (int64_t k = 0; k < count; ++k) {
                int32_t v;
                std::memcpy(&v, p + 4 * (first + k), 4);
                out[k] = v;
            }
            break;
        case DType::I64:
            for (int64_t k = 0; k < count; ++k) {
                int64_t v;
                std::memcpy(&v, p + 8 * (first + k), 8);
                out[k] = static_cast<double>(v);
            }
            break;
    }
}

void NpyMap::read_i64(int64_t first, int64_t count, int64_t* out) const {
    SS_CHECK(first >= 0 && count >= 0 && first + count <= numel(), "range outside ", origin_);
    const uint8_t* p = data();
    if (header_.dtype == DType::I64) {
        std::memcpy(out, p + 8 * first, 8 * size_t(count));
    } else if (header_.dtype == DType::I32) {
        for (int64_t k = 0; k < count; ++k) {
            int32_t v;
            std::memcpy(&v, p + 4 * (first + k), 4);
            out[k] = v;
        }
    } else {
        throw UnsupportedError(origin_,
                               std::string("expected an integer array (<i4 or <i8), found ") +
                                   dtype_descr(header_.dtype));
    }
}

}  // namespace sinkscope::io
