// GGUF reader (format as specified in ggml's docs/gguf.md: versions 2 and 3). The file is
// memory-mapped; every count, length and offset is checked against the file size first.
#include "sinkscope/io/gguf.hpp"

#include <algorithm>
#include <cstring>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/limits.hpp"
#include "sinkscope/io/ggml_quant.hpp"

namespace sinkscope::io {

namespace {

enum ValueType : uint32_t {
    kU8 = 0,
    kI8 = 1,
    kU16 = 2,
    kI16 = 3,
    kU32 = 4,
    kI32 = 5,
    kF32 = 6,
    kBool = 7,
    kString = 8,
    kArray = 9,
    kU64 = 10,
    kI64 = 11,
    kF64 = 12,
};

// Bounds-checked cursor over the mapping.
struct Cursor {
    const uint8_t* base;
    size_t size;
    size_t pos;
    const std::string& file;

    [[noreturn]] void truncated(const std::string& what) const {
        throw InputError(file, "truncated or corrupt GGUF: " + what + " at byte " +
                                   std::to_string(pos) + " runs past the end of the file (" +
                                   std::to_string(size) + " bytes)");
    }
    void need(uint64_t n, const std::string& what) const {
        if (n > size - pos) truncated(what);
    }
    template <typename T>
    T read(const std::string& what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, base + pos, sizeof(T));
        pos += sizeof(T);
        return v;
    }
    std::string string(const std::string& what) {
        auto len = read<uint64_t>(what + " length");
        need(len, what);
        std::string s(reinterpret_cast<const char*>(base + pos), static_cast<size_t>(len));
        pos += static_cast<size_t>(len);
        return s;
    }
};

size_t scalar_size(uint32_t type) {
    switch (type) {
        case kU8:
        case kI8:
        case kBool:
            return 1;
        case kU16:
        case kI16:
            return 2;
        case kU32:
        case kI32:
        case kF32:
            return 4;
        case kU64:
        case kI64:
        case kF64:
            return 8;
        default:
            return 0;
    }
}

GgufValue read_value(Cursor& c, uint32_t type, const std::string& key, int depth) {
    GgufValue out;
    switch (type) {
        case kU8:
            out.v = uint64_t(c.read<uint8_t>(quote(key)));
            break;
        case kI8:
            out.v = int64_t(c.read<int8_t>(quote(key)));
            break;
        case kU16:
            out.v = uint64_t(c.read<uint16_t>(quote(key)));
            break;
        case kI16:
            out.v = int64_t(c.read<int16_t>(quote(key)));
            break;
        case kU32:
            out.v = uint64_t(c.read<uint32_t>(quote(key)));
            break;
        case kI32:
            out.v = int64_t(c.read<int32_t>(quote(key)));
            break;
        case kU64:
            out.v = c.read<uint64_t>(quote(key));
            break;
        case kI64:
            out.v = c.read<int64_t>(quote(key));
            break;
        case kF32:
            out.v = double(c.read<float>(quote(key)));
            break;
        case kF64:
            out.v = c.read<double>(quote(key));
            break;
        case kBool:
            out.v = c.read<uint8_t>(quote(key)) != 0;
            break;
        case kString:
            out.v = c.string(quote(key));
            break;
        case kArray: {
            if (depth > 4)
                throw InputError(c.file,
                                 "GGUF metadata " + quote(key) + " nests arrays too deeply");
            auto elem = c.read<uint32_t>(quote(key) + " array type");
            auto n = c.read<uint64_t>(quote(key) + " array count");
            // Each element takes at least one byte (strings at least 8): bound n by the file.
            uint64_t min_elem = elem == kString ? 8 : elem == kArray ? 12 : scalar_size(elem);
            if (min_elem == 0)
                throw InputError(c.file, "GGUF metadata " + quote(key) +
                                             " has unknown array element type " +
                                             std::to_string(elem));
            if (n > (c.size - c.pos) / min_elem)
                throw InputError(c.file, "GGUF metadata " + quote(key) + " array count " +
                                             std::to_string(n) + " exceeds the file size");
            // Arrays hold one entry per token (tokens, scores, types, merges): bounded by the
            // vocabulary limit, since each element costs far more in memory than in the file.
            check_limit(c.file, Limit::VocabSize, "GGUF metadata " + quote(key) + " array count",
                        n);
            auto arr = std::make_shared<GgufArray>();
            arr->reserve(static_cast<size_t>(n));
            for (uint64_t i = 0; i < n; ++i) arr->push_back(read_value(c, elem, key, depth + 1));
            out.v = std::move(arr);
            break;
        }
        default:
            throw InputError(c.file, "GGUF metadata " + quote(key) + " has unknown value type " +
                                         std::to_string(type));
    }
    return out;
}

}  // namespace

