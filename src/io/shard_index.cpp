// Sharded checkpoint indexes (shard_index.hpp).
#include "shard_index.hpp"

#include <nlohmann/json.hpp>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/mmap_file.hpp"

namespace sinkscope::io::detail {

namespace fs = std::filesystem;
using nlohmann::json;

std::string quoted(const std::string& s) { return "'" + s + "'"; }

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::map<fs::path, std::vector<std::string>> read_shard_index(const fs::path& index_path) {
    const std::string file = index_path.string();
    json index;
    {
        MappedFile map(index_path);
        const char* p = reinterpret_cast<const char*>(map.data());
        try {
            index = json::parse(p, p + map.size());
        } catch (const json::exception& e) {
            throw InputError(file, std::string("index is not valid JSON: ") + e.what());
        }
    }
    SS_CHECK_INPUT(
        index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(), file,
        "index has no \"weight_map\" object");
    std::map<fs::path, std::vector<std::string>> by_shard;
    for (const auto& [name, shard] : index["weight_map"].items()) {
        SS_CHECK_INPUT(shard.is_string(), file, "tensor ", quoted(name),
                       ": weight_map value is not a file name");
        const std::string s = shard.get<std::string>();
        SS_CHECK_INPUT(!s.empty() && fs::path(s).is_relative(), file, "tensor ", quoted(name),
                       ": shard ", quoted(s), " is not a relative file name");
        by_shard[index_path.parent_path() / s].push_back(name);
    }
    SS_CHECK_INPUT(!by_shard.empty(), file, "weight_map is empty");
    for (const auto& [shard_path, tensors] : by_shard)
        SS_CHECK_INPUT(fs::is_regular_file(shard_path), file, "shard ",
                       quoted(shard_path.filename().string()), " (for tensor ",
                       quoted(tensors.front()), ") not found at ", shard_path.string());
    return by_shard;
}

}  // namespace sinkscope::io::detail
