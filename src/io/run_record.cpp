// run.json writer (spec section 9).
#include "sinkscope/io/run_record.hpp"

#include <cmath>
#include <thread>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/sha256.hpp"
#include "sinkscope/core/system.hpp"
#include "sinkscope/io/table.hpp"

namespace sinkscope::io {

nlohmann::json json_number(double v) {
    if (std::isfinite(v)) return v;
    return format_number(v);
}

RunRecord::RunRecord(std::string command) : start_(std::chrono::steady_clock::now()) {
    j_["tool"] = {{"name", "sinkscope"}, {"version", version_string()}, {"git_commit", git_commit()}};
    j_["command"] = std::move(command);
    j_["started_utc"] = utc_timestamp();
    j_["threads"] = std::thread::hardware_concurrency();
}

void RunRecord::set(const std::string& key, nlohmann::json value) { j_[key] = std::move(value); }

void RunRecord::set_model_files(const std::string& model_path,
                                const std::vector<std::filesystem::path>& weight_files) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : weight_files)
        files.push_back({{"path", f.string()}, {"sha256", sha256_file(f)}});
    j_["model"]["path"] = model_path;
    j_["model"]["weight_files"] = std::move(files);
}

namespace {
// Replaces non-finite numbers anywhere in the record by their string form.
void sanitize(nlohmann::json& j) {
    if (j.is_number_float()) {
        double v = j.get<double>();
        if (!std::isfinite(v)) j = format_number(v);
    } else if (j.is_structured()) {
        for (auto& child : j) sanitize(child);
    }
}
}  // namespace

void RunRecord::write(const std::filesystem::path& dir) {
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    j_["wall_time_s"] = wall;
    j_["peak_rss_bytes"] = peak_rss_bytes();
    j_["finished_utc"] = utc_timestamp();
    sanitize(j_);
    write_file_atomic(dir / "run.json", j_.dump(2) + "\n");
}

}  // namespace sinkscope::io