const char* ggml_type_name(uint32_t type) {
    const GgmlTypeInfo* t = ggml_type_info(type);
    return t ? t->name : "UNKNOWN";
}

int64_t GgufTensorInfo::numel() const {
    int64_t n = 1;
    for (auto d : dims) n *= d;
    return n;
}

GgufFile::GgufFile(const std::filesystem::path& path) : path_(path) {
    const std::string file = path.string();
    file_ = MappedFile(path);
    map_ = file_.data();
    size_ = file_.size();
    if (size_ < 24)
        throw InputError(file, "not a GGUF file: only " + std::to_string(size_) + " bytes");

    {
        Cursor c{map_, size_, 0, file};
        if (std::memcmp(map_, "GGUF", 4) != 0)
            throw InputError(file, "not a GGUF file (bad magic)");
        c.pos = 4;
        version_ = c.read<uint32_t>("version");
        if (version_ != 2 && version_ != 3)
            throw UnsupportedError(
                file, "GGUF version " + std::to_string(version_) + " (supported: 2, 3)");
        auto n_tensors = c.read<uint64_t>("tensor count");
        auto n_kv = c.read<uint64_t>("metadata count");
        // A key/value takes at least 12 bytes and a tensor description at least 24.
        if (n_kv > size_ / 12)
            throw InputError(file, "corrupt GGUF: metadata count " + std::to_string(n_kv) +
                                       " exceeds what the file can hold");
        if (n_tensors > size_ / 24)
            throw InputError(file, "corrupt GGUF: tensor count " + std::to_string(n_tensors) +
                                       " exceeds what the file can hold");
        for (uint64_t k = 0; k < n_kv; ++k) {
            std::string key = c.string("metadata key " + std::to_string(k));
            auto type = c.read<uint32_t>(quote(key) + " type");
            kv_[key] = read_value(c, type, key, 0);
        }
        tensors_.reserve(static_cast<size_t>(n_tensors));
        for (uint64_t k = 0; k < n_tensors; ++k) {
            GgufTensorInfo t;
            t.name = c.string("tensor name " + std::to_string(k));
            auto n_dims = c.read<uint32_t>(quote(t.name) + " n_dims");
            if (n_dims > 8)
                throw InputError(file, "corrupt GGUF: tensor " + quote(t.name) + " has " +
                                           std::to_string(n_dims) + " dimensions");
            uint64_t numel = 1;
            for (uint32_t d = 0; d < n_dims; ++d) {
                auto dim = c.read<uint64_t>(quote(t.name) + " dims");
                if (dim > (uint64_t(1) << 40) || (dim && numel > (uint64_t(1) << 50) / dim))
                    throw InputError(
                        file, "corrupt GGUF: tensor " + quote(t.name) + " dimension too large");
                numel *= dim;
                t.dims.push_back(static_cast<int64_t>(dim));
            }
            t.type = c.read<uint32_t>(quote(t.name) + " type");
            t.offset = c.read<uint64_t>(quote(t.name) + " offset");
            // Size from the type table (ggml_row_size: rows of whole blocks). An unknown type
            // keeps n_bytes 0; reading its data is refused (tensor_data, the weight store).
            if (const GgmlTypeInfo* tr = ggml_type_info(t.type)) {
                if (!t.dims.empty() && t.dims[0] % tr->block != 0)
                    throw InputError(file, "corrupt GGUF: tensor " + quote(t.name) + " row of " +
                                               std::to_string(t.dims[0]) +
                                               " values is not a whole number of " + tr->name +
                                               " blocks (" + std::to_string(tr->block) + ")");
                t.n_bytes = numel / uint64_t(tr->block) * uint64_t(tr->block_bytes);
            }
            tensors_.push_back(std::move(t));
        }
        uint64_t alignment = 32;
        if (has("general.alignment")) {
            int64_t a = get_int("general.alignment");
            if (a <= 0 || (a & (a - 1)) != 0)
                throw InputError(file, "corrupt GGUF: general.alignment " + std::to_string(a) +
                                           " is not a power of two");
            alignment = uint64_t(a);
        }
        data_offset_ = (c.pos + alignment - 1) / alignment * alignment;
        if (data_offset_ > size_ && !tensors_.empty())
            throw InputError(file, "truncated GGUF: no tensor data section");
        uint64_t data_size = size_ > data_offset_ ? size_ - data_offset_ : 0;
        // Offsets in range and tensors not overlapping.
        std::vector<const GgufTensorInfo*> order;
        for (const auto& t : tensors_) {
            if (t.offset % alignment != 0)
                throw InputError(file, "corrupt GGUF: tensor " + quote(t.name) + " offset " +
                                           std::to_string(t.offset) + " is not aligned");
            if (t.offset > data_size || t.n_bytes > data_size - t.offset)
                throw InputError(file, "truncated or corrupt GGUF: tensor " + quote(t.name) +
                                           " data [" + std::to_string(t.offset) + ", +" +
                                           std::to_string(t.n_bytes) +
                                           ") lies beyond the end of the file");
            order.push_back(&t);
        }
        std::sort(order.begin(), order.end(),
                  [](auto* a, auto* b) { return a->offset < b->offset; });
        for (size_t i = 1; i < order.size(); ++i)
            if (order[i - 1]->offset + order[i - 1]->n_bytes > order[i]->offset)
                throw InputError(file, "corrupt GGUF: tensor " + quote(order[i - 1]->name) + " (" +
                                           std::to_string(order[i - 1]->n_bytes) + " bytes of " +
                                           ggml_type_name(order[i - 1]->type) + " at offset " +
                                           std::to_string(order[i - 1]->offset) +
                                           ") overlaps tensor " + quote(order[i]->name) +
                                           " at offset " + std::to_string(order[i]->offset));
    }
}

