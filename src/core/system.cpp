// Process facts for provenance records (spec section 9).
#include "sinkscope/core/system.hpp"

#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"

#ifndef SINKSCOPE_VERSION
#define SINKSCOPE_VERSION "0.0.0"
#endif
#ifndef SINKSCOPE_GIT_COMMIT
#define SINKSCOPE_GIT_COMMIT "unknown"
#endif

namespace sinkscope {

std::string version_string() {
    return SINKSCOPE_VERSION;
}
std::string git_commit() {
    return SINKSCOPE_GIT_COMMIT;
}

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

namespace {

// SINKSCOPE_MEMORY_LIMIT: digits, then at most one of K, M, G, T (powers of 1024), nothing else.
int64_t parse_memory_limit(const std::string& text) {
    const auto bad = [&] {
        return UsageError(
            "SINKSCOPE_MEMORY_LIMIT must be a number of bytes with an optional K, M, "
            "G or T suffix (e.g. 16G), got " +
            quote(text));
    };
    size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == 0 || digits > 15 || text.size() > digits + 1) throw bad();
    int shift = 0;
    if (text.size() == digits + 1) {
        const std::string units = "KMGT";
        const size_t u = units.find(static_cast<char>(std::toupper(text.back())));
        if (u == std::string::npos) throw bad();
        shift = 10 * static_cast<int>(u + 1);
    }
    const int64_t value = std::stoll(text.substr(0, digits));  // < 10^15 < 2^50
    if (value == 0 || value > (int64_t{1} << (62 - shift))) throw bad();
    return value << shift;
}

}  // namespace

int64_t memory_budget_bytes(std::string* source) {
    const int64_t available = available_memory_bytes();
    const char* env = std::getenv("SINKSCOPE_MEMORY_LIMIT");
    const int64_t limit = env && *env ? parse_memory_limit(env) : 0;
    const bool use_limit = limit > 0 && (available <= 0 || limit < available);
    if (source) *source = use_limit ? "SINKSCOPE_MEMORY_LIMIT" : "MemAvailable";
    return use_limit ? limit : available;
}

std::string format_bytes(double bytes) {
    const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (u < 4 && bytes >= 1024.0) {
        bytes /= 1024.0;
        ++u;
    }
    char buf[48];
    if (u == 0)
        std::snprintf(buf, sizeof buf, "%.0f bytes", bytes);
    else
        std::snprintf(buf, sizeof buf, "%.1f %s", bytes, units[u]);
    return buf;
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
