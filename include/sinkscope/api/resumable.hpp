// What every resumable command (analyze, prune) does the same way: the --progress option, and
// the rule for a staging folder that already holds an interrupted run's state.
#pragma once

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

// interrupted_state() of a JSON state file whose "fingerprint" must equal this run's: the parsed
// state, or nullopt when there is none. InputError naming the file when it is not JSON (`what`:
// "a prune state file"), UsageError saying how to proceed when it belongs to another run.
std::optional<nlohmann::json> interrupted_json_state(OutputDir& out,
                                                     const std::filesystem::path& state_path,
                                                     bool resume, const nlohmann::json& fingerprint,
                                                     const std::string& what, std::ostream& log);

}  // namespace sinkscope::api
