// Process facts for provenance records (spec section 9).
#include "sinkscope/core/system.hpp"

#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>

#include "sinkscope/core/error.hpp"

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

int64_t available_memory_bytes() {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    int64_t kib = 0;
    std::string unit;
    while (meminfo >> key >> kib >> unit)
        if (key == "MemAvailable:") return kib * 1024;
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? int64_t(pages) * int64_t(page) : 0;
}

std::string utc_timestamp() {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

int64_t max_threads() {
    const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
    return kThreadsPerCore * cores;
}

void check_threads(int64_t n, const char* option) {
    if (n < 0) throw UsageError(std::string(option) + " must be >= 0 (0 = all cores)");
    if (n > max_threads())
        throw UsageError(std::string(option) + " " + std::to_string(n) + " is more than " +
                         std::to_string(kThreadsPerCore) + " x the " +
                         std::to_string(max_threads() / kThreadsPerCore) +
                         " cores of this machine (" + std::to_string(max_threads()) + ")");
}

namespace {
// Through a getter and setter looked up at run time (absent: 0, nothing done).
int set_threads_through(const char* getter, const char* setter, int n) {
    using Get = int (*)();
    using Set = void (*)(int);
    auto* get = reinterpret_cast<Get>(dlsym(RTLD_DEFAULT, getter));
    auto* set = reinterpret_cast<Set>(dlsym(RTLD_DEFAULT, setter));
    if (!get || !set) return 0;
    const int before = get();
    if (before != n) set(n);
    return before;
}
}  // namespace

int set_blas_threads(int n) {
    return set_threads_through("openblas_get_num_threads", "openblas_set_num_threads", n);
}

int set_openmp_threads_of_this_thread(int n) {
    return set_threads_through("omp_get_max_threads", "omp_set_num_threads", n);
}

}  // namespace sinkscope
