// Tests of metrics/region_stats: exact identities of the region boundaries, Fisher's method, the
// one-sample t-test and the region summary (the comparison with scipy.stats on the tables is
// tests/python/test_region_stats.py).
#include "sinkscope/metrics/region_stats.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sinkscope/core/error.hpp"

namespace sinkscope::metrics {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(RegionStats, ThirdsAreFloorsOfDepth) {
    // floor(L/3) and floor(2L/3) in integers (METRICS.md 10.n's floor(L/3)).
    for (int64_t L = 0; L <= 100; ++L) {
        const LayerRegions g = layer_regions_thirds(L);
        EXPECT_EQ(g.middle_begin, L / 3) << L;
        EXPECT_EQ(g.late_begin, (2 * L) / 3) << L;
    }
    const LayerRegions g12 = layer_regions_thirds(12);
    EXPECT_EQ(g12.middle_begin, 4);
    EXPECT_EQ(g12.late_begin, 8);
    EXPECT_EQ(region_of(g12, 3), Region::Early);
    EXPECT_EQ(region_of(g12, 4), Region::Middle);
    EXPECT_EQ(region_of(g12, 7), Region::Middle);
    EXPECT_EQ(region_of(g12, 8), Region::Late);
    const LayerRegions g4 = layer_regions_thirds(4);  // early 0, middle 1, late 2-3
    EXPECT_EQ(region_of(g4, 0), Region::Early);
    EXPECT_EQ(region_of(g4, 1), Region::Middle);
    EXPECT_EQ(region_of(g4, 2), Region::Late);
    EXPECT_THROW(layer_regions(10, 5, 4), InternalError);
    EXPECT_STREQ(region_name(Region::Middle), "middle");
}

TEST(RegionStats, ChiSquareEvenClosedForm) {
    // k = 1: exp(-x/2) (the same operations: exact); k = 2: exp(-x/2) (1 + x/2), summed here
    // in the linear domain and there as exp(-h + ln h): the exponent's argument, of size ~h =
    // x/2, is rounded to ~h eps, so the two agree to a few (2 + h) eps relative.
    constexpr double eps = std::numeric_limits<double>::epsilon();
    for (double x : {0.1, 1.0, 3.7, 20.0, 300.0}) {
        EXPECT_EQ(chi_square_sf_even(x, 1), std::exp(-x / 2)) << x;
        const double two = std::exp(-x / 2) * (1 + x / 2);
        EXPECT_NEAR(chi_square_sf_even(x, 2), two, 4 * (2 + x / 2) * eps * two) << x;
    }
    EXPECT_EQ(chi_square_sf_even(0, 5), 1.0);
    EXPECT_EQ(chi_square_sf_even(INFINITY, 5), 0.0);
    // The mean of chi2_{2k} is 2k; its survival at large k stays in (0, 1) and decreases in x.
    EXPECT_GT(chi_square_sf_even(200, 100), chi_square_sf_even(210, 100));
}

TEST(RegionStats, FisherOfOneTestIsThatTest) {
    // k = 1: X^2 = -2 ln p and P(chi2_2 >= X^2) = exp(ln p) = p (to the rounding of exp and
    // log: a few ulps).
    for (double p : {1e-12, 0.003, 0.2, 0.5, 0.99}) {
        const FisherCombined f = fisher_combined(std::vector<double>{p});
        EXPECT_EQ(f.k, 1);
        EXPECT_EQ(f.df, 2.0);
        EXPECT_NEAR(f.p, p, 8 * std::numeric_limits<double>::epsilon() * p) << p;
    }
    // NaN p-values are left out; none left -> NaN.
    const FisherCombined two = fisher_combined(std::vector<double>{0.1, kNaN, 0.4});
    EXPECT_EQ(two.k, 2);
    EXPECT_DOUBLE_EQ(two.chi2, -2 * (std::log(0.1) + std::log(0.4)));
    EXPECT_TRUE(std::isnan(fisher_combined(std::vector<double>{kNaN}).p));
    EXPECT_EQ(fisher_combined(std::vector<double>{1.0, 1.0}).p, 1.0);
    EXPECT_EQ(fisher_combined(std::vector<double>{0.0, 0.5}).p, 0.0);
    EXPECT_THROW(fisher_combined(std::vector<double>{1.5}), InternalError);
    // The notebook's offset (PAPERS.md B.5): ln(p + 1e-10).
    EXPECT_DOUBLE_EQ(fisher_combined(std::vector<double>{0.0}, 1e-10).chi2, -2 * std::log(1e-10));
}

TEST(RegionStats, OneSampleIsThePairedTestAgainstAConstant) {
    const std::vector<double> x = {0.3, -1.2, 2.5, 0.9, 1.1, -0.4};
    for (double mu : {0.0, 0.5, -2.0}) {
        const OneSampleTest t = one_sample_t_test(x, mu);
        const PairedTest p = paired_t_test(x, std::vector<double>(x.size(), mu));
        EXPECT_NEAR(t.t, p.t, 1e-13 * std::abs(p.t)) << mu;
        EXPECT_NEAR(t.p, p.p, 1e-13) << mu;
        EXPECT_EQ(t.df, 5.0);
        EXPECT_EQ(t.n, 6);
    }
    // The moment form: the same numbers from (mean, m2, n).
    double mean = 0, m2 = 0;
    for (double v : x) mean += v / 6;
    for (double v : x) m2 += (v - mean) * (v - mean);
    EXPECT_NEAR(one_sample_t_test(mean, m2, 6).t, one_sample_t_test(x).t, 1e-14);
    // Conventions: n < 2, constant data, non-finite.
    EXPECT_TRUE(std::isnan(one_sample_t_test(std::vector<double>{1.0}).t));
    EXPECT_EQ(one_sample_t_test(std::vector<double>{2.0, 2.0}).t, INFINITY);
    EXPECT_EQ(one_sample_t_test(std::vector<double>{2.0, 2.0}).p, 0.0);
    EXPECT_TRUE(std::isnan(one_sample_t_test(std::vector<double>{0.0, 0.0}).p));
    EXPECT_TRUE(std::isnan(one_sample_t_test(std::vector<double>{1.0, kNaN}).mean));
}

TEST(RegionStats, SummaryOfALinearProfile) {
    // v = 1 + 2 m over 12 layers (thirds: early 0-3, middle 4-7, late 8-11): region means are
    // 1 + 2 * 1.5 = 4, 1 + 2 * 5.5 = 12 and 1 + 2 * 9.5 = 20 exactly (sums of small integers),
    // the peak ratio 12 / 4 = 3, the fold change 23 / 1, Spearman's rho 1.
    std::vector<int64_t> layers;
    std::vector<double> v;
    for (int64_t m = 0; m < 12; ++m) layers.push_back(m), v.push_back(1.0 + 2.0 * double(m));
    const RegionSummary s = summarize_regions(layers, v, layer_regions_thirds(12), 0.95);
    EXPECT_EQ(s.region[0].mean, 4.0);
    EXPECT_EQ(s.region[1].mean, 12.0);
    EXPECT_EQ(s.region[2].mean, 20.0);
    EXPECT_EQ(s.region[0].n, 4);
    EXPECT_EQ(s.all.mean, 12.0);
    EXPECT_EQ(s.peak_ratio, 3.0);
    EXPECT_EQ(s.fold_change, 23.0);
    EXPECT_EQ(s.first_layer, 0);
    EXPECT_EQ(s.last_layer, 11);
    EXPECT_NEAR(s.trend.r, 1.0, 1e-15);
    // The Welch tests are welch_t_test of the regions' values (equal variances here: each
    // region's sample variance is 4 * var(0, 1, 2, 3) = 20 / 3); early - middle = -8.
    const std::vector<double> early(v.begin(), v.begin() + 4), middle(v.begin() + 4, v.begin() + 8);
    const WelchTest w = welch_t_test(early, middle);
    EXPECT_EQ(s.welch[0].t, w.t);
    EXPECT_EQ(s.welch[0].p, w.p);
    EXPECT_EQ(s.welch[0].mean_difference, -8.0);
    EXPECT_NEAR(s.welch[0].df, 6.0, 1e-14);  // equal variances and sizes: 2 (n - 1)
    // The interval is the mean -+ t_{0.975, 3} sd / 2.
    EXPECT_NEAR(s.region[0].hi - s.region[0].mean,
                student_t_quantile(0.975, 3) * std::sqrt(20.0 / 3.0) / 2, 1e-13);
}

TEST(RegionStats, SummaryLeavesOutNonFiniteValues) {
    const std::vector<int64_t> layers = {0, 1, 2, 3, 4, 5};
    const std::vector<double> v = {kNaN, 2.0, 4.0, INFINITY, 8.0, kNaN};
    const RegionSummary s = summarize_regions(layers, v, layer_regions(6, 2, 4), 0.9);
    EXPECT_EQ(s.first_layer, 1);
    EXPECT_EQ(s.last_layer, 4);
    EXPECT_EQ(s.fold_change, 4.0);          // 8 / 2
    EXPECT_EQ(s.region[0].n, 1);            // layer 1
    EXPECT_EQ(s.region[1].n, 1);            // layer 2
    EXPECT_EQ(s.peak_ratio, 2.0);           // 4 / 2
    EXPECT_TRUE(std::isnan(s.welch[0].t));  // one value a side
    // Empty regions give NaN means and ratios.
    const RegionSummary e = summarize_regions(layers, v, layer_regions(6, 0, 6), 0.9);
    EXPECT_TRUE(std::isnan(e.region[0].mean));
    EXPECT_TRUE(std::isnan(e.peak_ratio));
    EXPECT_THROW(summarize_regions(std::vector<int64_t>{1, 0}, std::vector<double>{1, 2},
                                   layer_regions_thirds(2), 0.95),
                 InternalError);
}

}  // namespace
}  // namespace sinkscope::metrics
