// run.json writer (spec section 9).
#include "sinkscope/io/run_record.hpp"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <thread>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include "sinkscope/core/allocator.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/sha256.hpp"
#include "sinkscope/core/system.hpp"
#include "sinkscope/io/table.hpp"

namespace sinkscope::io {

nlohmann::json json_number(double v) {
    if (std::isfinite(v)) return v;
    return format_number(v);
}

RunRecord::RunRecord(std::string command, int threads) : start_(std::chrono::steady_clock::now()) {
    j_["tool"] = {
        {"name", "sinkscope"}, {"version", version_string()}, {"git_commit", git_commit()}};
    j_["command"] = std::move(command);
    j_["started_utc"] = utc_timestamp();
    j_["threads"] = threads;
    // The variables that change speed and memory, not results (core/allocator.hpp): what the
    // process ran with, null where unset.
    nlohmann::json env = nlohmann::json::object();
    for (const std::string entry : kRuntimePolicy) {
        const std::string name = entry.substr(0, entry.find('='));
        const char* v = std::getenv(name.c_str());
        env[name] = v ? nlohmann::json(v) : nlohmann::json(nullptr);
    }
    j_["environment"] = std::move(env);
}

void RunRecord::set(const std::string& key, nlohmann::json value) {
    j_[key] = std::move(value);
}

struct RunRecord::Hashing {
    std::string model_path;
    std::vector<std::filesystem::path> files;
    std::vector<std::string> digests;  // "" until hashed
    std::atomic<size_t> next{0};       // the next file the background thread takes
    std::exception_ptr error;
    std::atomic<bool> cancel{false};
    std::thread worker;

    void run() {
#if defined(__linux__)
        // Lowering one's own thread to the idle class needs no privilege; where refused, the
        // hashing simply competes at normal priority. On a busy machine this thread may get no
        // core at all: finish_hashing() then does the rest itself.
        sched_param idle{};
        pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
#endif
        try {
            for (size_t i = next++; i < files.size(); i = next++) {
                std::string d = sha256_file(files[i], &cancel);
                if (cancel.load(std::memory_order_relaxed)) return;  // d may be cut short
                digests[i] = std::move(d);
            }
        } catch (...) {
            error = std::current_exception();
        }
    }
};

void RunRecord::set_model_files(const std::string& model_path,
                                const std::vector<std::filesystem::path>& weight_files) {
    if (hashing_) {  // a second call replaces the first
        hashing_->cancel = true;
        hashing_->worker.join();
    }
    j_["model"]["path"] = model_path;
    j_["model"]["weight_files"] = nlohmann::json::array();
    hashing_ = std::make_unique<Hashing>();
    hashing_->model_path = model_path;
    hashing_->files = weight_files;
    hashing_->digests.assign(weight_files.size(), "");
    hashing_->worker = std::thread([h = hashing_.get()] { h->run(); });
}

void RunRecord::finish_hashing() {
    if (!hashing_) return;
    // The command waits for the hashes now: the idle-class thread, which a busy machine may
    // never schedule, stops at its next block (it needs only a moment of a core to see the flag),
    // and this thread, at the command's own priority, hashes every file not yet done.
    hashing_->cancel = true;
    hashing_->worker.join();
    const std::unique_ptr<Hashing> done = std::move(hashing_);
    if (done->error) std::rethrow_exception(done->error);
    for (size_t i = 0; i < done->files.size(); ++i)
        if (done->digests[i].empty()) done->digests[i] = sha256_file(done->files[i]);
    nlohmann::json files = nlohmann::json::array();
    for (size_t i = 0; i < done->files.size(); ++i)
        files.push_back({{"path", done->files[i].string()}, {"sha256", done->digests[i]}});
    j_["model"]["path"] = done->model_path;  // again: a caller may have replaced "model"
    j_["model"]["weight_files"] = std::move(files);
}

RunRecord::~RunRecord() {
    if (!hashing_) return;
    hashing_->cancel = true;
    hashing_->worker.join();
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
    write(RunFiles(dir));
}

void RunRecord::write(const RunFiles& dir) {
    finish_hashing();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    j_["wall_time_s"] = wall;
    j_["peak_rss_bytes"] = peak_rss_bytes();
    j_["finished_utc"] = utc_timestamp();
    sanitize(j_);
    dir.write("run.json", j_.dump(2) + "\n");
}

}  // namespace sinkscope::io
