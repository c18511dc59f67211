// Writes analysis outputs into a run directory and names a finished run's model
// (run_outputs.hpp).
#include "sinkscope/api/run_outputs.hpp"

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/json.hpp"

namespace sinkscope::api {

void write_outputs(const analysis::PipelineResults& results, const RunFiles& dir) {
    for (const auto& [name, out] : results.outputs) analysis::write_output(out, dir);
}

std::string model_name(const nlohmann::json& rec, const std::filesystem::path& dir) {
    namespace fs = std::filesystem;
    if (rec.contains("model") && rec["model"].is_object() && rec["model"].contains("name") &&
        rec["model"]["name"].is_string() && !rec["model"]["name"].get<std::string>().empty())
        return rec["model"]["name"].get<std::string>();
    if (rec.contains("model") && rec["model"].is_object() && rec["model"].contains("path") &&
        rec["model"]["path"].is_string()) {
        fs::path p = fs::path(rec["model"]["path"].get<std::string>()).lexically_normal();
        if (p.filename().empty()) p = p.parent_path();
        if (!p.filename().empty()) return p.filename().string();
    }
    return fs::absolute(dir).lexically_normal().filename().string();
}

nlohmann::json read_run_json(const std::filesystem::path& dir, const std::string& shown) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(dir, ec)) throw InputError(shown, "no such run directory");
    if (!fs::is_directory(dir, ec)) throw InputError(shown, "is not a directory");
    if (!fs::exists(dir / "run.json", ec))
        throw InputError(shown, "is not a sinkscope run directory (no run.json)");
    const nlohmann::json rec = io::read_json_file(dir / "run.json");
    const std::string file = (dir / "run.json").string();
    if (!rec.is_object() || !rec.contains("tool") || !rec["tool"].is_object() ||
        io::json_string_or(rec["tool"], "name", "", file) != "sinkscope")
        throw InputError(file, "was not written by sinkscope (no tool.name \"sinkscope\")");
    return rec;
}

}  // namespace sinkscope::api
