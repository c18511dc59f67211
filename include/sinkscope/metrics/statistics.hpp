// Inferential statistics on arrays of numbers: Pearson and Spearman correlation, the paired
// t-test (each equal to its scipy.stats counterpart), the Student-t p-value through the
// regularized incomplete beta function, and a seeded, platform-independent bootstrap of a
// (weighted) mean.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sinkscope/core/random.hpp"

namespace sinkscope::metrics {

// A correlation coefficient with its two-sided test of "no correlation".
struct Correlation {
    double r;          // coefficient in [-1, 1]; NaN when undefined (see pearson / spearman)
    double p;          // two-sided p-value; NaN when undefined
    double statistic;  // t = r sqrt(df / ((1 + r)(1 - r))); +-inf when |r| = 1; NaN when undefined
    double df;         // degrees of freedom of t: n - 2
    int64_t n;         // number of pairs
};

// Pearson's r and its two-sided p-value, equal to scipy.stats.pearsonr (checked against scipy
// 1.10): r = sum (x - mean x)(y - mean y) / sqrt(sum (x - mean x)^2 sum (y - mean y)^2), clipped
// to [-1, 1]; p = P(|T| >= |t|) for T ~ Student t with n - 2 df, which is scipy's exact p under
// bivariate normal data (scipy's beta form 2 B_sf((1 + |r|)/2; n/2 - 1, n/2 - 1) is the same
// function), computed as I_{1 - r^2}((n - 2)/2, 1/2).
// Conventions (scipy's): n < 2 -> r = p = NaN (scipy raises); n = 2 -> r = sign(dx) sign(dy),
// p = 1; x or y constant (all elements equal) -> r = p = NaN; any non-finite element -> r = p =
// NaN. Near |r| = 1 with small n, p is ill-conditioned in r (dp/dr unbounded), so two correct
// implementations may differ there by more than their rounding of r.
// x and y must have the same length (else InternalError).
Correlation pearson(std::span<const double> x, std::span<const double> y);

// Spearman's rho (Pearson's r of the ranks, ties given their average rank) and its two-sided
// p-value, equal to scipy.stats.spearmanr: t = rho sqrt((n - 2) / ((1 + rho)(1 - rho))),
// p = P(|T| >= |t|), T ~ Student t with n - 2 df.
// Conventions (scipy's): n < 2 -> rho = p = NaN; n = 2 -> rho = +-1 (or NaN when a pair is
// tied, as a constant input), p = NaN (t has 0 df); x or y constant -> rho = p = NaN; any
// non-finite element -> rho = p = NaN. x and y must have the same length (else InternalError).
Correlation spearman(std::span<const double> x, std::span<const double> y);

// The paired (related-samples) t-test of mean(x - y) = 0, two-sided.
struct PairedTest {
    double t;                // mean(d) / (sd(d) / sqrt(n)), d = x - y, sd with divisor n - 1
    double df;               // n - 1
    double p;                // two-sided p-value
    double mean_difference;  // mean(x - y)
    int64_t n;               // number of pairs
};

// Equal to scipy.stats.ttest_rel(x, y) (two-sided). Conventions (scipy's): zero variance of the
// differences gives t = +-inf and p = 0 when their mean is non-zero, t = p = NaN when all
// differences are 0; n < 2 -> t = p = NaN (df = n - 1); any non-finite element -> t = p =
// mean_difference = NaN. x and y must have the same length (else InternalError).
PairedTest paired_t_test(std::span<const double> x, std::span<const double> y);

// Welch's two-sample t-test of mean(x) = mean(y) (unequal variances), two-sided.
struct WelchTest {
    double t;                // (mean x - mean y) / sqrt(s_x^2 / n_x + s_y^2 / n_y), s with n - 1
    double df;               // Welch-Satterthwaite degrees of freedom
    double p;                // two-sided p-value
    double mean_difference;  // mean(x) - mean(y)
};

// Equal to scipy.stats.ttest_ind(x, y, equal_var=False). Fewer than 2 values in x or y, any
// non-finite value, or no variance in either sample (the standard error is 0) -> t = df = p =
// NaN (the mean difference is still given when defined).
WelchTest welch_t_test(std::span<const double> x, std::span<const double> y);

// One-way analysis of variance of k groups (the classical F-test, equal variances assumed).
struct AnovaTest {
    double f;           // (SS_between / (k - 1)) / (SS_within / (N - k))
    double df_between;  // k - 1
    double df_within;   // N - k
    double p;           // P(F(k - 1, N - k) >= f)
};

// Equal to scipy.stats.f_oneway(*groups). Fewer than 2 groups, N - k < 1 or any non-finite
// value -> f = p = NaN; no variance within the groups -> f = +inf, p = 0 when the group means
// differ, f = p = NaN when they do not (scipy's conventions).
AnovaTest one_way_anova(const std::vector<std::vector<double>>& groups);

// The q-quantile of Student's t with df > 0 degrees of freedom (scipy.stats.t.ppf(q, df)),
// 0 < q < 1 (NaN outside): the t at which the two-sided p-value above equals 2 min(q, 1 - q),
// found by bisection to the resolution of a double.
double student_t_quantile(double q, double df);

// The mean of n values with its Student-t confidence interval mean -+ t_{(1+level)/2, n-1} s /
// sqrt(n) (s with divisor n - 1): what scipy.stats.t.interval(level, n - 1, mean, sem) gives.
struct MeanInterval {
    double mean;    // NaN for n = 0
    double sd;      // sample standard deviation (divisor n - 1); NaN for n < 2
    double lo, hi;  // NaN for n < 2
    int64_t n;
};
// Non-finite values are an InternalError (the caller leaves them out); 0 < level < 1.
MeanInterval mean_interval(std::span<const double> values, double level);

// Two-sided p-value P(|T| >= |t|) of Student's t with `df` > 0 degrees of freedom (df need not
// be an integer): I_{df / (df + t^2)}(df / 2, 1/2), without cancellation for small or large |t|.
// t = +-inf -> 0; NaN t or df <= 0 -> NaN. Relative accuracy ~1e-14 where the p-value is
// well-conditioned (the error grows like df * 2^-53 for p in the far tail, as the p-value's own
// condition number in t does).
double student_t_two_sided_p(double t, double df);

// The regularized incomplete beta function I_x(a, b) = B(x; a, b) / B(a, b), a, b > 0,
// 0 <= x <= 1 (NaN outside), by its continued fraction (modified Lentz). Relative accuracy
// ~1e-14, growing in the far tails to ~2^-52 |a ln x + b ln(1 - x)| (<= 2e-13 for values down to
// 1e-300): the rounding of the exponent of the prefactor x^a (1 - x)^b / B(a, b).
double regularized_incomplete_beta(double a, double b, double x);
// 1 - I_x(a, b) = I_{1-x}(b, a), computed without the cancellation of the subtraction.
double regularized_incomplete_beta_complement(double a, double b, double x);

// A bootstrap percentile interval of a (weighted) mean.
struct BootstrapInterval {
    double estimate;      // the statistic on the data used (not on a resample)
    double lo;            // lower end: the (1 - level)/2 quantile of the resampled statistics
    double hi;            // upper end: the (1 + level)/2 quantile
    double level;         // nominal coverage, e.g. 0.95
    int64_t n_resamples;  // number of bootstrap resamples
    uint64_t seed;        // seed of the resampling stream
    int64_t n_used;       // number of values used (finite)
    int64_t n_excluded;   // number of non-finite values excluded before resampling
};

// Percentile bootstrap of the weighted mean sum(w v) / sum(w).
// * Non-finite values (NaN, +-inf) are excluded with their weights before resampling and
//   counted in n_excluded; with no value left, estimate = lo = hi = NaN.
// * `weights` empty means equal weights; otherwise one finite weight > 0 per value (else
//   InternalError).
// * Each resample draws n_used (value, weight) pairs uniformly with replacement from the used
//   pairs: indices from xoshiro256** seeded through splitmix64 by `seed`, bounded by Lemire's
//   unbiased multiply-and-reject method, so the result is the same bit for bit on every platform
//   and standard library. The mean is accumulated as s + sum(w (v - s)) / sum(w) with s the first
//   used value, so constant data give exactly that constant.
// * lo and hi are quantiles of the n_resamples resampled means with numpy's default ("linear",
//   Hyndman-Fan type 7) definition: with sorted m_0 <= ... <= m_{R-1} and h = (R - 1) q, the
//   q-quantile is m_floor(h) + (h - floor(h)) (m_floor(h)+1 - m_floor(h)) (numpy's lerp).
// n_resamples >= 1 and 0 < level < 1 (else InternalError).
BootstrapInterval bootstrap_mean(std::span<const double> values, std::span<const double> weights,
                                 int64_t n_resamples, uint64_t seed, double level = 0.95);

// Percentile bootstrap of the mean over series of each series' weighted mean: a layer's mean over
// its heads of the heads' means over inputs (the value a per-layer figure shows). values[s][i]
// and weights[s][i] belong to input i of series s (every series over the same inputs); each
// resample draws inputs with replacement, the same draw for every series, so the heads' shared
// dependence on the input is kept. A series' non-finite values are left out of its mean; a
// series without a finite value in the resample makes that resample NaN, and NaN resamples are
// left out of the quantiles. With one series whose values are all finite this is
// bootstrap_mean, bit for bit (the same stream, the same shifted sums); n_used counts inputs.
BootstrapInterval bootstrap_mean_of_means(const std::vector<std::vector<double>>& values,
                                          const std::vector<std::vector<double>>& weights,
                                          int64_t n_resamples, uint64_t seed, double level = 0.95);

// The resampling stream of bootstrap_mean (core/random.hpp), named here for its tests.
using Xoshiro256 = sinkscope::Xoshiro256;

}  // namespace sinkscope::metrics
