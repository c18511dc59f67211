// Correlation tests, the paired t-test, Student-t p-values through the incomplete beta function,
// and the seeded bootstrap of a weighted mean (see statistics.hpp for the conventions).
#include "sinkscope/metrics/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <vector>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/random.hpp"

namespace sinkscope::metrics {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kEps = std::numeric_limits<double>::epsilon();

// --- log B(a, b) without cancellation --------------------------------------------------------
// Stirling: lgamma(z) = (z - 1/2) log z - z + log(2 pi)/2 + w(z), with the remainder series
// w(z) = sum_k B_2k / (2k (2k - 1) z^(2k - 1)) (Abramowitz & Stegun 6.1.40). For z >= 10 the
// seven terms below leave < 1e-17 (the next term is 3617 / (122400 z^15)).
double stirling_remainder(double z) {
    const double z2 = 1.0 / (z * z);
    return (1.0 / 12 +
            z2 * (-1.0 / 360 +
                  z2 * (1.0 / 1260 +
                        z2 * (-1.0 / 1680 +
                              z2 * (1.0 / 1188 + z2 * (-691.0 / 360360 + z2 * (1.0 / 156))))))) /
           z;
}

// log B(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b). Summing std::lgamma values loses
// ~|lgamma(a + b)| 2^-53 absolutely (~1e-12 at a + b = 1000, where the terms are ~6000 and the
// result is small), so for a large argument the difference is taken analytically from Stirling's
// series, where the large terms cancel before rounding (DiDonato & Morris 1992, "algdiv"):
//   both >= 10: (a - 1/2) log(a/(a+b)) + (b - 1/2) log(b/(a+b)) - log(a+b)/2 + log(2 pi)/2
//               + w(a) + w(b) - w(a+b);
//   s < 10 <= g: lgamma(s) - (g - 1/2) log1p(s/g) - s log(g + s) + s + w(g) - w(g + s).
double log_beta(double a, double b) {
    const double s = std::min(a, b), g = std::max(a, b);
    if (g < 10) return std::lgamma(a) + std::lgamma(b) - std::lgamma(a + b);
    if (s < 10)
        return std::lgamma(s) - (g - 0.5) * std::log1p(s / g) - s * std::log(g + s) + s +
               stirling_remainder(g) - stirling_remainder(g + s);
    const double sum = a + b;
    return (a - 0.5) * std::log(a / sum) + (b - 0.5) * std::log(b / sum) - 0.5 * std::log(sum) +
           0.5 * std::log(2 * std::numbers::pi) + stirling_remainder(a) + stirling_remainder(b) -
           stirling_remainder(sum);
}

// --- the continued fraction of I_x(a, b) -------------------------------------------------------
// Derivation (Abramowitz & Stegun 26.5.8; Numerical Recipes 6.4): integrating the series of
// B(x; a, b) = int_0^x t^(a-1) (1-t)^(b-1) dt by parts gives the continued fraction
//   I_x(a, b) = x^a (1-x)^b / (a B(a, b)) * 1 / (1 + d_1 / (1 + d_2 / (1 + ...)))
// with d_(2m+1) = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)),
//      d_(2m)   =  m (b - m) x / ((a + 2m - 1)(a + 2m)),
// which converges fast (in O(sqrt(max(a, b))) terms) for x < (a + 1)/(a + b + 2); above that
// point the symmetry I_x(a, b) = 1 - I_(1-x)(b, a) brings x below it. The fraction is evaluated
// forward by the modified Lentz method (Lentz 1976; Thompson & Barnett 1986): f_j = f_(j-1) C_j
// D_j with C_j = 1 + d_j / C_(j-1), D_j = 1 / (1 + d_j D_(j-1)), a zero denominator replaced by a
// tiny number, stopping when |C_j D_j - 1| < 2^-52. Returns the fraction 1/(1 + d_1/(1 + ...)).
double beta_continued_fraction(double a, double b, double x) {
    constexpr double kTiny = 1e-300;
    constexpr int kMaxTerms = 100000;
    auto guard = [](double v) { return std::abs(v) < kTiny ? kTiny : v; };
    double c = 1.0;
    double d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0));  // d_1 folded in: D_1 = 1/(1 + d_1)
    double f = d;
    for (int m = 1; m <= kMaxTerms; ++m) {
        const double even = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        d = 1.0 / guard(1.0 + even * d);
        c = guard(1.0 + even / c);
        f *= d * c;
        const double odd = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        d = 1.0 / guard(1.0 + odd * d);
        c = guard(1.0 + odd / c);
        const double delta = d * c;
        f *= delta;
        if (std::abs(delta - 1.0) <= kEps) return f;
    }
    throw InternalError(detail::concat(
        "incomplete beta continued fraction did not converge for a=", a, " b=", b, " x=", x));
}

