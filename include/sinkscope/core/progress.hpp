// Progress line for long runs: redrawn on stderr when it is a terminal, silent otherwise.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace sinkscope {

// Progress inside one long step (a long input's forward or analyses): `done` of `total` units of
// the named stage. May be called from worker threads; an empty function reports nothing.
using StageProgress = std::function<void(const char* stage, int64_t done, int64_t total)>;

class Progress {
public:
    enum class Mode { Auto, Always, Never };
    // `total` = number of samples expected (0 when unknown).
    Progress(std::string label, int64_t total, Mode mode = Mode::Auto);
    ~Progress();

    // Reports `done` samples and `tokens` tokens processed so far (cumulative).
    void update(int64_t done, int64_t tokens);
    // Reports progress inside the current sample (appended to the line as "stage NN%"); cleared
    // by the next update(). Thread-safe.
    void stage(const char* name, int64_t done, int64_t total);
    // A StageProgress that forwards to stage() (nothing when the line is disabled).
    StageProgress stage_reporter();
    // Clears the line and prints a final summary (only when the line was shown).
    void finish();
    bool enabled() const { return enabled_; }

private:
    std::string label_;
    int64_t total_;
    bool enabled_;
    bool finished_ = false;
    std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point last_draw_;
    int64_t done_ = 0;
    int64_t tokens_ = 0;
    std::string stage_;  // "" or "stage NN%"
    std::mutex mutex_;

    void draw(std::chrono::steady_clock::time_point now);  // with mutex_ held
};

// Formats seconds as "1h02m", "3m05s" or "12s".
std::string format_duration(double seconds);

}  // namespace sinkscope
