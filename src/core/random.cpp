// The seeded random stream shared by the bootstrap and the sample subsets (random.hpp).
#include "sinkscope/core/random.hpp"

#include <algorithm>

#include "sinkscope/core/error.hpp"

namespace sinkscope {

namespace {

uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

// Full 64 x 64 -> 128-bit product in portable C++ (no __int128): returns the high word, `lo`
// receives the low word.
uint64_t mul_hi_lo(uint64_t a, uint64_t b, uint64_t& lo) {
    const uint64_t a_lo = a & 0xffffffffULL, a_hi = a >> 32;
    const uint64_t b_lo = b & 0xffffffffULL, b_hi = b >> 32;
    const uint64_t ll = a_lo * b_lo, lh = a_lo * b_hi, hl = a_hi * b_lo, hh = a_hi * b_hi;
    const uint64_t mid = (ll >> 32) + (lh & 0xffffffffULL) + (hl & 0xffffffffULL);
    lo = (mid << 32) | (ll & 0xffffffffULL);
    return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}

}  // namespace

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

Xoshiro256::Xoshiro256(uint64_t seed) {
    for (uint64_t& s : s_) s = splitmix64(seed);
}

// xoshiro256** 1.0 (Blackman & Vigna, reference implementation xoshiro256starstar.c).
uint64_t Xoshiro256::next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

// Lemire's method: x * bound / 2^64 for a uniform 64-bit x is in [0, bound); the low word of the
// product tells when x falls in the 2^64 mod bound values that would over-represent some
// results, and those draws are rejected, so every result has exactly floor(2^64 / bound) x's.
uint64_t Xoshiro256::below(uint64_t bound) {
    SS_CHECK(bound >= 1, "random integer below 0");
    uint64_t lo = 0;
    uint64_t hi = mul_hi_lo(next(), bound, lo);
    if (lo < bound) {
        const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
        while (lo < threshold) hi = mul_hi_lo(next(), bound, lo);
    }
    return hi;
}

std::vector<size_t> sample_indices(size_t n, size_t k, uint64_t seed) {
    std::vector<size_t> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = i;
    if (k >= n) return all;
    Xoshiro256 rng(seed);
    for (size_t i = 0; i < k; ++i) {
        const size_t j = i + static_cast<size_t>(rng.below(n - i));
        std::swap(all[i], all[j]);
    }
    all.resize(k);
    std::sort(all.begin(), all.end());
    return all;
}

}  // namespace sinkscope
