// A seeded random stream that gives the same numbers on every platform and standard library
// (std::uniform_int_distribution does not): xoshiro256** (Blackman & Vigna 2018) seeded through
// splitmix64, with Lemire's unbiased bounded draw. Used wherever a seed must reproduce a result
// exactly: the bootstrap (metrics/statistics.hpp) and random subsets of the inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sinkscope {

// splitmix64 (Steele, Lea & Flood 2014; Vigna's reference constants): advances `state` and
// returns its next output. Seeds Xoshiro256, and drives `metrics --example`.
uint64_t splitmix64(uint64_t& state);

class Xoshiro256 {
public:
    // The 256-bit state is filled by four outputs of splitmix64(seed).
    explicit Xoshiro256(uint64_t seed);
    uint64_t next();
    // Uniform integer in [0, bound), bound >= 1, unbiased (Lemire 2019, "Fast random integer
    // generation in an interval", with the 64 x 64 -> 128-bit product done in 32-bit halves).
    uint64_t below(uint64_t bound);

private:
    uint64_t s_[4];
};

// k distinct indices of [0, n) drawn uniformly with `seed` (partial Fisher-Yates over
// Xoshiro256), returned in increasing order; k >= n returns every index.
std::vector<size_t> sample_indices(size_t n, size_t k, uint64_t seed);

}  // namespace sinkscope
