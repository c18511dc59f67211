// Exact reversal counting of one anchor by ranks (spec 3, 10.f; reversal.cpp): the counts of
// count_anchor (reversal_kernels.hpp) in O(m log m + W) per anchor instead of O(m^2), m the
// candidates and W the candidate pairs whose distances lie within 2e-12 of each other.
//
// For an anchor, a comparison of matrices u and v counts over the unordered candidate pairs
// {b, c}: compared, neither verdict a tie; disagree, the two verdicts opposite. The 10.f tie
// rule is relative and not transitive, so ranks alone cannot classify ties; they classify every
// other pair, and the ties are few and found by their own scan:
//   * A pair with a non-finite distance under u or v is a tie (diff and tol are inf or NaN in
//     triple_verdict, so neither verdict holds): only the F candidates finite under both count.
//   * A pair that is no tie has the verdict sign(x_b - x_c) (diff > tol >= 0 needs x_b > x_c),
//     so it disagrees exactly when it is discordant: in the order of u (values ascending, equal
//     values by index, -0 before +0) its v values decrease strictly. Discordant pairs are
//     counted over F with a Fenwick tree of the positions in v's order, as in Kendall's tau. A
//     pair of equal values has an arbitrary order there: it is a tie, and the correction below
//     counts it the same way.
//   * The tie pairs T_u of each matrix are enumerated from its sorted values: for y_i <= y_j, the
//     pairs with y_j within 2 kTieRelTol max(|y_i|, |y_j|) of y_i (a window that ends where the
//     scan stops, see RankedAnchor::prepare), each checked with triple_verdict itself.
// Then, with T = (T_u | T_v) restricted to F,
//     compared = |F| (|F| - 1) / 2 - |T|,   disagree = discordant(F) - discordant(T).
// A matrix whose tie scan exceeds its budget (many equal distances: identical heads) makes
// count() return false without counting anything, and the caller counts that anchor with
// count_anchor instead, so the worst case stays the pair loop's O(m^2).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "metrics/reversal_kernels.hpp"

namespace sinkscope::metrics::kernels {

// Tie-scan budget a matrix and anchor: the window scan examines at most this many candidate
// pairs (besides the one per candidate that ends its window) before count() gives up.
constexpr int64_t default_tie_scan_budget(int64_t m) {
    return 4 * m + 64;
}

class RankedAnchor {
public:
    // Adds to compared[q] and disagree[q] what count_anchor would add for the anchor `rows`
    // (rows.n_used matrices, rows.m candidates; the padding past m is not read) and returns
    // true; returns false, having added nothing, when some matrix's tie scan needs more than
    // `tie_scan_budget` pairs.
    bool count(const AnchorRows& rows, const std::array<int, 2>* slots, int64_t n_slots,
               int64_t* compared, int64_t* disagree, int64_t tie_scan_budget);

private:
    struct Matrix {
        std::vector<uint32_t> order;  // the finite candidates by ascending value
        std::vector<uint32_t> rank;   // 1 + position in `order`; 0 = not finite
        std::vector<uint64_t> ties;   // tie pairs (lo << 32 | hi), ascending
    };
    bool prepare(const double* x, int64_t m, int64_t budget, Matrix& out);
    void sort_finite(const double* x, int64_t m, std::vector<uint32_t>& order);

    std::vector<Matrix> matrices_;
    std::vector<int32_t> fenwick_;
    std::vector<uint64_t> merged_;
    std::vector<uint64_t> keys_, key_tmp_;
    std::vector<uint32_t> order_tmp_;
};

}  // namespace sinkscope::metrics::kernels
