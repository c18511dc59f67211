// Region and trend statistics of per-layer quantities (region_stats.hpp; spec/PAPERS.md part B:
// the reference-frame paper's region summaries, B.3/B.6 Welch tests, B.6-B.8 trends, B.7
// one-sample and first-vs-last tests, B.5 Fisher's method).
#include "sinkscope/metrics/region_stats.hpp"

#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "sinkscope/core/error.hpp"

namespace sinkscope::metrics {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

LayerRegions layer_regions_thirds(int64_t n_layers) {
    // Integer division: floor(L/3) and floor(2L/3) exactly, for L >= 0.
    return layer_regions(n_layers, n_layers / 3, 2 * n_layers / 3);
}

LayerRegions layer_regions(int64_t n_layers, int64_t middle_begin, int64_t late_begin) {
    SS_CHECK(n_layers >= 0 && middle_begin >= 0 && middle_begin <= late_begin,
             "layer regions: need 0 <= middle_begin <= late_begin, got ", middle_begin, ", ",
             late_begin);
    return {n_layers, middle_begin, late_begin};
}

Region region_of(const LayerRegions& r, int64_t layer) {
    if (layer < r.middle_begin) return Region::Early;
    return layer < r.late_begin ? Region::Middle : Region::Late;
}

const char* region_name(Region r) {
    switch (r) {
        case Region::Early:
            return "early";
        case Region::Middle:
            return "middle";
        case Region::Late:
            return "late";
    }
    return "?";
}

OneSampleTest one_sample_t_test(double mean, double m2, int64_t n, double mu) {
    const double df = static_cast<double>(n - 1);
    if (!std::isfinite(mean) || !std::isfinite(m2) || n == 0) return {kNaN, df, kNaN, kNaN, n};
    if (n < 2) return {kNaN, df, kNaN, mean, n};
    const double d = mean - mu;
    const double se = std::sqrt(m2 / df / static_cast<double>(n));
    // Values that agree to within their rounding: m2 is then the rounding noise of the running
    // sums (its error is ~n (eps |mean|)^2, so sd's is ~eps |mean|), not the data's spread, and
    // summing in another order (shards merged) gives another noise. They count as constant.
    const double rounding =
        16 * static_cast<double>(n) * std::numeric_limits<double>::epsilon() * std::abs(mean);
    if (se * std::sqrt(static_cast<double>(n)) <= rounding) {
        // scipy on constant values: d / 0 = +-inf with p = 0, or 0 / 0 = NaN
        if (d == 0) return {kNaN, df, kNaN, mean, n};
        return {d > 0 ? INFINITY : -INFINITY, df, 0.0, mean, n};
    }
    const double t = d / se;
    return {t, df, student_t_two_sided_p(t, df), mean, n};
}

OneSampleTest one_sample_t_test(std::span<const double> x, double mu) {
    const int64_t n = static_cast<int64_t>(x.size());
    for (double v : x)
        if (!std::isfinite(v)) return {kNaN, static_cast<double>(n - 1), kNaN, kNaN, n};
    if (n == 0) return one_sample_t_test(kNaN, kNaN, 0, mu);
    const double mean = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(n);
    double m2 = 0;
    for (double v : x) m2 += (v - mean) * (v - mean);
    return one_sample_t_test(mean, m2, n, mu);
}

double chi_square_sf_even(double x, int64_t k) {
    SS_CHECK(k >= 1 && x >= 0, "chi_square_sf_even: need k >= 1 and x >= 0");
    if (std::isinf(x)) return 0.0;
    const double h = x / 2;
    if (h == 0) return 1.0;
    // sum_{i<k} exp(-h + i ln h - ln i!), each term in the log domain so neither exp(-h) nor
    // h^i under- or overflows on its own; the terms are positive, so the sum has no
    // cancellation.
    const double log_h = std::log(h);
    double sum = 0;
    for (int64_t i = 0; i < k; ++i) {
        const double di = static_cast<double>(i);
        sum += std::exp(-h + di * log_h - std::lgamma(di + 1));
    }
    return std::min(1.0, sum);
}

FisherCombined fisher_combined(std::span<const double> p_values, double offset) {
    SS_CHECK(std::isfinite(offset) && offset >= 0, "fisher_combined: offset must be >= 0");
    double chi2 = 0;
    int64_t k = 0;
    for (double p : p_values) {
        if (std::isnan(p)) continue;
        SS_CHECK(p >= 0 && p <= 1, "fisher_combined: p-value ", p, " outside [0, 1]");
        chi2 -= 2 * std::log(p + offset);
        ++k;
    }
    if (k == 0) return {0.0, 0.0, kNaN, 0};
    return {chi2, 2.0 * static_cast<double>(k), chi_square_sf_even(chi2, k), k};
}

RegionSummary summarize_regions(std::span<const int64_t> layers, std::span<const double> values,
                                const LayerRegions& regions, double level) {
    SS_CHECK(layers.size() == values.size(), "summarize_regions: ", layers.size(), " layers, ",
             values.size(), " values");
    std::array<std::vector<double>, k_regions> by_region;
    std::vector<double> all, all_layers;
    int64_t first = -1, last = -1;
    double first_value = kNaN, last_value = kNaN;
    for (size_t i = 0; i < values.size(); ++i) {
        SS_CHECK(i == 0 || layers[i] > layers[i - 1], "summarize_regions: layers not ascending");
        if (!std::isfinite(values[i])) continue;
        by_region[static_cast<size_t>(region_of(regions, layers[i]))].push_back(values[i]);
        all.push_back(values[i]);
        all_layers.push_back(static_cast<double>(layers[i]));
        if (first < 0) first = layers[i], first_value = values[i];
        last = layers[i], last_value = values[i];
    }
    RegionSummary s;
    for (size_t r = 0; r < by_region.size(); ++r) {
        s.region[r] = mean_interval(by_region[r], level);
        s.vs_zero[r] = one_sample_t_test(by_region[r]);
    }
    s.all = mean_interval(all, level);
    s.all_vs_zero = one_sample_t_test(all);
    for (size_t k = 0; k < k_region_pairs.size(); ++k)
        s.welch[k] = welch_t_test(by_region[static_cast<size_t>(k_region_pairs[k][0])],
                                  by_region[static_cast<size_t>(k_region_pairs[k][1])]);
    s.peak_ratio = s.region[static_cast<size_t>(Region::Middle)].mean /
                   s.region[static_cast<size_t>(Region::Early)].mean;
    s.trend = spearman(all_layers, all);
    s.first_layer = first;
    s.last_layer = last;
    s.fold_change = first >= 0 && last > first ? last_value / first_value : kNaN;
    return s;
}

}  // namespace sinkscope::metrics
