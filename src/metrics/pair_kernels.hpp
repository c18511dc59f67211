// Vectorised pair kernels of the head accumulator (spec/METRICS.md section 2): the classical
// distances (cosine, Jensen-Shannon, Euclidean) of every pair of heads over a batch of row sets,
// and the sums of squared Aitchison distances of a chunk of row sets. Compiled for every SIMD
// target Google Highway has on the CPU family (x86: AVX-512, AVX2, SSE4, SSSE3, scalar) and
// dispatched at run time to the best one the CPU runs (sinkscope/metrics/simd.hpp names it).
//
// Squared Aitchison distances summed over many rows come from a Gram matrix of the rows'
// CLR vectors centred over the heads (one matrix product per chunk): s = G_aa + G_bb - 2 G_ab.
// Error bound (Higham 3.1; u = 2^-53, gamma_k = k u / (1 - k u)): with c_a the centred rows as
// stored (each element rounded once, relative u), any GEMM gives
// |G_ab - c_a . c_b| <= gamma_k ||c_a|| ||c_b||, and with N = G_aa + G_bb
//     |s_computed - s| <= alpha N + 2 u s,   alpha = 2 gamma_k + 5 u,
// where s = ||x_a - x_b||^2 of the uncentred rows x (the centring's rounding enters through
// 2 ||x_a - x_b|| u (||c_a|| + ||c_b||) <= u s + 2 u N). A pair whose Gram value is
// s_computed <= tau N (cancellation would hurt) is recomputed from the uncentred rows as
// sum_j (x_aj - x_bj)^2 (relative error <= gamma_{k+2}); every other pair has
//     |s_computed - s| / s <= alpha (1 + 2 u) / (tau - alpha) + 2 u,
// with tau = 1/16: <= 33 alpha ~ 4.7e-13 for k = 128 parts and ~1.5e-11 for k = 4096 (half of
// that on the distance sqrt(s)). Identical rows therefore give exactly 0, near-duplicates their
// distance to that relative error instead of sqrt(gamma_k N) absolute.
//
// The classical metrics need one distance per row (a mean of square roots, not a root of a sum),
// and Jensen-Shannon a pass over every pair's parts anyway: the same pass takes the exact
// sum_j (x_aj - x_bj)^2 with two more vector operations per part (next to the ~35 of the
// logarithm's part), where the per-row Gram products it replaces took ~8% of BM_HeadDistances
// in the profile, and it needs no correction. That kernel keeps heads in the vector lanes
// (rows stored part-major), so a vector holds L pairs (a, b), ..., (a + L - 1, b): no horizontal
// sums, no padding of short rows, and every per-pair step vectorised.
#pragma once

#include <cstdint>

