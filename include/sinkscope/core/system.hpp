// Facts about this process for run records: version, peak memory, wall clock.
#pragma once

#include <cstdint>
#include <string>

namespace sinkscope {

std::string version_string();  // e.g. "0.1.0"
std::string git_commit();      // commit the binary was configured from, or "unknown"
int64_t peak_rss_bytes();      // maximum resident set size so far
std::string utc_timestamp();   // ISO 8601, seconds

// Thread options: at most 4 threads per core of this machine (more only costs; a huge count
// would make the thread pools take minutes or memory to start). 0 means all cores.
inline constexpr int64_t kThreadsPerCore = 4;
int64_t max_threads();
// UsageError naming `option` when `n` is negative or above max_threads().
void check_threads(int64_t n, const char* option = "--threads");

}  // namespace sinkscope
