// Memory-mapped .npy reading (POSIX mmap), and borrowed in-memory arrays read the same way;
// element access widens to fp64 / int64.
#include "sinkscope/io/npy_map.hpp"

#include <cerrno>
#include <cstring>

#include "sinkscope/core/error.hpp"

namespace sinkscope::io {

NpyMap::NpyMap(const std::filesystem::path& path) : origin_(path.string()), file_(path) {
    static const uint8_t kEmpty[1] = {0};
    header_ = parse_npy_header(file_.data() ? file_.data() : kEmpty, file_.size(), origin_);
    data_ = file_.data() ? file_.data() + header_.data_offset : kEmpty;
}

NpyMap::NpyMap(std::string origin, DType dtype, std::vector<int64_t> shape, const void* data,
               std::vector<int64_t> byte_strides)
    : origin_(std::move(origin)), data_(static_cast<const uint8_t*>(data)) {
    for (int64_t d : shape) SS_CHECK(d >= 0, "negative dimension of ", origin_);
    SS_CHECK(byte_strides.empty() || byte_strides.size() == shape.size(), "strides of ", origin_);
    header_.dtype = dtype;
    header_.shape = std::move(shape);
    header_.data_bytes = size_t(numel()) * dtype_size(dtype);
    // C-order strides are dropped so the common case keeps the contiguous fast path.
    int64_t c_stride = int64_t(dtype_size(dtype));
    bool c_order = true;
    for (size_t d = byte_strides.size(); d-- > 0;) {
        if (header_.shape[d] > 1 && byte_strides[d] != c_stride) c_order = false;
        c_stride *= header_.shape[d];
    }
    if (!c_order) strides_ = std::move(byte_strides);
}

NpyMap::~NpyMap() = default;

int64_t NpyMap::numel() const {
    int64_t n = 1;
    for (auto d : header_.shape) n *= d;
    return n;
}

namespace {

// Calls f(pointer to element first + k, k) for k < count: contiguous elements by stepping, strided
// ones through their byte offsets (one multi-index walk per call of read_*).
template <typename F>
void each_element(const uint8_t* base, size_t size, int64_t first, int64_t count,
                  const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, F&& f) {
    if (strides.empty()) {
        for (int64_t k = 0; k < count; ++k) f(base + size * size_t(first + k), k);
        return;
    }
    const size_t rank = shape.size();
    std::vector<int64_t> index(rank);
    int64_t rest = first, offset = 0;
    for (size_t d = rank; d-- > 0;) {
        index[d] = rest % shape[d];
        rest /= shape[d];
        offset += index[d] * strides[d];
    }
    for (int64_t k = 0; k < count; ++k) {
        f(base + offset, k);
        for (size_t d = rank; d-- > 0;) {  // odometer step in C order
            offset += strides[d];
            if (++index[d] < shape[d]) break;
            offset -= index[d] * strides[d];
            index[d] = 0;
        }
    }
}

template <typename T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

}  // namespace

void NpyMap::read_f64(int64_t first, int64_t count, double* out) const {
    SS_CHECK(first >= 0 && count >= 0 && first + count <= numel(), "range [", first, ", ",
             first + count, ") outside ", numel(), " elements of ", origin_);
    const uint8_t* p = data();
    const auto& shape = header_.shape;
    switch (header_.dtype) {
        case DType::F16:
            each_element(p, 2, first, count, shape, strides_, [&](const uint8_t* e, int64_t k) {
                out[k] = half_to_float(load<uint16_t>(e));
            });
            break;
        case DType::F32:
            each_element(p, 4, first, count, shape, strides_,
                         [&](const uint8_t* e, int64_t k) { out[k] = load<float>(e); });
            break;
        case DType::F64:
            if (strides_.empty())
                std::memcpy(out, p + 8 * first, 8 * size_t(count));
            else
                each_element(p, 8, first, count, shape, strides_,
                             [&](const uint8_t* e, int64_t k) { out[k] = load<double>(e); });
            break;
        case DType::I32:
            each_element(p, 4, first, count, shape, strides_,
                         [&](const uint8_t* e, int64_t k) { out[k] = load<int32_t>(e); });
            break;
        case DType::I64:
            each_element(p, 8, first, count, shape, strides_, [&](const uint8_t* e, int64_t k) {
                out[k] = static_cast<double>(load<int64_t>(e));
            });
            break;
    }
}

void NpyMap::read_i64(int64_t first, int64_t count, int64_t* out) const {
    SS_CHECK(first >= 0 && count >= 0 && first + count <= numel(), "range outside ", origin_);
    const uint8_t* p = data();
    if (header_.dtype == DType::I64) {
        each_element(p, 8, first, count, header_.shape, strides_,
                     [&](const uint8_t* e, int64_t k) { out[k] = load<int64_t>(e); });
    } else if (header_.dtype == DType::I32) {
        each_element(p, 4, first, count, header_.shape, strides_,
                     [&](const uint8_t* e, int64_t k) { out[k] = load<int32_t>(e); });
    } else {
        throw UnsupportedError(origin_,
                               std::string("expected an integer array (<i4 or <i8), found ") +
                                   dtype_descr(header_.dtype));
    }
}

}  // namespace sinkscope::io
