// run.json: the provenance record of every output directory (spec section 9).
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace sinkscope::io {

class RunRecord {
public:
    // Starts the wall clock and fills tool version, git commit, command line and start time.
    explicit RunRecord(std::string command);

    // Any field; values replace earlier ones. Non-finite doubles become "inf"/"nan" strings.
    void set(const std::string& key, nlohmann::json value);
    nlohmann::json& json() { return j_; }
    const nlohmann::json& json() const { return j_; }

    // Records path and sha256 of each weight file under "model".
    void set_model_files(const std::string& model_path,
                         const std::vector<std::filesystem::path>& weight_files);

    // Adds wall time and peak memory, then writes <dir>/run.json atomically.
    void write(const std::filesystem::path& dir);

private:
    nlohmann::json j_;
    std::chrono::steady_clock::time_point start_;
};

// JSON number that survives non-finite values (spec section 10.p).
nlohmann::json json_number(double v);

}  // namespace sinkscope::io
