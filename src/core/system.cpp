// Process facts for provenance records (spec section 9).
#include "sinkscope/core/system.hpp"

#include <sys/resource.h>

#include <ctime>

#ifndef SINKSCOPE_VERSION
#define SINKSCOPE_VERSION "0.0.0"
#endif
#ifndef SINKSCOPE_GIT_COMMIT
#define SINKSCOPE_GIT_COMMIT "unknown"
#endif

namespace sinkscope {

std::string version_string() { return SINKSCOPE_VERSION; }
std::string git_commit() { return SINKSCOPE_GIT_COMMIT; }

int64_t peak_rss_bytes() {
    struct rusage usage {};
    if (getrusage(RUSAGE_SELF, &usage) != 0) return -1;
    return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

std::string utc_timestamp() {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

}  // namespace sinkscope