// I_x(a, b) (complement = false) or 1 - I_x(a, b) (complement = true), given x and y = 1 - x
// each to full relative precision (the callers often know 1 - x better than 1 - x rounds).
// Whichever tail the continued fraction converges for is computed directly; the other one is
// 1 minus it, which then is >= ~1/2 and loses nothing.
double incomplete_beta(double a, double b, double x, double y, bool complement) {
    if (!(a > 0) || !(b > 0) || !(x >= 0) || !(y >= 0) || std::isnan(x + y)) return kNaN;
    if (x == 0) return complement ? 1.0 : 0.0;
    if (y == 0) return complement ? 0.0 : 1.0;
    // log(x^a y^b / B(a, b)); log1p of the smaller argument keeps log(1 - small) exact.
    const double log_x = x <= y ? std::log(x) : std::log1p(-y);
    const double log_y = y <= x ? std::log(y) : std::log1p(-x);
    const double front = std::exp(a * log_x + b * log_y - log_beta(a, b));
    if (x < (a + 1.0) / (a + b + 2.0)) {
        const double lower = front * beta_continued_fraction(a, b, x) / a;
        return complement ? 1.0 - lower : lower;
    }
    const double upper = front * beta_continued_fraction(b, a, y) / b;  // I_y(b, a) = 1 - I_x
    return complement ? upper : 1.0 - upper;
}

// Two-sided p of a correlation r with df = n - 2 degrees of freedom: t^2 = df r^2 / (1 - r^2),
// so df / (df + t^2) = 1 - r^2 and p = I_(1-r^2)(df/2, 1/2); 1 - r^2 = (1 - r)(1 + r) is exact to
// a few roundings even for |r| near 1.
double correlation_p(double r, double df) {
    const double a = std::abs(r);
    return incomplete_beta(df / 2, 0.5, (1.0 - a) * (1.0 + a), a * a, false);
}

double correlation_statistic(double r, double df) {
    const double q = (1.0 + r) * (1.0 - r);
    if (q <= 0) return r > 0 ? INFINITY : -INFINITY;
    return r * std::sqrt(df / q);
}

bool all_finite(std::span<const double> v) {
    return std::all_of(v.begin(), v.end(), [](double e) { return std::isfinite(e); });
}

bool is_constant(std::span<const double> v) {
    return std::all_of(v.begin(), v.end(), [&](double e) { return e == v[0]; });
}

// Pearson's r by centred sums (the mean subtracted before the products, as scipy and numpy do).
double pearson_r(std::span<const double> x, std::span<const double> y) {
    const double n = static_cast<double>(x.size());
    const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
    const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
    double sxx = 0, syy = 0, sxy = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double dx = x[i] - mx, dy = y[i] - my;
        sxx += dx * dx;
        syy += dy * dy;
        sxy += dx * dy;
    }
    // sqrt(sxx syy) rounds once (and is exact for perfectly correlated data: sqrt(fl(s^2)) = s);
    // the separate roots only when the product leaves the range of double.
    const double prod = sxx * syy;
    const double norm = std::isnormal(prod) ? std::sqrt(prod) : std::sqrt(sxx) * std::sqrt(syy);
    return std::clamp(sxy / norm, -1.0, 1.0);
}

