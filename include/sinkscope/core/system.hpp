// Facts about this process for run records: version, peak memory, wall clock.
#pragma once

#include <cstdint>
#include <string>

namespace sinkscope {

std::string version_string();  // e.g. "0.1.0"
std::string git_commit();      // commit the binary was configured from, or "unknown"
int64_t peak_rss_bytes();      // maximum resident set size so far
// Memory a new allocation can still get on this machine (Linux /proc/meminfo MemAvailable, or
// the free physical pages); 0 when it cannot be told.
int64_t available_memory_bytes();
// The memory sinkscope plans with before it loads a model or trains: available_memory_bytes(),
// or the environment variable SINKSCOPE_MEMORY_LIMIT when it is set and smaller (bytes, with an
// optional K, M, G or T suffix for powers of 1024; for machines shared with other work, and for
// cgroup limits that MemAvailable does not show). 0 when neither tells. `source`, when given,
// receives where the figure came from ("MemAvailable" or "SINKSCOPE_MEMORY_LIMIT").
// UsageError when the variable is set but is not such a size.
int64_t memory_budget_bytes(std::string* source = nullptr);
// "12.8 GiB" / "512.0 MiB" / "4.0 KiB" / "17 bytes": a size for one-line messages and tables.
std::string format_bytes(double bytes);
std::string utc_timestamp();  // ISO 8601, seconds

// Thread options: at most 4 threads per core of this machine (more only costs; a huge count
// would make the thread pools take minutes or memory to start). 0 means all cores.
inline constexpr int64_t kThreadsPerCore = 4;
int64_t max_threads();
// UsageError naming `option` when `n` is negative or above max_threads().
void check_threads(int64_t n, const char* option = "--threads");

// Threads of the system BLAS's own pool (OpenBLAS, looked up at run time so that the build does
// not depend on which BLAS is installed). Returns the count before, or 0 (and does nothing) when
// the BLAS has no such setting.
int set_blas_threads(int n);

// OpenMP threads of the calling thread only (OpenMP keeps this setting per thread): the
// libtorch CPU operators this thread calls split their work over that many. Returns the count
// before, or 0 (and does nothing) when no OpenMP runtime is loaded.
int set_openmp_threads_of_this_thread(int n);

// One thread for a scope, then as before, through one of the setters above.
// SingleThreadedBlas: the analyses split their work over their own threads; a BLAS pool under
// them only spins, and OpenBLAS's split of a product depends on its thread count, so the last
// bits of a result would depend on the machine's cores.
// SingleThreadedOpenMp: worker threads of the analyses that call libtorch operators (recomputed
// attention rows) would each start an OpenMP team as wide as the machine and compete for its
// cores.
template <int (*Set)(int)>
class SingleThreaded {
public:
    SingleThreaded() : before_(Set(1)) {}
    ~SingleThreaded() {
        if (before_ > 0) Set(before_);
    }
    SingleThreaded(const SingleThreaded&) = delete;
    SingleThreaded& operator=(const SingleThreaded&) = delete;

private:
    int before_;
};
using SingleThreadedBlas = SingleThreaded<set_blas_threads>;
using SingleThreadedOpenMp = SingleThreaded<set_openmp_threads_of_this_thread>;

}  // namespace sinkscope
