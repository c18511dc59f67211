// Internal: the index of a sharded checkpoint (model.safetensors.index.json,
// pytorch_model.bin.index.json), read and checked once for both weight formats.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace sinkscope::io::detail {

// 'name' (for error messages about tensors and files).
std::string quoted(const std::string& s);
bool ends_with(const std::string& s, const std::string& suffix);

// Shard path (beside the index) -> the tensors the index's weight_map places there, in the
// index's order. Throws InputError naming the index: invalid JSON, no weight_map object, a value
// that is not a relative file name, an empty map, or a shard file that does not exist.
std::map<std::filesystem::path, std::vector<std::string>> read_shard_index(
    const std::filesystem::path& index_path);

}  // namespace sinkscope::io::detail
