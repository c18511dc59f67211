// Progress line for long runs: redrawn on stderr when it is a terminal, silent otherwise.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace sinkscope {

class Progress {
public:
    enum class Mode { Auto, Always, Never };
    // `total` = number of samples expected (0 when unknown).
    Progress(std::string label, int64_t total, Mode mode = Mode::Auto);
    ~Progress();

    // Reports `done` samples and `tokens` tokens processed so far (cumulative).
    void update(int64_t done, int64_t tokens);
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
};

// Formats seconds as "1h02m", "3m05s" or "12s".
std::string format_duration(double seconds);

}  // namespace sinkscope
