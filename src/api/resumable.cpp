// Shared rules of resumable commands (resumable.hpp).
#include "sinkscope/api/resumable.hpp"

#include "sinkscope/core/error.hpp"

namespace sinkscope::api {

Progress::Mode parse_progress_mode(const std::string& s) {
    if (s == "auto") return Progress::Mode::Auto;
    if (s == "always") return Progress::Mode::Always;
    if (s == "never") return Progress::Mode::Never;
    throw UsageError("--progress must be auto, always or never");
}

std::optional<std::string> interrupted_state(OutputDir& out,
                                             const std::filesystem::path& state_path, bool resume,
                                             std::ostream& log) {
    if (!std::filesystem::exists(state_path)) {
        if (resume)
            log << "--resume: no interrupted run in " << out.staging().string()
                << ", starting from the beginning\n";
        return std::nullopt;
    }
    out.keep_on_failure();
    if (!resume)
        throw UsageError(out.staging().string() +
                         " holds an interrupted run: pass --resume to continue it, or delete it");
    return read_file(state_path);
}

std::optional<nlohmann::json> interrupted_json_state(OutputDir& out,
                                                     const std::filesystem::path& state_path,
                                                     bool resume, const nlohmann::json& fingerprint,
                                                     const std::string& what, std::ostream& log) {
    std::optional<std::string> bytes = interrupted_state(out, state_path, resume, log);
    if (!bytes) return std::nullopt;
    nlohmann::json state;
    try {
        state = nlohmann::json::parse(*bytes);
    } catch (const nlohmann::json::exception&) {
        throw InputError(state_path.string(), "not " + what);
    }
    if (!state.is_object() || !state.contains("fingerprint") || state["fingerprint"] != fingerprint)
        throw UsageError("--resume: the interrupted run in " + out.staging().string() +
                         " used other inputs or options; delete it or repeat its command");
    return state;
}

}  // namespace sinkscope::api
