// Vectorised verdict counting of the exact reversal rates (spec 3, 10.f; reversal.cpp): for one
// anchor a, every candidate pair {b, c} of the other heads under every comparison of two distance
// matrices. Compiled for every SIMD target Google Highway has on the CPU family and dispatched at
// run time to the best one the CPU runs (like pair_kernels.hpp).
//
// Per candidate b, each matrix's verdicts on (b, c) for the c after b are two bit sets, 64 c to a
// word: bit c of `gt` where D(a,b) - D(a,c) > tol, of `lt` where it is < -tol, with
// tol = kTieRelTol max(|D(a,b)|, |D(a,c)|), the arithmetic of triple_verdict (a NaN on either side
// sets neither bit: a tie). A comparison of matrices u and v then counts, a word at a time,
//   compared  += popcount((gt_u | lt_u) & (gt_v | lt_v))   neither verdict a tie,
//   disagree  += popcount((gt_u & lt_v) | (lt_u & gt_v))   opposite verdicts,
// which is what the product of the two verdict codes (+1, 0, -1) counted before: 0 (a tie), +1
// or -1. The vector comparisons write 8 (AVX-512) verdicts of a matrix in a step, and a word of
// 64 in 8 steps, where the int8 codes took a widening of each comparison's mask.
#pragma once

#include <array>
#include <cstdint>

namespace sinkscope::metrics::kernels {

inline constexpr int64_t kVerdictWord = 64;  // verdicts a word, and the rows' padding unit

// The anchor's rows: x[u * stride + c] = D_u(a, c-th other head) for c < m, NaN for
// m <= c < stride, stride a multiple of kVerdictWord.
struct AnchorRows {
    const double* x = nullptr;
    int64_t stride = 0, m = 0, n_used = 0;
};

// For every candidate b and every comparison q (matrices slots[q][0], slots[q][1] of the rows),
// adds the counts above over c in (b, m) to compared[q] and disagree[q]. `words` is scratch of
// 2 * n_used * stride / kVerdictWord words.
void count_anchor(const AnchorRows& rows, const std::array<int, 2>* slots, int64_t n_slots,
                  uint64_t* words, int64_t* compared, int64_t* disagree);

}  // namespace sinkscope::metrics::kernels
