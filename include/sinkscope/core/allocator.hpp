// The allocator policy of a whole process, decided once by its front end (issue 19): the CLI's
// main and the forward benchmark call it before anything else.
#pragma once

#include <cstddef>
#include <cstdint>
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

// How the idle threads of the process's two thread pools wait: libtorch's OpenMP team (libgomp)
// and OpenBLAS's own pthreads. By default each pool's idle threads keep a core busy for a while
// after their work (libgomp spins; OpenBLAS calls sched_yield for 2^28 cycles), and a forward
// alternates between the pools every few milliseconds, so on a machine with as many cores as
// threads each pool's waiting takes the cores the other pool's work needs. Idle threads that
// sleep at once (OMP_WAIT_POLICY=PASSIVE; OPENBLAS_THREAD_TIMEOUT=4, its minimum, 2^4 cycles)
// made a 512-token analyze on 2 cores 7.0 -> 5.9 s (bench/README.md).
//
// Both libraries read these variables once, when they are loaded, before main, and glibc resets
// the environment to the one the process was started with after its executable's preinit
// functions, so they cannot be set from within. The front end's executable runs this from its
// .preinit_array (before any library is initialised) for the commands that run a model: when
// the environment lacks either variable, the executable is started again in place (execve of
// /proc/self/exe, same arguments and process id) with the environment plus what it lacked. The
// restart costs a second loading of the shared libraries (0.23 s of a 0.6 s start on the
// machine of bench/README.md). A value the user set is kept; setting both yourself skips the
// restart. Where the restart fails (no /proc), the process goes on with the libraries' defaults.
inline void exec_with_thread_wait_policy(char** argv, char** envp) {
    static char omp[] = "OMP_WAIT_POLICY=PASSIVE";
    static char blas[] = "OPENBLAS_THREAD_TIMEOUT=4";
    const auto has = [envp](const char* entry) {
        const size_t n = __builtin_strchr(entry, '=') - entry + 1;  // "NAME="
        for (char** e = envp; *e; ++e)
            if (__builtin_strncmp(*e, entry, n) == 0) return true;
        return false;
    };
    const bool has_omp = has(omp), has_blas = has(blas);
    if (has_omp && has_blas) return;
    size_t n = 0;
    while (envp[n]) ++n;
    // Nothing is initialised yet (not even the C library): no allocation, the stack only.
    auto** env = static_cast<char**>(__builtin_alloca((n + 3) * sizeof(char*)));
    for (size_t i = 0; i < n; ++i) env[i] = envp[i];
    if (!has_omp) env[n++] = omp;
    if (!has_blas) env[n++] = blas;
    env[n] = nullptr;
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

// Makes v hold n elements for the caller to overwrite, every one of them: a buffer too small is
// replaced by one on huge pages (advised before its first write, then zero-filled), one large
// enough is reused as it is.
template <class T>
void size_for_overwrite(std::vector<T>& v, size_t n) {
    if (v.capacity() < n) {
        std::vector<T> fresh;
        fresh.reserve(n);
        advise_huge_pages(fresh.data(), n * sizeof(T));
        v.swap(fresh);
    }
    v.resize(n);
}

}  // namespace sinkscope
