// A small seeded random generator that gives the same numbers on every platform and standard
// library (std::uniform_int_distribution does not): splitmix64 (Steele, Lea, Flood 2014) and an
// unbiased bounded draw by rejection (Lemire 2019, "Fast random integer generation in an
// interval"). Used where a seed must reproduce a result exactly: sample subsets, the bootstrap.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace sinkscope {

class SplitMix64 {
  public:
    explicit SplitMix64(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // Uniform on [0, bound), bound >= 1, without modulo bias.
    uint64_t below(uint64_t bound) {
        unsigned __int128 m = static_cast<unsigned __int128>(next()) * bound;
        uint64_t low = static_cast<uint64_t>(m);
        if (low < bound) {
            const uint64_t threshold = (0 - bound) % bound;
            while (low < threshold) {
                m = static_cast<unsigned __int128>(next()) * bound;
                low = static_cast<uint64_t>(m);
            }
        }
        return static_cast<uint64_t>(m >> 64);
    }

  private:
    uint64_t state_;
};

// k distinct indices of [0, n) drawn uniformly with `seed` (partial Fisher-Yates), returned in
// increasing order; k >= n returns every index.
inline std::vector<size_t> sample_indices(size_t n, size_t k, uint64_t seed) {
    std::vector<size_t> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = i;
    if (k >= n) return all;
    SplitMix64 rng(seed);
    for (size_t i = 0; i < k; ++i) {
        const size_t j = i + static_cast<size_t>(rng.below(n - i));
        std::swap(all[i], all[j]);
    }
    all.resize(k);
    std::sort(all.begin(), all.end());
    return all;
}

}  // namespace sinkscope
