// Floating-point tolerances of the tests, each derived from what bounds the error (not tuned on
// one machine), and the assertions that log every comparison's margin.
//
// With SINKSCOPE_TEST_MARGINS=path set, every assertion below appends one line
// `Suite.Test<TAB>what<TAB>observed<TAB>tolerance` to that file (scripts/check-portability.sh
// aggregates them); without it nothing is written and the assertions behave like EXPECT_NEAR.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

namespace sinkscope::testutil {

// Unit roundoffs (round to nearest): |fl(x) - x| <= u |x|.
inline constexpr double kU32 = 0x1p-24;   // float32, ~6.0e-8
inline constexpr double kU64 = 0x1p-53;   // float64, ~1.1e-16
inline constexpr double kUBf16 = 0x1p-8;  // bfloat16 (8-bit significand), ~3.9e-3

// gamma_K = K u / (1 - K u) (Higham, Accuracy and Stability, 3.1): a sum or dot product of K
// terms, rounded after each operation in any order, is within gamma_K * sum |term_i| of exact.
// Two evaluations in different orders (another BLAS kernel, another GEMM shape, threads
// splitting K) therefore differ by at most 2 gamma_K sum |term_i|.
constexpr double gamma_k(double k, double u) {
    return k * u / (1.0 - k * u);
}

// --- float64 metric math (spec/METRICS.md) ---------------------------------------------------
// A closed form computed in float64 through at most ~4 well-conditioned operations (a gini, an
// ARI, a silhouette, a percentile): within 4 * 2^-53 ~ 4.4e-16 relative of exact (absolute for
// values of magnitude <= 1), and the expected literal is itself rounded (2^-53): 1e-15.
inline constexpr double kFewOps = 1e-15;
// A float64 sum or mean over n <= 500 terms (means of row quantities, merged accumulators)
// against the exact value or another summation order: gamma_500(2^-53) ~ 5.6e-14 relative to the
// sum of |terms| (all terms of one sign here).
inline constexpr double kF64ShortSumRel = 1e-13;
// The same over n <= 10^4 terms (head distances over every row, table values of a run, closed
// forms of persistence sums): gamma_1e4(2^-53) ~ 1.1e-12.
inline constexpr double kF64SumRel = 1e-12;
// Identities the spec requires to 1e-10 relative (section 1: dA^2 = dA_perp^2 + (b - b')^2; the
// log-ratio invariances): each side is a sum of squares of d <= ~10^3 differences of logs, whose
// float64 error is ~ d 2^-53 (sum |terms|) / |result|, up to ~1e-11 when the sink term dominates.
inline constexpr double kSpecIdentityRel = 1e-10;
// The entropy identity H(p) = H_b(s) + (1 - s) H(pi) the spec requires to 1e-12 (section 1): sums
// of d <= 100 terms p log p of one sign, gamma_100 ~ 1.1e-14.
inline constexpr double kSpecEntropyRel = 1e-12;
// Head distances from a Gram matrix (D^2 = G_ii + G_jj - 2 G_ij, cancelling) against the
// per-row loop: error ~ gamma_n (G_ii + G_jj) / D^2 relative; for the random rows tested (n <=
// 10^3 terms, |x|^2 / D^2 <= 10^3) <= ~1e-10; relative to max(D, 1).
inline constexpr double kGramDistanceRel = 1e-9;
// A dense symmetric eigensolve (Eigen, backward stable): |d lambda| <= c n 2^-53 ||A||_2 with c ~
// 10; for the n <= 40, ||A|| <= 16 Laplacians tested, <= 7e-13.
inline constexpr double kDenseEigenAbs = 1e-12;
// The iterative (Spectra) smallest Laplacian eigenvalues: shift-invert about -1e-3, so the
// shifted solve has relative error ~ cond * n * 2^-53 = (4 / 1e-3) * 300 * 1.1e-16 ~ 1.3e-10 on
// 1/(lambda - sigma), i.e. <= 1.3e-10 * (lambda + 1e-3) <= 5e-10 on lambda <= 4 (Spectra's own
// stopping tolerance is 1e-12).
inline constexpr double kIterativeEigenAbs = 1e-9;

// --- float32 model math ----------------------------------------------------------------------
// Bound of a float32 accumulation of K terms against the exact value, scaled by the magnitude
// `scale` of the terms' sum of |.|: gamma_K(2^-24) * scale.
constexpr double f32_accumulation_bound(double k, double scale) {
    return gamma_k(k, kU32) * scale;
}
// Two float32 evaluations of the same function in different summation orders (or a float32
// evaluation against a float64 reference, whose own error is 2^29 times smaller): each within
// gamma_K * scale of exact, so within 2 gamma_K * scale of each other.
constexpr double f32_two_evaluations_bound(double k, double scale) {
    return 2.0 * f32_accumulation_bound(k, scale);
}
// A float32 value of magnitude <= 1 after a few (<= 8) rounded elementwise operations (image
// rescale and normalize, a layer's bias add), in each of two evaluations: 16 * 2^-24 = 9.5e-7.
inline constexpr double kF32FewOpsUnitAbs = 1e-6;
// Relative error of one float32 softmax entry p_j = exp(z_j - max z) / sum_k exp(z_k - max z)
// over n keys whose scores span `range` (max - min): the subtraction rounds z_j - max z by
// range * u, exp adds 2u (libm / SLEEF: 1 ulp), the sum of n positive terms gamma_n, the
// division u: (range + n + 3) u + O(u^2); we add one u for the O(u^2).
constexpr double f32_softmax_rel_bound(double n, double range) {
    return (range + n + 4.0) * kU32;
}
// |sum_j p_j - 1| of such a row, whatever the scores: p_j |z_j - max z| <= 1/e, so the range
// terms add up to at most n/e: (n/e + n + 4) u <= (2n + 4) u.
constexpr double f32_softmax_sum_bound(double n) {
    return (2.0 * n + 4.0) * kU32;
}
// A float32 value converted once and compared with its float64 source: relative 2^-24.
inline constexpr double kF32StoreRel = kU32;

// Appends `observed`/`tol` to $SINKSCOPE_TEST_MARGINS (no-op when unset). `what` names the check.
void record_margin(const std::string& what, double observed, double tol);

// |a - b| <= tol, recorded.
::testing::AssertionResult within_abs(const char* a_expr, const char* b_expr, const char* tol_expr,
                                      double a, double b, double tol);
// |a - b| / max(|a|, |b|) <= tol, recorded (0 == 0 passes).
::testing::AssertionResult within_rel(const char* a_expr, const char* b_expr, const char* tol_expr,
                                      double a, double b, double tol);
// An error computed by the test (a max |diff|, a relative error) is <= tol, recorded.
::testing::AssertionResult error_within(const char* err_expr, const char* tol_expr, double err,
                                        double tol);

}  // namespace sinkscope::testutil

#define EXPECT_WITHIN(a, b, tol) EXPECT_PRED_FORMAT3(::sinkscope::testutil::within_abs, a, b, tol)
#define ASSERT_WITHIN(a, b, tol) ASSERT_PRED_FORMAT3(::sinkscope::testutil::within_abs, a, b, tol)
#define EXPECT_REL_WITHIN(a, b, tol) \
    EXPECT_PRED_FORMAT3(::sinkscope::testutil::within_rel, a, b, tol)
#define EXPECT_ERROR_WITHIN(err, tol) \
    EXPECT_PRED_FORMAT2(::sinkscope::testutil::error_within, err, tol)
