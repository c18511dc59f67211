// The allocator policy of a whole process, decided once by its front end (issue 19): the CLI's
// main and the forward benchmark call it before anything else.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace sinkscope {

// A forward allocates and frees the same temporaries in every layer (a layer's [T, d_mlp]
// activations, q/k/v, the attention's blocks: up to tens of MiB each at T = 2048). glibc's
// default serves some of them with fresh mappings and unmaps them again when freed, so every
// layer faults their pages in anew (at T = 4096 that was 39% of the CPU time). Fixed at glibc's
// largest mmap threshold (32 MiB on 64-bit), they come from the heap and are reused in place; the
// heap's free top is returned to the system only beyond 256 MiB. Buffers above 32 MiB (captured
// attention, logits, the fp64 hand-over) are still mapped and return to the system when freed.
// No effect outside glibc.
inline void set_allocator_policy() {
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

// The run-time policy of the commands that run a model or the metric suite (the list is
// apps/policy_commands.hpp), set through three environment variables that libraries read only
// when they are loaded:
// * How the idle threads of the process's two thread pools wait: libtorch's OpenMP team
//   (libgomp) and OpenBLAS's own pthreads. By default each pool's idle threads keep a core busy
//   for a while after their work (libgomp spins; OpenBLAS calls sched_yield for 2^28 cycles),
//   and a forward alternates between the pools every few milliseconds, so on a machine with as
//   many cores as threads each pool's waiting takes the cores the other pool's work needs. Idle
//   threads that sleep at once (OMP_WAIT_POLICY=PASSIVE; OPENBLAS_THREAD_TIMEOUT=4, its minimum,
//   2^4 cycles) made a 512-token analyze on 2 cores 7.0 -> 5.9 s (bench/README.md).
// * Transparent huge pages for malloc's memory (GLIBC_TUNABLES=glibc.malloc.hugetlb=1, glibc
//   2.35+): malloc asks the kernel for 2 MiB pages (madvise) for its heap and its large
//   mappings, so the forward's activations and captured attention (hundreds of MB, written
//   once) fault in 512 times less often. Where the kernel's transparent huge pages are "madvise"
//   (the usual default) this made a 512-token analyze 6.5 -> 5.2 s (bench/README.md); where
//   they are "never", or glibc is older, the setting does nothing.
//
// glibc resets the environment to the one the process was started with after its executable's
// preinit functions, and reads its tunables before them, so none of these can be set from
// within: they have to be in the environment the process starts with.
// * `sinkscope` (apps/launcher.cpp) is a small program without libtorch that starts
//   sinkscope-main (or, for metrics, sinkscope-lite) beside it with the environment plus what it
//   lacks (for the commands of that list), at no measurable cost.
// * sinkscope-main itself (started directly, or bench/forward_time) runs
//   restart_with_runtime_policy from its .preinit_array (before any library is initialised):
//   when the environment lacks any of the variables, the executable is started again in place
//   (execve of /proc/self/exe, same arguments and process id) with what it lacked. That costs a
//   second loading of its ~290 shared libraries (libtorch's dependencies): 0.3 s of a 0.85 s
//   start on the machine of bench/README.md.
// A value the user set is kept (a GLIBC_TUNABLES of the user's own is kept whole); setting all
// three yourself skips the restart. Where the restart fails (no /proc), the process goes on with
// the libraries' defaults.
//
// The policy's entries, "NAME=VALUE" (run.json records each NAME's value: io/run_record.cpp).
inline constexpr const char* kRuntimePolicy[] = {"OMP_WAIT_POLICY=PASSIVE",
                                                 "OPENBLAS_THREAD_TIMEOUT=4",
                                                 "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"};
inline constexpr size_t kRuntimePolicySize = sizeof(kRuntimePolicy) / sizeof(kRuntimePolicy[0]);

// Runs before the C library is initialised: plain code only, no allocation.
// `env` has room for every entry of envp, kRuntimePolicySize more and the terminating null; it
// receives envp plus the policy's entries that envp lacks. Returns how many were added.
inline size_t add_runtime_policy(char** envp, char** env) {
    const auto has = [envp](const char* entry) {
        const size_t n = __builtin_strchr(entry, '=') - entry + 1;  // "NAME="
        for (char** e = envp; *e; ++e)
            if (__builtin_strncmp(*e, entry, n) == 0) return true;
        return false;
    };
    size_t n = 0;
    for (; envp[n]; ++n) env[n] = envp[n];
    const size_t started = n;
    for (const char* entry : kRuntimePolicy)
        if (!has(entry)) env[n++] = const_cast<char*>(entry);  // execve never writes it
    env[n] = nullptr;
    return n - started;
}

inline size_t environment_size(char** envp) {
    size_t n = 0;
    while (envp[n]) ++n;
    return n;
}

inline void restart_with_runtime_policy(char** argv, char** envp) {
    auto** env = static_cast<char**>(  // the stack only: nothing is initialised yet
        __builtin_alloca((environment_size(envp) + kRuntimePolicySize + 1) * sizeof(char*)));
    if (add_runtime_policy(envp, env) == 0) return;
    ::execve("/proc/self/exe", argv, env);  // returns only on failure: go on as started
}

// Returns the free pages of every heap to the system (glibc's malloc_trim). Under the policy
// above, buffers below 32 MiB that are freed stay mapped when other blocks sit above them in the
// heap: a long input's per-layer hidden states and values (25 MiB each at T = 4096 on a 768-wide
// model) stayed resident, 0.55 GB of them, through every later analysis. Called where a phase
// has released large buffers of a long input, not per allocation nor per short input (the
// pages fault in again when reused).
inline void return_free_memory() {
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}

// Large buffers written once, page by page (captured attention: 12.6 MB per layer and hook at
// T = 512 on a 12-head model, 200 MB at T = 2048; its fp64 copy twice that): transparent huge
// pages cut their page faults 512-fold, and the kernel's default "madvise" mode grants them only
// on request. A hint, without effect where unsupported. Only buffers of at least the mmap
// threshold above (32 MiB) are advised: they are mappings of their own, so the advice ends with
// them instead of marking the shared heap. Call it before the first write: pages already
// touched stay small.
inline void advise_huge_pages(const void* data, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    constexpr uintptr_t kHuge = uintptr_t(2) << 20;
    if (bytes < (size_t(32) << 20)) return;
    const auto start = reinterpret_cast<uintptr_t>(data);
    const uintptr_t begin = (start + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t end = (start + bytes) & ~(kHuge - 1);
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
    (void)data;
    (void)bytes;
#endif
}

// Faults in the pages of [data, data + bytes) for writing, split among `threads` threads. The
// kernel zero-fills every fresh page on its first write; done here, that zero-filling runs on
// every thread instead of on the one thread that first writes the buffer. Linux 5.14+
// (MADV_POPULATE_WRITE); elsewhere, or below 8 MiB or 2 threads, it does nothing.
inline void populate_pages(const void* data, size_t bytes, int threads) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
    if (threads < 2 || bytes < (size_t(8) << 20)) return;
    const size_t page = 4096;
    const auto start = (reinterpret_cast<uintptr_t>(data) + page - 1) & ~uintptr_t(page - 1);
    const auto end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~uintptr_t(page - 1);
    if (end <= start) return;
    const size_t pages = (end - start) / page;
    const size_t per = (pages + threads - 1) / threads;
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) {
        const size_t a = std::min(pages, i * per), b = std::min(pages, (i + 1) * per);
        if (a == b) break;
        pool.emplace_back([p = start + a * page, len = (b - a) * page] {
            ::madvise(reinterpret_cast<void*>(p), len, MADV_POPULATE_WRITE);
        });
    }
    for (auto& t : pool) t.join();
#else
    (void)data;
    (void)bytes;
    (void)threads;
#endif
}

// Makes v hold n elements for the caller to overwrite, every one of them: a buffer too small is
// replaced by one on huge pages (advised before its first write, then zero-filled), one large
// enough is reused as it is.
template <class T>
void size_for_overwrite(std::vector<T>& v, size_t n, int threads = 1) {
    if (v.capacity() < n) {
        std::vector<T> fresh;
        fresh.reserve(n);
        advise_huge_pages(fresh.data(), n * sizeof(T));
        populate_pages(fresh.data(), n * sizeof(T), threads);
        v.swap(fresh);
    }
    v.resize(n);
}

}  // namespace sinkscope
