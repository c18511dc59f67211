// Sharded checkpoint indexes (shard_index.hpp).
#include "shard_index.hpp"

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/io/json.hpp"

namespace sinkscope::io::detail {

namespace fs = std::filesystem;
using nlohmann::json;

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

namespace {

// True when `p` is `dir` or lies below it (both canonical).
bool inside(const fs::path& p, const fs::path& dir) {
    auto d = dir.begin(), q = p.begin();
    for (; d != dir.end(); ++d, ++q)
        if (q == p.end() || *q != *d) return false;
    return true;
}

}  // namespace

fs::path contained_path(const fs::path& dir, const std::string& name, const std::string& file,
                        const std::string& what) {
    // The name is text from a file: it may only select a file in `dir` or a folder below it,
    // never climb out of it (`../`, an absolute path, or a folder that is a link leading out).
    // The last component may be a link (the Hugging Face cache links every file of a snapshot
    // to its blob store), so the folder holding it is what is resolved. Nothing of the named
    // file is opened before this check, so a refused name never leaks its content.
    const fs::path rel = fs::path(name).lexically_normal();
    const bool climbs = !rel.empty() && *rel.begin() == "..";
    SS_CHECK_INPUT(!name.empty() && rel.is_relative() && !climbs && rel.has_filename(), file, what,
                   " ", quote(name), " is not a file name inside ", dir.string());
    std::error_code ec;
    const fs::path root = fs::canonical(dir, ec);
    if (ec) throw IoError(dir.string(), "cannot resolve the folder: " + ec.message());
    const fs::path folder = fs::weakly_canonical(dir / rel.parent_path(), ec);
    SS_CHECK_INPUT(!ec && inside(folder, root), file, what, " ", quote(name), " leads outside ",
                   dir.string());
    return dir / rel;
}

std::map<fs::path, std::vector<std::string>> read_shard_index(const fs::path& index_path) {
    const std::string file = index_path.string();
    // A tensor listed twice would silently go to the last shard named.
    const json index = read_json_file(index_path, {.reject_duplicate_keys = true, .what = "index"});
    SS_CHECK_INPUT(
        index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(), file,
        "index has no \"weight_map\" object");
    std::map<fs::path, std::vector<std::string>> by_shard;
    const fs::path dir =
        index_path.parent_path().empty() ? fs::path(".") : index_path.parent_path();
    for (const auto& [name, shard] : index["weight_map"].items()) {
        SS_CHECK_INPUT(shard.is_string(), file, "tensor ", quote(name),
                       ": weight_map value is not a file name");
        const std::string s = shard.get<std::string>();
        by_shard[contained_path(dir, s, file, "tensor " + quote(name) + ": shard")].push_back(name);
    }
    SS_CHECK_INPUT(!by_shard.empty(), file, "weight_map is empty");
    for (const auto& [shard_path, tensors] : by_shard) {
        // The name comes from the file: a name too long for the file system, or one that
        // passes through a loop of links, is an error of the index, not a crash.
        std::error_code ec;
        const fs::file_status st = fs::status(shard_path, ec);
        const bool missing =
            !ec || ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory;
        SS_CHECK_INPUT(missing, file, "shard ", quote(shard_path.filename().string()),
                       " (for tensor ", quote(tensors.front()),
                       ") cannot be looked at: ", ec.message());
        SS_CHECK_INPUT(fs::is_regular_file(st), file, "shard ",
                       quote(shard_path.filename().string()), " (for tensor ",
                       quote(tensors.front()), ") not found at ", printable(shard_path.string()));
    }
    return by_shard;
}

}  // namespace sinkscope::io::detail