namespace sinkscope::metrics::kernels {

// Rows are padded: row r starts at x + r * stride, holds k values and then zeros up to
// padded(k) <= stride, so every SIMD width reads whole vectors of zeros past the end.
inline constexpr int64_t kPad = 32;  // doubles; >= the widest vector of any Highway target
constexpr int64_t padded(int64_t k) {
    return (k + kPad - 1) / kPad * kPad;
}
// max over s in (0, 2] of (|k ln2| + |ln c_i| + |ln(1 + r)|) - |ln s| for the AVX-512 split
// sums below (scripts/kernel_log_fit.py --check computes it).
inline constexpr double kSplitLogExcess = 1.39;
// Pairs with s_computed <= kRecomputeShare * (G_aa + G_bb) are recomputed (bound above).
inline constexpr double kRecomputeShare = 1.0 / 16.0;
// Column blocks of the pair loops: the unit of work handed to a thread; rows of one block stay
// in L1 while the rows below it stream past.
inline constexpr int64_t kPairBlock = 16;

struct Rows {
    const double* x = nullptr;  // [n, stride] row-major, zero-padded as above
    int64_t stride = 0;
    int64_t k = 0;
};

// Rows of heads stored part-major: part j of head a at x[j * ld + a], parts 0..k-1. Vectors
// of heads read up to kPad - 1 entries past the last head, so ld >= n + kPad (those lanes are
// computed and discarded).
struct PartMajor {
    const double* x = nullptr;
    int64_t ld = 0;
    int64_t k = 0;
};

// self[a] = A_aa / 4 = (1/4) sum_j 2 x_aj ln(2 x_aj) (0 ln 0 = 0) and norm[a] = |x_a| for heads
// a < n (self and norm hold n + kPad values), with the vectorised logarithm and summation order
// of classical_pairs, so identical rows get a Jensen-Shannon divergence of exactly 0.
void row_statistics(const PartMajor& rows, int64_t n, double* self, double* norm);

// One row set of the classical kernel.
struct ClassicalRows {
    PartMajor rows;                // probability rows (keep: p, drop: pi)
    const double* self = nullptr;  // [n + kPad] from row_statistics
    const double* norm = nullptr;  // [n + kPad] from row_statistics
};
// Per pair a > b with b in [b_begin, b_end) (at most kPairBlock columns), the distances of every
// row set in `sets`, summed and added once to the column-major [n, n] sums (leading dimension
// ld):
//   Euclidean sqrt(s), s = sum_j (x_aj - x_bj)^2;
//   cosine 1 - cos = (s - (|x_a| - |x_b|)^2) / (2 |x_a| |x_b|), the same identity without the
//     cancellation of 1 - x_a.x_b / (|x_a| |x_b|) near 1;
//   Jensen-Shannon H(m) - (H(x_a) + H(x_b)) / 2, m = (x_a + x_b) / 2, in nats, computed as
//     (A_aa + A_bb) / 4 - A_ab / 2 with A_ab = sum_j s_j ln s_j, s = x_a + x_b: expanding
//     m ln m = (s ln s - s ln 2) / 2 and x ln x = (2x ln 2x - 2x ln 2) / 4, the ln 2 terms cancel
//     (sum_j s_j = sum_j x_aj + sum_j x_bj), so a part costs one addition, one logarithm and one
//     multiply-add. The logarithm is vectorised: on AVX-512 the table logarithm of
//     pair_kernels.cpp (<= 4 ulp + simd::kLogAbsoluteError absolute), elsewhere
//     hwy/contrib/math Log (<= 4 ulp, documented in math-inl.h); simd::kernel_log tests both.
//     The sums weight ln s by s, and sum_j s_j is about 2, so the polynomial adds at most about
//     2 kLogAbsoluteError to A_ab and to the divergence. On AVX-512, A_ab is summed as
//     ln 2 sum_j s k + sum_j s (ln c_i + ln(1 + r)) (s = 2^k c_i (1 + r), table_log): each
//     part's values are rounded relative to |k ln2| + |ln c_i| + |ln(1 + r)|
//     <= |ln s| + kSplitLogExcess (scripts/kernel_log_fit.py checks it over every binade), so
//     the roundings of the logarithm (<= 4.5 u on that sum) and of the two sums (gamma_{k+1})
//     are relative to sum_j s |ln s| + kSplitLogExcess sum_j s (the tests' derived bound has it).
struct ClassicalPairs {
    const ClassicalRows* sets = nullptr;
    int64_t n_sets = 0;
    double* cos_sum = nullptr;
    double* js_sum = nullptr;
    double* euc_sum = nullptr;
    int64_t ld = 0;
};
void classical_pairs(const ClassicalPairs& args, int64_t n, int64_t b_begin, int64_t b_end);

// sum(a, b) += ||x_a - x_b||^2 for a > b, b in [b_begin, b_end): from the centred Gram `gram`
// (column-major, leading dimension ld) with the recomputation above, or directly when `gram` is
// null.
void squared_pairs(const Rows& rows, const double* gram, double* sum, int64_t ld, int64_t n,
                   int64_t b_begin, int64_t b_end);

}  // namespace sinkscope::metrics::kernels
