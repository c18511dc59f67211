// SIMD targets of the vectorised metric kernels (Google Highway run-time dispatch): which ones
// this build compiled and the CPU runs, which one is in use, and, for tests and benchmarks,
// restricting dispatch to one of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sinkscope::metrics::simd {

struct Target {
    int64_t bits = 0;  // Highway's HWY_* target bit
    std::string name;  // "AVX3" (AVX-512), "AVX2", "SSE4", "SSSE3", "SCALAR", ...
};

// Compiled into this build and supported by this CPU, best first.
std::vector<Target> available_targets();
// The target the kernels dispatch to now.
Target active_target();
// Restricts dispatch to `bits` (one of available_targets()) until called with 0, which restores
// the CPU's best. Not thread-safe: call it while no kernel runs (tests, benchmarks).
void force_target(int64_t bits);

}  // namespace sinkscope::metrics::simd
