// Hugging Face safetensors reader: one file or a sharded set (model.safetensors.index.json).
// Format (huggingface/safetensors README): u64 little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end)}, "__metadata__": {str: str}}, then the data
// section; offsets are relative to the data section, which tensors cover without holes or
// overlaps. Everything is validated before any tensor is handed out.
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "shard_index.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/io/mmap_file.hpp"
#include "sinkscope/io/weights.hpp"

namespace sinkscope::io {

using detail::ends_with;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct SafetensorsDType {
    const char* name;
    int64_t elem_bytes;
    bool supported;  // false: a valid safetensors dtype that sinkscope does not read
    WeightDType dtype;
};

// Every dtype of the safetensors format; the first six are readable.
constexpr SafetensorsDType k_dtypes[] = {
    {"F32", 4, true, WeightDType::F32},      {"F16", 2, true, WeightDType::F16},
    {"BF16", 2, true, WeightDType::BF16},    {"F64", 8, true, WeightDType::F64},
    {"I32", 4, true, WeightDType::I32},      {"I64", 8, true, WeightDType::I64},
    {"BOOL", 1, false, WeightDType::F32},    {"U8", 1, false, WeightDType::F32},
    {"I8", 1, false, WeightDType::F32},      {"I16", 2, false, WeightDType::F32},
    {"U16", 2, false, WeightDType::F32},     {"U32", 4, false, WeightDType::F32},
    {"U64", 8, false, WeightDType::F32},     {"F8_E4M3", 1, false, WeightDType::F32},
    {"F8_E5M2", 1, false, WeightDType::F32},
};

const SafetensorsDType* find_dtype(const std::string& name) {
    for (const auto& d : k_dtypes)
        if (name == d.name) return &d;
    return nullptr;
}

struct Entry {
    TensorView view;
    std::string unsupported_dtype;  // non-empty: get() throws UnsupportedError
};

std::string span_string(uint64_t b, uint64_t e) {
    return "[" + std::to_string(b) + ", " + std::to_string(e) + ")";
}

// Validates the header of one safetensors file and returns its tensors (views into `map`).
std::map<std::string, Entry> parse_safetensors(const MappedFile& map) {
    const std::string file = map.path().string();
    const size_t size = map.size();
    SS_CHECK_INPUT(size >= 8, file, "file too short (", size,
                   " bytes) for the 8-byte safetensors header length");
    uint64_t header_len = 0;
    std::memcpy(&header_len, map.data(), 8);  // little-endian host (static_assert in npy.cpp)
    // The length itself is not printed: from a file that is not safetensors at all it would be
    // eight of that file's bytes.
    SS_CHECK_INPUT(header_len <= size - 8, file,
                   "header length (the first 8 bytes) runs past the end of the file (", size,
                   " bytes): truncated, or not a safetensors file");
    const char* hbegin = reinterpret_cast<const char*>(map.data() + 8);
    // Two entries for one tensor name would leave which one is used to the JSON library.
    const json header = parse_json(std::string_view(hbegin, header_len), file,
                                   {.reject_duplicate_keys = true, .what = "header"});
    SS_CHECK_INPUT(header.is_object(), file, "header is not a JSON object");

    const uint64_t data_start = 8 + header_len;
    const uint64_t data_size = size - data_start;
    std::map<std::string, Entry> out;
    struct Span {
        uint64_t begin, end;
        std::string name;
    };
    std::vector<Span> spans;
    for (const auto& [name, info] : header.items()) {
        if (name == "__metadata__") {
            bool ok = info.is_object();
            if (ok)
                for (const auto& [k, v] : info.items()) ok = ok && v.is_string();
            SS_CHECK_INPUT(ok, file, "__metadata__ must map strings to strings");
            continue;
        }
        const std::string t = "tensor " + quote(name) + ": ";
        SS_CHECK_INPUT(info.is_object(), file, t, "entry is not a JSON object");
        SS_CHECK_INPUT(info.contains("dtype") && info["dtype"].is_string(), file, t,
                       "missing or non-string dtype");
        const std::string dtype_name = info["dtype"].get<std::string>();
        const SafetensorsDType* dtype = find_dtype(dtype_name);
        SS_CHECK_INPUT(dtype != nullptr, file, t, "unknown dtype ", quote(dtype_name));

        SS_CHECK_INPUT(info.contains("shape") && info["shape"].is_array(), file, t,
                       "missing shape list");
        std::vector<int64_t> shape;
        int64_t numel = 1;
        for (const auto& d : info["shape"]) {
            SS_CHECK_INPUT(d.is_number_unsigned(), file, t,
                           "shape must be a list of non-negative integers, found ", brief(d));
            const uint64_t v = d.get<uint64_t>();
            constexpr auto max = uint64_t(std::numeric_limits<int64_t>::max());
            SS_CHECK_INPUT(v <= max && (v == 0 || uint64_t(numel) <= max / v), file, t, "shape ",
                           brief(info["shape"]), " overflows");
            shape.push_back(int64_t(v));
            numel *= int64_t(v);
        }

        const auto& offs = info.contains("data_offsets") ? info["data_offsets"] : json();
        SS_CHECK_INPUT(offs.is_array() && offs.size() == 2 && offs[0].is_number_unsigned() &&
                           offs[1].is_number_unsigned(),
                       file, t, "data_offsets must be two non-negative integers");
        const uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
        SS_CHECK_INPUT(begin <= end, file, t, "data_offsets ", brief(offs), " end before begin");
        SS_CHECK_INPUT(end <= data_size, file, t, "data_offsets ", brief(offs),
                       " run past the data section (", data_size, " bytes; truncated?)");
        const bool fits = numel <= std::numeric_limits<int64_t>::max() / dtype->elem_bytes;
        const uint64_t need = fits ? uint64_t(numel * dtype->elem_bytes) : 0;
        SS_CHECK_INPUT(fits && need == end - begin, file, t, "shape ", brief(info["shape"]), " of ",
                       dtype->name, " needs ", fits ? std::to_string(need) : "too many",
                       " bytes but data_offsets ", brief(offs), " span ", end - begin);

        Entry e;
        e.view.name = name;
        e.view.dtype = dtype->dtype;
        e.view.shape = std::move(shape);
        e.view.data = map.data() + data_start + begin;
        e.view.n_bytes = size_t(end - begin);
        e.view.file = map.path();
        if (!dtype->supported) e.unsupported_dtype = dtype->name;
        out.emplace(name, std::move(e));
        spans.push_back({begin, end, name});
    }

    // The data section is the concatenation of the tensors: no overlap, no hole, nothing after.
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t pos = 0;
    const Span* prev = nullptr;
    for (const Span& s : spans) {
        SS_CHECK_INPUT(s.begin >= pos, file, "tensor ", quote(s.name), ": data_offsets ",
                       span_string(s.begin, s.end), " overlap tensor ", quote(prev->name), " ",
                       span_string(prev->begin, prev->end));
        SS_CHECK_INPUT(s.begin == pos, file, "tensor ", quote(s.name), ": data section bytes ",
                       span_string(pos, s.begin), " before it belong to no tensor");
        pos = s.end;
        prev = &s;
    }
    SS_CHECK_INPUT(pos == data_size, file, "data section has ", data_size - pos,
                   " bytes after the last tensor", prev ? " " + quote(prev->name) : std::string(),
                   " (", data_size, " bytes, tensors cover ", pos, ")");
    return out;
}

class SafetensorsStore final : public WeightStore {
public:
    // Adds a view into `map`, which the view keeps alive.
    void add(const std::string& name, Entry e, const std::shared_ptr<const MappedFile>& map) {
        e.view.owner = map;
        entries_.insert_or_assign(name, std::move(e));
    }
    void add_file(const fs::path& p) { files_.push_back(p); }

