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
