// pytorch_model.bin weight store: the zip archive (zip_archive.cpp) holds <archive>/data.pkl, a
// pickled state dict (torch_pickle.cpp), and one raw little-endian entry <archive>/data/<key>
// per storage. Each tensor becomes a view into the mapping after its storage, offset, shape and
// strides are checked against the entry's bytes. Sharded checkpoints use
// pytorch_model.bin.index.json, whose weight_map has the layout of safetensors' index.
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "shard_index.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/io/mmap_file.hpp"
#include "sinkscope/io/torch_pickle.hpp"
#include "sinkscope/io/zip_archive.hpp"

namespace sinkscope::io {

using detail::ends_with;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct StorageDType {
    const char* storage;  // torch.<name>
    int64_t elem_bytes;
    std::optional<WeightDType> dtype;  // nullopt: a storage type sinkscope does not read
};

constexpr StorageDType k_storage_dtypes[] = {
    {"FloatStorage", 4, WeightDType::F32},     {"HalfStorage", 2, WeightDType::F16},
    {"BFloat16Storage", 2, WeightDType::BF16}, {"DoubleStorage", 8, WeightDType::F64},
    {"LongStorage", 8, WeightDType::I64},      {"IntStorage", 4, WeightDType::I32},
    {"ShortStorage", 2, std::nullopt},         {"CharStorage", 1, std::nullopt},
    {"ByteStorage", 1, std::nullopt},          {"BoolStorage", 1, std::nullopt},
    {"ComplexFloatStorage", 8, std::nullopt},  {"ComplexDoubleStorage", 16, std::nullopt},
};

// torch/serialization.py MAGIC_NUMBER 0x1950a86a20f9469cfc6c pickled with protocol 2: the first
// bytes of the legacy (pre-1.6) torch.save format.
constexpr uint8_t k_legacy_magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                      0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

std::string list_string(const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
}

struct Entry {
    TensorView view;
    std::string unsupported;  // non-empty: get() throws UnsupportedError with this problem
};

// Checks one pickled tensor against its storage entry and returns its view into the archive.
Entry tensor_view(const ZipArchive& zip, const std::string& prefix, const PickledTensor& t) {
    const std::string file = zip.path().string();
    const std::string what = "tensor " + quote(t.name) + ": ";
    const StorageDType* st = nullptr;
    for (const StorageDType& s : k_storage_dtypes)
        if (t.storage_type == s.storage) st = &s;
    SS_CHECK(st != nullptr, "unpickler accepted storage type ", t.storage_type);

    const std::string entry_name = prefix + "/data/" + t.storage_key;
    const ZipEntry* e = zip.find(entry_name);
    SS_CHECK_INPUT(e != nullptr, file, what, "storage ", quote(t.storage_key), " (entry ",
                   quote(entry_name), ") is missing from the archive");
    constexpr int64_t max = std::numeric_limits<int64_t>::max();
    SS_CHECK_INPUT(t.storage_numel <= max / st->elem_bytes &&
                       uint64_t(t.storage_numel * st->elem_bytes) == e->size,
                   file, what, "storage ", quote(t.storage_key), " holds ", e->size,
                   " bytes but its pickle record says ", t.storage_numel, " ", t.storage_type,
                   " elements of ", st->elem_bytes, " bytes");

    // Elements reached by offset + sum((shape_i - 1) * stride_i) must lie inside the storage.
    bool ok = t.offset >= 0;
    __int128 numel = 1, last = t.offset;
    for (size_t i = 0; ok && i < t.shape.size(); ++i) {
        ok = t.shape[i] >= 0 && t.stride[i] >= 0;
        numel *= t.shape[i];
        if (t.shape[i] > 0) last += __int128(t.shape[i] - 1) * t.stride[i];
        ok = ok && numel <= max && last <= max;
    }
    SS_CHECK_INPUT(ok, file, what, "shape ", list_string(t.shape), ", stride ",
                   list_string(t.stride), " and offset ", t.offset, " are negative or overflow");
    const bool inside = numel == 0 ? t.offset <= t.storage_numel : last < t.storage_numel;
    SS_CHECK_INPUT(inside, file, what, "shape ", list_string(t.shape), ", stride ",
                   list_string(t.stride), " and offset ", t.offset, " reach element ",
                   int64_t(last), " but storage ", quote(t.storage_key), " has only ",
                   t.storage_numel, " elements");

    Entry out;
    out.view.name = t.name;
    out.view.shape = t.shape;
    out.view.file = zip.path();
    out.view.dtype = st->dtype.value_or(WeightDType::F32);
    out.view.n_bytes = size_t(numel) * size_t(st->elem_bytes);
    if (!st->dtype) {
        out.unsupported = what + "dtype " + t.storage_type + " is not a weight type";
    } else {
        int64_t expect = 1;  // C-contiguous strides; dims of size 1 may have any stride
        for (size_t i = t.shape.size(); i-- > 0;) {
            if (t.shape[i] != 1 && t.stride[i] != expect)
                out.unsupported = what + "stride " + list_string(t.stride) + " for shape " +
                                  list_string(t.shape) +
                                  " is not C-contiguous (only contiguous tensors are read)";
            expect *= t.shape[i];
        }
    }
    if (out.unsupported.empty()) {
        const uint8_t* base = zip.data(*e);  // throws UnsupportedError for compressed entries
        out.view.data = base + t.offset * st->elem_bytes;
    }
    return out;
}

class PytorchBinStore final : public WeightStore {
public:
    explicit PytorchBinStore(fs::path description) : description_(std::move(description)) {}