GgufFile::~GgufFile() = default;

namespace {
[[noreturn]] void bad_key(const std::filesystem::path& p, const std::string& key,
                          const char* want) {
    throw InputError(p.string(), "GGUF metadata " + quote(key) + " is missing or not " + want);
}
}  // namespace

std::string GgufFile::get_string(const std::string& key) const {
    auto it = kv_.find(key);
    if (it == kv_.end() || !std::holds_alternative<std::string>(it->second.v))
        bad_key(path_, key, "a string");
    return std::get<std::string>(it->second.v);
}

int64_t GgufFile::get_int(const std::string& key) const {
    auto it = kv_.find(key);
    if (it != kv_.end()) {
        if (auto u = std::get_if<uint64_t>(&it->second.v)) return static_cast<int64_t>(*u);
        if (auto i = std::get_if<int64_t>(&it->second.v)) return *i;
    }
    bad_key(path_, key, "an integer");
}

double GgufFile::get_float(const std::string& key) const {
    auto it = kv_.find(key);
    if (it != kv_.end()) {
        if (auto d = std::get_if<double>(&it->second.v)) return *d;
        if (auto u = std::get_if<uint64_t>(&it->second.v)) return static_cast<double>(*u);
        if (auto i = std::get_if<int64_t>(&it->second.v)) return static_cast<double>(*i);
    }
    bad_key(path_, key, "a number");
}

int64_t GgufFile::get_int_or(const std::string& key, int64_t fallback) const {
    return has(key) ? get_int(key) : fallback;
}
double GgufFile::get_float_or(const std::string& key, double fallback) const {
    return has(key) ? get_float(key) : fallback;
}

namespace {
const GgufArray* array_of(const std::map<std::string, GgufValue>& kv,
                          const std::filesystem::path& p, const std::string& key) {
    auto it = kv.find(key);
    if (it == kv.end() || !std::holds_alternative<std::shared_ptr<GgufArray>>(it->second.v))
        bad_key(p, key, "an array");
    return std::get<std::shared_ptr<GgufArray>>(it->second.v).get();
}
}  // namespace

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
    std::vector<std::string> out;
    for (const auto& v : *array_of(kv_, path_, key)) {
        auto s = std::get_if<std::string>(&v.v);
        if (!s) bad_key(path_, key, "an array of strings");
        out.push_back(*s);
    }
    return out;
}

std::vector<double> GgufFile::get_float_array(const std::string& key) const {
    std::vector<double> out;
    for (const auto& v : *array_of(kv_, path_, key)) {
        if (auto d = std::get_if<double>(&v.v))
            out.push_back(*d);
        else if (auto u = std::get_if<uint64_t>(&v.v))
            out.push_back(double(*u));
        else if (auto i = std::get_if<int64_t>(&v.v))
            out.push_back(double(*i));
        else
            bad_key(path_, key, "an array of numbers");
    }
    return out;
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
    std::vector<int64_t> out;
    for (const auto& v : *array_of(kv_, path_, key)) {
        if (auto u = std::get_if<uint64_t>(&v.v))
            out.push_back(int64_t(*u));
        else if (auto i = std::get_if<int64_t>(&v.v))
            out.push_back(*i);
        else
            bad_key(path_, key, "an array of integers");
    }
    return out;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
    for (const auto& t : tensors_)
        if (t.name == name) return &t;
    return nullptr;
}

const uint8_t* GgufFile::tensor_data(const GgufTensorInfo& t) const {
    if (!ggml_type_info(t.type))
        throw UnsupportedError(path_.string(),
                               std::string("tensor type ") + ggml_type_name(t.type) + " (id " +
                                   std::to_string(t.type) + ") in " + quote(t.name));
    return map_ + data_offset_ + t.offset;
}

}  // namespace sinkscope::io