    std::vector<std::string> names() const override {
        std::vector<std::string> out;
        out.reserve(entries_.size());
        for (const auto& [name, e] : entries_) out.push_back(name);
        return out;
    }
    bool has(const std::string& name) const override { return entries_.count(name) != 0; }
    TensorView get(const std::string& name) const override {
        auto it = entries_.find(name);
        if (it == entries_.end()) throw InputError(description(), "no tensor named " + quote(name));
        const Entry& e = it->second;
        if (!e.unsupported_dtype.empty())
            throw UnsupportedError(e.view.file.string(),
                                   e.unsupported_dtype + " in " + quote(name));
        return e.view;
    }
    std::vector<fs::path> files() const override { return files_; }

    std::string description() const {
        return index_.empty() ? (files_.empty() ? std::string("safetensors") : files_[0].string())
                              : index_.string();
    }
    void set_index(const fs::path& p) { index_ = p; }

private:
    fs::path index_;
    std::vector<fs::path> files_;
    std::map<std::string, Entry> entries_;
};

std::unique_ptr<WeightStore> open_single(const fs::path& path) {
    auto store = std::make_unique<SafetensorsStore>();
    const auto map = std::make_shared<const MappedFile>(path);
    for (auto& [name, e] : parse_safetensors(*map)) store->add(name, std::move(e), map);
    store->add_file(path);
    return store;
}

std::unique_ptr<WeightStore> open_index(const fs::path& index_path) {
    auto store = std::make_unique<SafetensorsStore>();
    store->set_index(index_path);
    // Each shard is mapped once and keeps only what the index places there.
    for (const auto& [shard_path, tensors] : detail::read_shard_index(index_path)) {
        const auto map = std::make_shared<const MappedFile>(shard_path);
        auto entries = parse_safetensors(*map);
        for (const std::string& name : tensors) {
            auto it = entries.find(name);
            SS_CHECK_INPUT(it != entries.end(), shard_path.string(), "tensor ", quote(name),
                           " listed in ", index_path.filename().string(),
                           " is missing from this shard");
            store->add(name, it->second, map);  // only what the index places in this shard
        }
        store->add_file(shard_path);
    }
    return store;
}

}  // namespace

std::unique_ptr<WeightStore> open_safetensors(const std::filesystem::path& path) {
    if (fs::is_directory(path)) {
        if (fs::exists(path / "model.safetensors.index.json"))
            return open_index(path / "model.safetensors.index.json");
        if (fs::exists(path / "model.safetensors")) return open_single(path / "model.safetensors");
        throw InputError(path.string(),
                         "directory has no model.safetensors or model.safetensors.index.json");
    }
    if (ends_with(path.filename().string(), ".index.json")) return open_index(path);
    return open_single(path);
}

}  // namespace sinkscope::io
