// Facts about this process for run records: version, peak memory, wall clock.
#pragma once

#include <cstdint>
#include <string>

namespace sinkscope {

std::string version_string();  // e.g. "0.1.0"
std::string git_commit();      // commit the binary was configured from, or "unknown"
int64_t peak_rss_bytes();      // maximum resident set size so far
std::string utc_timestamp();   // ISO 8601, seconds

}  // namespace sinkscope
