// run.json: the provenance record of every output directory (spec section 9).
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sinkscope/core/run_files.hpp"

namespace sinkscope::io {

class RunRecord {
public:
    // Starts the wall clock and fills tool version, git commit, command line, start time and
    // `threads`: the thread count the command computes with (its resolved --threads, >= 1; 1 for
    // a command that computes on one thread), not the machine's core count.
    RunRecord(std::string command, int threads);

    // Any field; values replace earlier ones. Non-finite doubles become "inf"/"nan" strings.
    void set(const std::string& key, nlohmann::json value);
    nlohmann::json& json() { return j_; }
    const nlohmann::json& json() const { return j_; }

    // Records the model's path under "model" now, and the path and sha256 of each weight file
    // under "model.weight_files" when written. The files are hashed on a background thread that
    // runs only on a core nobody else wants (SCHED_IDLE on Linux): hashing a 0.5 GB file takes
    // ~0.3 s of one core, which a command that called this early hides in its idle moments.
    // write() hashes what that thread has not done yet itself, at the command's priority (on a
    // machine whose cores are all busy the idle-class thread may never run), and throws IoError
    // if a file could not be read.
    void set_model_files(const std::string& model_path,
                         const std::vector<std::filesystem::path>& weight_files);

    // Adds wall time and peak memory, then writes <dir>/run.json atomically.
    void write(const std::filesystem::path& dir);
    // The same into a run's files (on disk or in memory).
    void write(const RunFiles& dir);

    RunRecord(const RunRecord&) = delete;
    RunRecord& operator=(const RunRecord&) = delete;
    ~RunRecord();  // stops a hashing still running

private:
    struct Hashing;
    void finish_hashing();
    nlohmann::json j_;
    std::chrono::steady_clock::time_point start_;
    std::unique_ptr<Hashing> hashing_;
};

// JSON number that survives non-finite values (spec section 10.p).
nlohmann::json json_number(double v);

}  // namespace sinkscope::io
