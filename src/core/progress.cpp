// Progress line implementation.
#include "sinkscope/core/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace sinkscope {

Progress::Progress(std::string label, int64_t total, Mode mode)
    : label_(std::move(label)),
      total_(total),
      enabled_(mode == Mode::Always || (mode == Mode::Auto && ::isatty(STDERR_FILENO))),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_ - std::chrono::seconds(1)) {}

Progress::~Progress() {
    if (!finished_) finish();
}

std::string format_duration(double seconds) {
    if (!(seconds >= 0) || seconds > 1e8) return "?";
    auto s = static_cast<long long>(seconds + 0.5);
    char buf[32];
    if (s >= 3600)
        std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, (s % 3600) / 60);
    else if (s >= 60)
        std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
    else
        std::snprintf(buf, sizeof buf, "%llds", s);
    return buf;
}

void Progress::update(int64_t done, int64_t tokens) {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = done;
    tokens_ = tokens;
    stage_.clear();
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_draw_ < std::chrono::milliseconds(200) && done != total_) return;
    draw(now);
}

void Progress::stage(const char* name, int64_t done, int64_t total) {
    if (!enabled_) return;
    std::lock_guard<std::mutex> lock(mutex_);
    const double pct = total > 0 ? 100.0 * double(done) / double(total) : 0.0;
    char buf[96];
    if (total > 1)
        std::snprintf(buf, sizeof buf, "%s %.0f%%", name, pct);
    else
        std::snprintf(buf, sizeof buf, "%s", name);  // a step without parts (forward)
    stage_ = buf;
    auto now = std::chrono::steady_clock::now();
    if (now - last_draw_ < std::chrono::milliseconds(200) && done != total) return;
    draw(now);
}

StageProgress Progress::stage_reporter() {
    if (!enabled_) return {};
    return [this](const char* name, int64_t done, int64_t total) { stage(name, done, total); };
}

void Progress::draw(std::chrono::steady_clock::time_point now) {
    last_draw_ = now;
    double elapsed = std::chrono::duration<double>(now - start_).count();
    double tps = elapsed > 0 ? static_cast<double>(tokens_) / elapsed : 0.0;
    std::string eta = "?";
    if (total_ > 0 && done_ > 0)
        eta = format_duration(elapsed * double(total_ - done_) / double(done_));
    std::fprintf(stderr, "\r\033[K%s: %lld/%lld samples, %.0f tokens/s, ETA %s", label_.c_str(),
                 static_cast<long long>(done_), static_cast<long long>(total_), tps, eta.c_str());
    if (!stage_.empty())
        std::fprintf(stderr, " | sample %lld: %s, %s elapsed", static_cast<long long>(done_ + 1),
                     stage_.c_str(), format_duration(elapsed).c_str());
    std::fflush(stderr);
}

void Progress::finish() {
    if (finished_) return;
    finished_ = true;
    if (!enabled_) return;
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(stderr, "\r\033[K%s: %lld samples, %lld tokens in %s\n", label_.c_str(),
                 static_cast<long long>(done_), static_cast<long long>(tokens_),
                 format_duration(elapsed).c_str());
}

}  // namespace sinkscope
