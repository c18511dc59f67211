// The allocator policy of a whole process, decided once by its front end (issue 19): the CLI's
// main and the forward benchmark call it before anything else.
#pragma once

#if defined(__GLIBC__)
#include <malloc.h>
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

}  // namespace sinkscope