// Ranks 1..n, ties given the average of the ranks they span (scipy.stats.rankdata "average").
std::vector<double> average_ranks(std::span<const double> v) {
    std::vector<size_t> order(v.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return v[i] < v[j]; });
    std::vector<double> rank(v.size());
    for (size_t begin = 0; begin < order.size();) {
        size_t end = begin + 1;
        while (end < order.size() && v[order[end]] == v[order[begin]]) ++end;
        // ranks begin+1 .. end, average (begin + 1 + end) / 2: exact (a half-integer)
        const double avg = 0.5 * static_cast<double>(begin + 1 + end);
        for (size_t k = begin; k < end; ++k) rank[order[k]] = avg;
        begin = end;
    }
    return rank;
}

Correlation undefined_correlation(int64_t n) {
    return {kNaN, kNaN, kNaN, static_cast<double>(n - 2), n};
}

void check_same_length(std::span<const double> x, std::span<const double> y, const char* what) {
    SS_CHECK(x.size() == y.size(), what, ": x has ", x.size(), " elements but y has ", y.size());
}

// numpy's linear-interpolation quantile of sorted `m` (numpy.lib.function_base._lerp: a + t (b -
// a), evaluated as b - (1 - t)(b - a) when t >= 1/2, so that the result is exact at both ends).
double quantile_sorted(const std::vector<double>& m, double q) {
    const double h = static_cast<double>(m.size() - 1) * q;
    const double below = std::floor(h);
    const size_t i = static_cast<size_t>(below);
    if (i + 1 >= m.size()) return m.back();
    const double t = h - below, a = m[i], b = m[i + 1], diff = b - a;
    return t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

double regularized_incomplete_beta(double a, double b, double x) {
    if (!(x >= 0 && x <= 1)) return kNaN;
    return incomplete_beta(a, b, x, 1.0 - x, false);
}

double regularized_incomplete_beta_complement(double a, double b, double x) {
    if (!(x >= 0 && x <= 1)) return kNaN;
    return incomplete_beta(a, b, x, 1.0 - x, true);
}

double student_t_two_sided_p(double t, double df) {
    if (std::isnan(t) || !(df > 0)) return kNaN;
    if (std::isinf(t)) return 0.0;
    // x = df / (df + t^2) and its complement t^2 / (df + t^2), each without subtraction; for
    // |t| > ~1e154, t^2 overflows: x = (df / |t|) / |t| to first order, y = 1.
    const double at = std::abs(t), t2 = at * at;
    if (std::isinf(t2)) return incomplete_beta(df / 2, 0.5, (df / at) / at, 1.0, false);
    return incomplete_beta(df / 2, 0.5, df / (df + t2), t2 / (df + t2), false);
}

WelchTest welch_t_test(std::span<const double> x, std::span<const double> y) {
    const double nx = static_cast<double>(x.size()), ny = static_cast<double>(y.size());
    if (!all_finite(x) || !all_finite(y) || x.empty() || y.empty()) return {kNaN, kNaN, kNaN, kNaN};
    const double mx = std::accumulate(x.begin(), x.end(), 0.0) / nx;
    const double my = std::accumulate(y.begin(), y.end(), 0.0) / ny;
    const double diff = mx - my;
    if (x.size() < 2 || y.size() < 2) return {kNaN, kNaN, kNaN, diff};
    double sx = 0, sy = 0;
    for (double e : x) sx += (e - mx) * (e - mx);
    for (double e : y) sy += (e - my) * (e - my);
    const double vx = sx / (nx - 1) / nx, vy = sy / (ny - 1) / ny;  // squared standard errors
    const double se2 = vx + vy;
    if (se2 == 0) return {kNaN, kNaN, kNaN, diff};
    const double t = diff / std::sqrt(se2);
    const double df = se2 * se2 / (vx * vx / (nx - 1) + vy * vy / (ny - 1));
    return {t, df, student_t_two_sided_p(t, df), diff};
}

AnovaTest one_way_anova(const std::vector<std::vector<double>>& groups) {
    const double k = static_cast<double>(groups.size());
    double n = 0, total = 0;
    for (const auto& g : groups) {
        if (!all_finite(g)) return {kNaN, k - 1, kNaN, kNaN};
        n += static_cast<double>(g.size());
        total += std::accumulate(g.begin(), g.end(), 0.0);
    }
    const double df_between = k - 1, df_within = n - k;
    if (groups.size() < 2 || df_within < 1) return {kNaN, df_between, df_within, kNaN};
    const double grand = total / n;
    double ss_between = 0, ss_within = 0;
    for (const auto& g : groups) {
        if (g.empty()) return {kNaN, df_between, df_within, kNaN};
        const double m = std::accumulate(g.begin(), g.end(), 0.0) / static_cast<double>(g.size());
        ss_between += static_cast<double>(g.size()) * (m - grand) * (m - grand);
        for (double e : g) ss_within += (e - m) * (e - m);
    }
    if (ss_within == 0)
        return ss_between > 0 ? AnovaTest{INFINITY, df_between, df_within, 0.0}
                              : AnovaTest{kNaN, df_between, df_within, kNaN};
    const double f = (ss_between / df_between) / (ss_within / df_within);
    // P(F >= f) = I_x(df_within / 2, df_between / 2), x = df_within / (df_within + df_between f),
    // its complement computed without subtraction.
    const double den = df_within + df_between * f;
    const double p = incomplete_beta(df_within / 2, df_between / 2, df_within / den,
                                     df_between * f / den, false);
    return {f, df_between, df_within, p};
}

double student_t_quantile(double q, double df) {
    if (!(q > 0 && q < 1) || !(df > 0)) return kNaN;
    if (q == 0.5) return 0.0;
    // 1 - q is exact for q >= 0.5 (Sterbenz), so the two tails are symmetric bit for bit.
    const double two_sided = q < 0.5 ? 2 * q : 2 * (1 - q);
    // The two-sided p-value falls from 1 at t = 0 towards 0: bracket the root, then bisect until
    // the bracket holds no double in between.
    double lo = 0, hi = 1;
    while (student_t_two_sided_p(hi, df) > two_sided && std::isfinite(hi)) lo = hi, hi *= 2;
    if (!std::isfinite(hi)) return q < 0.5 ? -INFINITY : INFINITY;
    for (int i = 0; i < 2100; ++i) {
        const double mid = lo + (hi - lo) / 2;
        if (mid <= lo || mid >= hi) break;
        (student_t_two_sided_p(mid, df) > two_sided ? lo : hi) = mid;
    }
    return q < 0.5 ? -hi : hi;
}

MeanInterval mean_interval(std::span<const double> values, double level) {
    SS_CHECK(level > 0 && level < 1, "mean_interval: level must be in (0, 1)");
    SS_CHECK(all_finite(values), "mean_interval: non-finite value");
    const int64_t n = static_cast<int64_t>(values.size());
    if (n == 0) return {kNaN, kNaN, kNaN, kNaN, 0};
    const double mean = std::accumulate(values.begin(), values.end(), 0.0) / double(n);
    if (n < 2) return {mean, kNaN, kNaN, kNaN, n};
    double ss = 0;
    for (double e : values) ss += (e - mean) * (e - mean);
    const double sd = std::sqrt(ss / double(n - 1));
    const double half =
        student_t_quantile((1 + level) / 2, double(n - 1)) * sd / std::sqrt(double(n));
    return {mean, sd, mean - half, mean + half, n};
}

Correlation pearson(std::span<const double> x, std::span<const double> y) {
    check_same_length(x, y, "pearson");
    const int64_t n = static_cast<int64_t>(x.size());
    if (n < 2 || !all_finite(x) || !all_finite(y) || is_constant(x) || is_constant(y))
        return undefined_correlation(n);
    if (n == 2) {  // scipy: two points are always perfectly (anti)correlated, p = 1
        const double r = ((x[1] > x[0]) == (y[1] > y[0])) ? 1.0 : -1.0;
        return {r, 1.0, r * INFINITY, 0.0, n};
    }
    const double df = static_cast<double>(n - 2);
    const double r = pearson_r(x, y);
    return {r, correlation_p(r, df), correlation_statistic(r, df), df, n};
}

Correlation spearman(std::span<const double> x, std::span<const double> y) {
    check_same_length(x, y, "spearman");
    const int64_t n = static_cast<int64_t>(x.size());
    if (n < 2 || !all_finite(x) || !all_finite(y) || is_constant(x) || is_constant(y))
        return undefined_correlation(n);
    const std::vector<double> rx = average_ranks(x), ry = average_ranks(y);
    const double r = pearson_r(rx, ry);
    const double df = static_cast<double>(n - 2);
    if (n == 2) return {r, kNaN, kNaN, df, n};  // scipy: t with 0 df has no p-value
    return {r, correlation_p(r, df), correlation_statistic(r, df), df, n};
}

PairedTest paired_t_test(std::span<const double> x, std::span<const double> y) {
    check_same_length(x, y, "paired t-test");
    const int64_t n = static_cast<int64_t>(x.size());
    const double df = static_cast<double>(n - 1);
    if (!all_finite(x) || !all_finite(y) || n == 0) return {kNaN, df, kNaN, kNaN, n};
    std::vector<double> d(x.size());
    for (size_t i = 0; i < d.size(); ++i) d[i] = x[i] - y[i];
    const double mean = std::accumulate(d.begin(), d.end(), 0.0) / static_cast<double>(n);
    if (n < 2) return {kNaN, df, kNaN, mean, n};
    double ss = 0;
    for (double e : d) ss += (e - mean) * (e - mean);
    const double se = std::sqrt(ss / df / static_cast<double>(n));
    if (se == 0) {  // scipy: mean / 0 = +-inf with p = 0, or 0 / 0 = NaN
        if (mean == 0) return {kNaN, df, kNaN, mean, n};
        return {mean > 0 ? INFINITY : -INFINITY, df, 0.0, mean, n};
    }
    const double t = mean / se;
    return {t, df, student_t_two_sided_p(t, df), mean, n};
}

namespace {
void check_bootstrap_settings(int64_t n_resamples, double level) {
    SS_CHECK(n_resamples >= 1, "bootstrap needs at least one resample, got ", n_resamples);
    SS_CHECK(level > 0 && level < 1, "bootstrap level must be in (0, 1), got ", level);
}

// An interval not yet computed: its settings, estimate and ends NaN.
BootstrapInterval unfilled_interval(double level, int64_t n_resamples, uint64_t seed,
                                    int64_t n_used, int64_t n_excluded) {
    return {.estimate = kNaN,
            .lo = kNaN,
            .hi = kNaN,
            .level = level,
            .n_resamples = n_resamples,
            .seed = seed,
            .n_used = n_used,
            .n_excluded = n_excluded};
}
}  // namespace

BootstrapInterval bootstrap_mean(std::span<const double> values, std::span<const double> weights,
                                 int64_t n_resamples, uint64_t seed, double level) {
    SS_CHECK(weights.empty() || weights.size() == values.size(), "bootstrap: ", weights.size(),
             " weights for ", values.size(), " values");
    check_bootstrap_settings(n_resamples, level);
    for (double w : weights)
        SS_CHECK(std::isfinite(w) && w > 0, "bootstrap weights must be finite and > 0, got ", w);

    // Pass 1: the used (finite) values and their weights.
    std::vector<double> v, w;
    for (size_t i = 0; i < values.size(); ++i) {
        if (!std::isfinite(values[i])) continue;
        v.push_back(values[i]);
        w.push_back(weights.empty() ? 1.0 : weights[i]);
    }
    const auto n_used = static_cast<int64_t>(v.size());
    BootstrapInterval out =
        unfilled_interval(level, n_resamples, seed, n_used, int64_t(values.size()) - n_used);
    if (v.empty()) return out;

    // Pass 2: the point estimate, shifted by the first value (exact for constant data).
    const double shift = v[0];
    auto shifted_mean = [&](auto&& index_of) {
        double num = 0, den = 0;
        for (size_t k = 0; k < v.size(); ++k) {
            const size_t i = index_of(k);
            num += w[i] * (v[i] - shift);
            den += w[i];
        }
        return shift + num / den;
    };
    out.estimate = shifted_mean([](size_t k) { return k; });

    // Pass 3: n_resamples resampled means from one stream, in order.
    Xoshiro256 rng(seed);
    const uint64_t n = v.size();
    std::vector<double> means(static_cast<size_t>(n_resamples));
    for (double& m : means) m = shifted_mean([&](size_t) { return size_t(rng.below(n)); });

    // Pass 4: percentile interval.
    std::sort(means.begin(), means.end());
    out.lo = quantile_sorted(means, (1.0 - level) / 2);
    out.hi = quantile_sorted(means, (1.0 + level) / 2);
    return out;
}

BootstrapInterval bootstrap_mean_of_means(const std::vector<std::vector<double>>& values,
                                          const std::vector<std::vector<double>>& weights,
                                          int64_t n_resamples, uint64_t seed, double level) {
    check_bootstrap_settings(n_resamples, level);
    SS_CHECK(!values.empty() && weights.size() == values.size(),
             "bootstrap of means: ", values.size(), " series and ", weights.size(), " weights");
    const size_t n = values[0].size();
    for (size_t s = 0; s < values.size(); ++s) {
        SS_CHECK(values[s].size() == n && weights[s].size() == n,
                 "bootstrap of means: series of different lengths");
        for (double w : weights[s])
            SS_CHECK(std::isfinite(w) && w > 0, "bootstrap weights must be finite and > 0");
    }
    BootstrapInterval out = unfilled_interval(level, n_resamples, seed, int64_t(n), 0);
    if (n == 0) return out;
    // Each series' first finite value: the shift of its sums (bootstrap_mean's form).
    std::vector<double> shifts(values.size(), kNaN);
    for (size_t s = 0; s < values.size(); ++s) {
        const auto first = std::find_if(values[s].begin(), values[s].end(),
                                        [](double x) { return std::isfinite(x); });
        if (first != values[s].end()) shifts[s] = *first;
    }
    // One series' weighted mean over the inputs index_of(0..n-1); NaN without a finite value.
    auto series_mean = [&](size_t s, auto&& index_of) {
        const std::vector<double>& v = values[s];
        const double shift = shifts[s];
        double num = 0, den = 0;
        for (size_t k = 0; k < n; ++k) {
            const size_t i = index_of(k);
            if (!std::isfinite(v[i])) continue;
            num += weights[s][i] * (v[i] - shift);
            den += weights[s][i];
        }
        return den > 0 ? shift + num / den : kNaN;
    };
    auto mean_of_means = [&](auto&& index_of) {
        double sum = 0;
        for (size_t s = 0; s < values.size(); ++s) sum += series_mean(s, index_of);
        return sum / double(values.size());
    };
    out.estimate = mean_of_means([](size_t k) { return k; });
    if (!std::isfinite(out.estimate)) return out;
    Xoshiro256 rng(seed);
    std::vector<double> means;
    means.reserve(static_cast<size_t>(n_resamples));
    std::vector<size_t> draw(n);
    for (int64_t r = 0; r < n_resamples; ++r) {
        for (size_t& i : draw) i = size_t(rng.below(n));
        const double m = mean_of_means([&](size_t k) { return draw[k]; });
        if (std::isfinite(m)) means.push_back(m);
    }
    if (means.empty()) return out;
    std::sort(means.begin(), means.end());
    out.lo = quantile_sorted(means, (1.0 - level) / 2);
    out.hi = quantile_sorted(means, (1.0 + level) / 2);
    return out;
}

}  // namespace sinkscope::metrics
