// What every resumable command (analyze, prune) does the same way: the --progress option, the
// rule for a staging folder that already holds an interrupted run's state, and the state file
// itself, which is checked before anything in it is believed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/progress.hpp"

namespace sinkscope::api {

// "auto" | "always" | "never"; UsageError naming --progress otherwise.
Progress::Mode parse_progress_mode(const std::string& s);

// The state file `state_path` inside `out`'s staging folder, when an interrupted run left one:
// its bytes, after marking the folder to be kept (an interrupted run's state is never discarded
// by accident). Without `resume` such a folder is a UsageError saying how to proceed. With
// `resume` and no state, one line on `log` says the run starts from the beginning.
std::optional<std::string> interrupted_state(OutputDir& out,
                                             const std::filesystem::path& state_path, bool resume,
                                             std::ostream& log);

// A state file is one JSON line, {"sinkscope_state": KIND, "version": V, "fingerprint": {...},
// "payload_bytes": N, "payload_sha256": HEX}, then the command's own N payload bytes. The
// fingerprint is what the run depends on (model, inputs, options): a resumed run must have the
// same one.
struct StateFormat {
    const char* kind;  // "analyze", "prune"
    uint32_t version;  // bumped whenever the payload layout changes
};

// The bytes to write for `payload`.
std::string seal_state(const StateFormat& format, const nlohmann::json& fingerprint,
                       const std::string& payload);

// The payload of the state file `file` (bytes `bytes`, in `out`'s staging folder), after
// checking, in this order: the header line (at most 1 MiB, bounded JSON, typed keys), the kind
// and version, the payload's size and checksum, and the fingerprint. A file that is damaged, cut
// short, of another command or version is an InputError naming the file; a sound state of
// another run (other inputs or options) is the UsageError of a wrong --resume.
std::string open_state(const std::string& bytes, const std::filesystem::path& file,
                       const StateFormat& format, const nlohmann::json& fingerprint,
                       const OutputDir& out);

}  // namespace sinkscope::api