    // Opens one .bin and adds the tensors `only` names (all of them when `only` is null).
    std::vector<std::string> add_file(const fs::path& path, const std::set<std::string>* only);

    std::vector<std::string> names() const override { return order_; }
    bool has(const std::string& name) const override { return entries_.count(name) != 0; }
    TensorView get(const std::string& name) const override {
        auto it = entries_.find(name);
        if (it == entries_.end())
            throw InputError(description_.string(), "no tensor named " + quote(name));
        if (!it->second.unsupported.empty())
            throw UnsupportedError(it->second.view.file.string(), it->second.unsupported);
        return it->second.view;
    }
    std::vector<fs::path> files() const override {
        std::vector<fs::path> out;
        for (const auto& z : archives_) out.push_back(z->path());
        return out;
    }

private:
    fs::path description_;
    std::vector<std::unique_ptr<ZipArchive>> archives_;  // the mappings the views point into
    std::map<std::string, Entry> entries_;
    std::vector<std::string> order_;
};

// The archive's top folder: torch.save names it after the file stem, pickle_save "archive".
std::string archive_prefix(const ZipArchive& zip) {
    std::string prefix;
    for (const ZipEntry& e : zip.entries()) {
        const size_t slash = e.name.find('/');
        if (slash == std::string::npos || e.name.compare(slash, std::string::npos, "/data.pkl"))
            continue;
        SS_CHECK_INPUT(prefix.empty(), zip.path().string(), "archive holds both ",
                       quote(prefix + "/data.pkl"), " and ", quote(e.name));
        prefix = e.name.substr(0, slash);
    }
    SS_CHECK_INPUT(!prefix.empty(), zip.path().string(),
                   "zip archive has no <name>/data.pkl entry: not a PyTorch checkpoint");
    return prefix;
}

std::vector<std::string> PytorchBinStore::add_file(const fs::path& path,
                                                   const std::set<std::string>* only) {
    const std::string file = path.string();
    {
        std::ifstream f(path, std::ios::binary);
        uint8_t head[sizeof k_legacy_magic] = {};
        f.read(reinterpret_cast<char*>(head), sizeof head);
        if (f.gcount() == std::streamsize(sizeof head) &&
            std::memcmp(head, k_legacy_magic, sizeof head) == 0)
            throw UnsupportedError(file,
                                   "legacy (non-zip) torch.save format; re-save it with "
                                   "PyTorch >= 1.6 or convert it to safetensors");
    }
    auto zip = std::make_unique<ZipArchive>(path);
    const std::string prefix = archive_prefix(*zip);
    if (const ZipEntry* bo = zip->find(prefix + "/byteorder")) {
        const std::string order(reinterpret_cast<const char*>(zip->data(*bo)), bo->size);
        if (order != "little")
            throw UnsupportedError(file, "byte order " + quote(order) + " (only little-endian)");
    }
    const ZipEntry& pkl = *zip->find(prefix + "/data.pkl");
    const std::vector<PickledTensor> tensors = unpickle_state_dict(zip->data(pkl), pkl.size, file);
    std::vector<std::string> added;
    for (const PickledTensor& t : tensors) {
        if (only && !only->count(t.name)) continue;
        entries_.insert_or_assign(t.name, tensor_view(*zip, prefix, t));
        order_.push_back(t.name);
        added.push_back(t.name);
    }
    archives_.push_back(std::move(zip));
    return added;
}

std::unique_ptr<WeightStore> open_index(const fs::path& index_path) {
    auto store = std::make_unique<PytorchBinStore>(index_path);
    for (const auto& [shard_path, listed] : detail::read_shard_index(index_path)) {
        const std::set<std::string> tensors(listed.begin(), listed.end());
        const std::vector<std::string> added = store->add_file(shard_path, &tensors);
        const std::set<std::string> found(added.begin(), added.end());
        for (const std::string& name : tensors)
            SS_CHECK_INPUT(found.count(name), shard_path.string(), "tensor ", quote(name),
                           " listed in ", index_path.filename().string(),
                           " is missing from this shard");
    }
    return store;
}

}  // namespace

std::unique_ptr<WeightStore> open_pytorch_bin(const std::filesystem::path& path) {
    if (fs::is_directory(path)) {
        if (fs::exists(path / "pytorch_model.bin.index.json"))
            return open_index(path / "pytorch_model.bin.index.json");
        if (fs::exists(path / "pytorch_model.bin"))
            return open_pytorch_bin(path / "pytorch_model.bin");
        throw InputError(path.string(),
                         "directory has no pytorch_model.bin or pytorch_model.bin.index.json");
    }
    if (ends_with(path.filename().string(), ".index.json")) return open_index(path);
    auto store = std::make_unique<PytorchBinStore>(path);
    store->add_file(path, nullptr);
    return store;
}

}  // namespace sinkscope::io
