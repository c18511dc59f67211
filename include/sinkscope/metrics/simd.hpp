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

// Absolute error of the AVX-512 logarithm beyond 4 ulp of its result (src/metrics/
// pair_kernels.cpp): its polynomial's, <= 2.86e-15 on its range, plus the roundings that are
// relative to ln c_i, 1/c_i and ln m < ln 2 instead of to the result, <= 2^-54 (0.68 + 2.06 +
// 2 ln 2) = 2.3e-16 (scripts/kernel_log_fit.py checks the sum).
inline constexpr double kLogAbsoluteError = 3.1e-15;

// out[i] = ln x[i], i < n, by the logarithm of the head-distance kernels on the active target
// (for their tests): for positive normal x within 4 ulp + kLogAbsoluteError on every target
// (Highway's Log, 4 ulp, where the table logarithm is not used). n must be a multiple of 32.
void kernel_log(const double* x, int64_t n, double* out);

}  // namespace sinkscope::metrics::simd
