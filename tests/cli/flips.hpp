// Reversal counts recomputed independently in the CLI tests (spec 3, 10.f, 10.g), from distance
// matrices the tests read back or compute themselves.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

namespace sinkscope::testutil {

// The verdict sign(D(a,b) - D(a,c)), 0 for a tie (10.f: |difference| <= 1e-12 relative).
inline int verdict(double ab, double ac) {
    if (std::abs(ab - ac) <= 1e-12 * std::max(std::abs(ab), std::abs(ac))) return 0;
    return ab > ac ? 1 : -1;
}

// Keep-vs-drop disagreements over the triples (a; {b, c}) of heads [first, first + m), a not in
// {b, c}, of the distances keep(i, j) and drop(i, j); triples with a tie in either are skipped.
// Returns {compared, disagree}.
template <class Keep, class Drop>
std::pair<int64_t, int64_t> count_flips(const Keep& keep, const Drop& drop, int64_t first,
                                        int64_t m) {
    int64_t compared = 0, disagree = 0;
    for (int64_t a = first; a < first + m; ++a)
        for (int64_t b = first; b < first + m; ++b)
            for (int64_t c = b + 1; c < first + m; ++c) {
                if (a == b || a == c) continue;
                const int vk = verdict(keep(a, b), keep(a, c));
                const int vd = verdict(drop(a, b), drop(a, c));
                if (vk == 0 || vd == 0) continue;
                ++compared;
                disagree += vk != vd;
            }
    return {compared, disagree};
}

}  // namespace sinkscope::testutil
