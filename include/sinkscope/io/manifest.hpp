// A checkpoint manifest: the series of checkpoints `sinkscope dynamics` runs through, in order.
// JSON ({"checkpoints": [...]} as `sinkscope train` writes it, or a bare list) of objects with
// "path" and "step" and/or "label"; or CSV with a header naming the columns path and step and/or
// label (other columns are ignored). Relative paths are relative to the manifest's folder.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sinkscope::io {

struct ManifestEntry {
    std::string label;            // the label given, else the step as a number
    std::optional<int64_t> step;  // training step (>= 0), when given
    std::filesystem::path path;   // resolved against the manifest's folder
};

// Every entry, sorted by step when every entry has one (else in file order). InputError naming
// the manifest and the entry for: no entries, more than kMaxManifestEntries, an entry without
// path or without both step and label, a negative or non-integer step, a duplicate step or
// label, a path that does not exist. Checked before any model is read.
constexpr size_t kMaxManifestEntries = 10000;
std::vector<ManifestEntry> read_manifest(const std::filesystem::path& file);

}  // namespace sinkscope::io
