// Internal: the index of a sharded checkpoint (model.safetensors.index.json,
// pytorch_model.bin.index.json), read and checked once for both weight formats.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace sinkscope::io::detail {

bool ends_with(const std::string& s, const std::string& suffix);

// `dir / name` for a file name read from a file in `dir`, after checking that it stays inside
// `dir` (no "..", not absolute, no linked folder leading out): InputError naming `file` and
// `what` otherwise, before anything of the named file is read.
std::filesystem::path contained_path(const std::filesystem::path& dir, const std::string& name,
                                     const std::string& file, const std::string& what);

// Shard path (beside the index) -> the tensors the index's weight_map places there, in the
// index's order. Throws InputError naming the index: invalid JSON, no weight_map object, a value
// that is not a relative file name, an empty map, or a shard file that does not exist.
std::map<std::filesystem::path, std::vector<std::string>> read_shard_index(
    const std::filesystem::path& index_path);

}  // namespace sinkscope::io::detail
