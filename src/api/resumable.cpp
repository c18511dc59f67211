// Shared rules of resumable commands (resumable.hpp).
#include "sinkscope/api/resumable.hpp"

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/sha256.hpp"
#include "sinkscope/io/json.hpp"

namespace sinkscope::api {

namespace {
constexpr size_t kMaxHeaderBytes = size_t(1) << 20;  // the header line: a fingerprint, no data
}

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

std::string seal_state(const StateFormat& format, const nlohmann::json& fingerprint,
                       const std::string& payload) {
    const nlohmann::json header = {{"sinkscope_state", format.kind},
                                   {"version", format.version},
                                   {"fingerprint", fingerprint},
                                   {"payload_bytes", payload.size()},
                                   {"payload_sha256", sha256_hex(payload)}};
    return header.dump() + "\n" + payload;  // dump() without indent: one line
}

std::string open_state(const std::string& bytes, const std::filesystem::path& file,
                       const StateFormat& format, const nlohmann::json& fingerprint,
                       const OutputDir& out) {
    const std::string name = file.string();
    const auto fail = [&](const std::string& what) {
        throw InputError(name, "not a usable " + std::string(format.kind) + " state file (" + what +
                                   "): delete the folder " + out.staging().string() +
                                   " to start again");
    };
    const size_t eol = bytes.find('\n');
    if (eol == std::string::npos || eol > kMaxHeaderBytes) fail("no header line");
    nlohmann::json header;
    try {
        header = io::parse_json(std::string_view(bytes).substr(0, eol), name);
    } catch (const InputError&) {
        fail("the header line is not JSON");
    }
    if (!header.is_object() || header.value("sinkscope_state", nlohmann::json()) != format.kind)
        fail("not written by sinkscope " + std::string(format.kind));
    const nlohmann::json& version = header.value("version", nlohmann::json());
    if (!version.is_number_unsigned() || version.get<uint64_t>() != format.version)
        fail("written by another sinkscope version");
    const nlohmann::json& size = header.value("payload_bytes", nlohmann::json());
    const nlohmann::json& sum = header.value("payload_sha256", nlohmann::json());
    if (!size.is_number_unsigned() || !sum.is_string() || !header.contains("fingerprint"))
        fail("the header lacks the payload size, checksum or fingerprint");
    const std::string payload = bytes.substr(eol + 1);
    if (size.get<uint64_t>() != payload.size())
        fail("the payload has " + std::to_string(payload.size()) + " bytes, the header says " +
             std::to_string(size.get<uint64_t>()) + ": cut short or appended to");
    if (sha256_hex(payload) != sum.get<std::string>()) fail("the payload's checksum differs");
    if (header["fingerprint"] != fingerprint)
        throw UsageError("--resume: the interrupted run in " + out.staging().string() +
                         " used other inputs or options; delete it or repeat its command");
    return payload;
}

}  // namespace sinkscope::api
