// Region and trend statistics of a per-layer quantity, as the reference-frame paper states its
// findings (spec/PAPERS.md part B, P2: "early / middle / late layers", middle-to-early peak
// ratios, Welch tests between layer groups (B.3, B.6), Spearman trends against the layer index
// (B.6, B.7, B.8), first-vs-last-layer tests and one-sample t-tests against 0 (B.7), per-sample
// tests combined by Fisher's method (B.5)). Each test equals its scipy.stats counterpart
// (checked by tests/python/test_region_stats.py); docs/metrics.md, "regions.csv", is the user's
// definition of every number.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "sinkscope/metrics/statistics.hpp"

namespace sinkscope::metrics {

// Three contiguous groups of a model's layers by their index m in [0, n_layers): early
// m < middle_begin, middle middle_begin <= m < late_begin, late m >= late_begin.
struct LayerRegions {
    int64_t n_layers = 0;
    int64_t middle_begin = 0;
    int64_t late_begin = 0;
};
// The default: thirds of depth, middle_begin = floor(L/3), late_begin = floor(2L/3) (the same
// floor(L/3) as the middle-and-late layers of the frame rule, METRICS.md 10.n). For L = 12:
// early 0-3, middle 4-7, late 8-11; for L = 4: early 0, middle 1, late 2-3.
LayerRegions layer_regions_thirds(int64_t n_layers);
// Explicit boundaries, 0 <= middle_begin <= late_begin (else InternalError); a region may be
// empty, and boundaries beyond n_layers leave the later regions empty.
LayerRegions layer_regions(int64_t n_layers, int64_t middle_begin, int64_t late_begin);

enum class Region { Early = 0, Middle = 1, Late = 2 };
inline constexpr int k_regions = 3;
Region region_of(const LayerRegions& regions, int64_t layer);
const char* region_name(Region r);  // "early", "middle", "late"

// The one-sample t-test of mean(x) = mu, two-sided.
struct OneSampleTest {
    double t;     // (mean - mu) / (sd / sqrt(n)), sd with divisor n - 1
    double df;    // n - 1
    double p;     // two-sided p-value
    double mean;  // mean(x)
    int64_t n;
};
// Equal to scipy.stats.ttest_1samp(x, mu). Conventions (scipy's): n < 2 -> t = p = NaN; zero
// variance gives t = +-inf, p = 0 when mean != mu, t = p = NaN when mean == mu; any non-finite
// element -> t = p = mean = NaN. Values whose standard deviation is at most 16 n eps |mean| (eps
// = 2^-52: they agree to within the rounding of their sums) count as constant, so the result
// does not depend on the order of summation (scipy warns of "catastrophic cancellation" there).
OneSampleTest one_sample_t_test(std::span<const double> x, double mu = 0);
// The same test from the sample's moments: its mean, sum of squared deviations from the mean
// (m2, Welford's) and size; what a running accumulator (RefFrameStat) keeps.
OneSampleTest one_sample_t_test(double mean, double m2, int64_t n, double mu = 0);

// Fisher's method of combining k independent tests: X^2 = -2 sum ln(p_i + offset), which is
// chi-square with 2k degrees of freedom under the joint null; p = P(chi2_{2k} >= X^2), in closed
// form for even degrees of freedom: exp(-X^2/2) sum_{i<k} (X^2/2)^i / i!. offset = 0 is
// scipy.stats.combine_pvalues(p, method='fisher'); the KL notebook adds 1e-10 (PAPERS.md B.5).
// NaN p-values are left out (k counts those used); p-values must otherwise be in [0, 1] (else
// InternalError). k = 0 -> chi2 = 0, p = NaN.
struct FisherCombined {
    double chi2;
    double df;  // 2k
    double p;
    int64_t k;
};
FisherCombined fisher_combined(std::span<const double> p_values, double offset = 0);
// P(chi2_{df} >= x) for even df = 2k >= 2 (the closed form above); x >= 0.
double chi_square_sf_even(double x, int64_t k);

// What the paper reports of one per-layer quantity (one value per layer, e.g. a layer's mean over
// inputs), by region. Non-finite values are left out before anything is computed.
struct RegionSummary {
    std::array<MeanInterval, k_regions> region;    // mean, sd, Student-t interval at `level`
    MeanInterval all;                              // over every layer
    std::array<OneSampleTest, k_regions> vs_zero;  // one-sample t-test of the region's values = 0
    OneSampleTest all_vs_zero;
    // Welch's t-test between regions: early vs middle, early vs late, middle vs late (the first
    // minus the second).
    std::array<WelchTest, 3> welch;
    double peak_ratio;    // mean(middle) / mean(early); NaN when either region is empty
    Correlation trend;    // Spearman's rho of the values against the layer index
    int64_t first_layer;  // the first and last layer with a finite value (-1 when none)
    int64_t last_layer;
    double fold_change;  // value(last_layer) / value(first_layer); NaN when the same layer
};
// The pairs of regions of RegionSummary::welch, in order.
inline constexpr std::array<std::array<Region, 2>, 3> k_region_pairs{
    {{Region::Early, Region::Middle},
     {Region::Early, Region::Late},
     {Region::Middle, Region::Late}}};

// `layers` (model indices, strictly ascending) and `values` have the same length (else
// InternalError); 0 < level < 1.
RegionSummary summarize_regions(std::span<const int64_t> layers, std::span<const double> values,
                                const LayerRegions& regions, double level);

}  // namespace sinkscope::metrics
