// Sink sets, sink-removal KL and sink concentration (spec 8, 10.k; PAPERS.md B.5).
#include <cmath>

#include <gtest/gtest.h>

#include "sinkscope/metrics/sink_kl.hpp"
#include "synthetic_attention.hpp"
#include "testing.hpp"

using namespace sinkscope::metrics;
namespace testutil = sinkscope::testutil;

namespace {
// One layer, heads that differ only in their sink mass s_h on key 0: every row is
// s_h at key 0 and (1 - s_h) * content over the other visible keys.
AttentionInput sink_only_heads(Masking masking, const std::vector<double>& sink_mass, int64_t n) {
    AttentionInput in;
    in.n_layers = 1;
    in.n_heads = static_cast<int64_t>(sink_mass.size());
    in.n_tokens = in.length = n;
    in.masking = masking;
    in.pattern.assign(static_cast<size_t>(in.n_heads * n * n), 0.0);
    for (int64_t h = 0; h < in.n_heads; ++h)
        for (int64_t i = 0; i < n; ++i) {
            double* r = in.pattern.data() + in.offset(0, h, i);
            const int64_t ke = in.key_end(i);
            if (ke == 1) {
                r[0] = 1.0;
                continue;
            }
            double csum = 0;
            for (int64_t j = 1; j < ke; ++j) csum += 1.0 + 0.3 * static_cast<double>(j % 4);
            r[0] = sink_mass[static_cast<size_t>(h)];
            for (int64_t j = 1; j < ke; ++j)
                r[j] = (1.0 - r[0]) * (1.0 + 0.3 * static_cast<double>(j % 4)) / csum;
        }
    return in;
}
}  // namespace

// numpy.percentile with linear interpolation (values from numpy 1.24.2).
TEST(SinkKl, PercentileMatchesNumpy) {
    const std::vector<double> v{0.3, 1.7, 0.2, 5.0, 2.2, 0.9, 4.1};
    EXPECT_REL_WITHIN(percentile_linear(v, 80), 3.720000000000001, testutil::kFewOps);
    EXPECT_REL_WITHIN(percentile_linear(v, 90), 4.46, testutil::kFewOps);
    EXPECT_REL_WITHIN(percentile_linear(v, 95), 4.7299999999999995, testutil::kFewOps);
    EXPECT_EQ(percentile_linear(v, 100), 5.0);
    EXPECT_EQ(percentile_linear(v, 0), 0.2);
}

// S_t keeps the keys at or above the percentile: the top 1 of 7 at t = 0.9, the top 2 at 0.8.
TEST(SinkKl, SinkSetIsTopPercentile) {
    const std::vector<double> v{0.3, 1.7, 0.2, 5.0, 2.2, 0.9, 4.1};
    EXPECT_EQ(sink_set(v, 0.9), (std::vector<int64_t>{3}));
    EXPECT_EQ(sink_set(v, 0.8), (std::vector<int64_t>{3, 6}));
    EXPECT_EQ(sink_set(v, 0.5), (std::vector<int64_t>{1, 3, 4, 6}));
}

// Heads that differ only in sink mass agree exactly once the sink is removed, so the KL
// reduction is positive and equals the baseline KL (spec 8 sign: positive = more agreement).
TEST(SinkKl, ReductionPositiveWhenHeadsDifferOnlyInSinkMass) {
    for (auto masking : {Masking::Bidirectional, Masking::Causal}) {
        const auto in = sink_only_heads(masking, {0.9, 0.5, 0.2, 0.7}, 12);
        for (double t : k_sink_percentiles) {
            for (bool compat : {false, true}) {
                const auto r = sink_kl(in, 0, t, compat);
                EXPECT_GT(r.kl_before, 1e-3) << t << compat;
                EXPECT_WITHIN(r.kl_after, 0.0, testutil::kF64SumRel) << t << compat;
                EXPECT_WITHIN(r.kl_reduction, r.kl_before, testutil::kF64SumRel);
                EXPECT_GT(r.kl_reduction, 0.0);
            }
        }
    }
}

// Identical heads: KL is 0 with and without sinks.
TEST(SinkKl, IdenticalHeadsHaveNoReduction) {
    const auto in = sink_only_heads(Masking::Bidirectional, {0.6, 0.6, 0.6}, 10);
    const auto r = sink_kl(in, 0, 0.9, false);
    EXPECT_WITHIN(r.kl_before, 0.0, testutil::kFewOps);
    EXPECT_WITHIN(r.kl_reduction, 0.0, testutil::kFewOps);
}

// With S = {0}, the principled concentration is the mean sink mass over heads and rows, and the
// direct sink mass on s = 0 is the same mean; compat reports the first 4 heads in percent.
TEST(SinkKl, ConcentrationAndDirectSinkMass) {
    const std::vector<double> s{0.9, 0.5, 0.2, 0.7, 0.1};
    const auto in = sink_only_heads(Masking::Bidirectional, s, 12);
    const auto r = sink_kl(in, 0, 0.95, false);
    ASSERT_EQ(r.n_sinks, 1);
    const double mean_all = (0.9 + 0.5 + 0.2 + 0.7 + 0.1) / 5;
    EXPECT_WITHIN(r.concentration, mean_all, testutil::kF64ShortSumRel);
    EXPECT_WITHIN(direct_sink_mass(in, 0, 0), mean_all, testutil::kF64ShortSumRel);
    const auto c = sink_kl(in, 0, 0.95, true);
    EXPECT_REL_WITHIN(c.concentration, 100.0 * (0.9 + 0.5 + 0.2 + 0.7) / 4,
                      testutil::kF64ShortSumRel);
}

// Causal row 0 sees only the sink: excluded and counted (10.k); compat keeps all n keys.
TEST(SinkKl, CausalRowWithoutNonSinkKeysIsExcluded) {
    const auto in = sink_only_heads(Masking::Causal, {0.9, 0.5}, 8);
    const auto r = sink_kl(in, 0, 0.95, false);
    EXPECT_EQ(r.rows_excluded, 1);
    EXPECT_EQ(r.rows_used, 7);
    const auto c = sink_kl(in, 0, 0.95, true);
    EXPECT_EQ(c.rows_excluded, 0);
    EXPECT_EQ(c.rows_used, 8);
}

// The two row sets of kl_before (--kl-rows): on causal attention with a sink, the top keys by
// received mass are the first ones, so rows 0..k-1 see no key outside S_t and are excluded.
// paired: kl_before over the rows that give kl_after; all: over every row. Both against a direct
// evaluation of mean_h KL(A_h[i] || mean_h A_h[i]) here; kl_after does not depend on the mode.
TEST(SinkKl, KlBeforeRowSets) {
    const int64_t n = 24, H = 3;
    const auto in = testutil::causal_sink_attention(1, H, n, {.sink_boost = 1.5}, 7);
    std::vector<double> kl_row(static_cast<size_t>(n), 0.0);  // sum over heads of row i's KL
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j <= i; ++j) {
            double m = 0;
            for (int64_t h = 0; h < H; ++h) m += in.pattern[in.offset(0, h, i) + j] / H;
            for (int64_t h = 0; h < H; ++h) {
                const double p = in.pattern[in.offset(0, h, i) + j];
                if (p > 0) kl_row[static_cast<size_t>(i)] += p * std::log(p / m);
            }
        }
    const auto paired = sink_kl_all(in, 0, {0.8}, false, false).front();
    const auto all = sink_kl_all(in, 0, {0.8}, false, true).front();
    ASSERT_GT(paired.rows_excluded, 0);
    EXPECT_EQ(paired.rows_excluded + paired.rows_used, n);
    double used = 0, every = 0;
    for (int64_t i = 0; i < n; ++i) {
        every += kl_row[static_cast<size_t>(i)];
        if (i >= paired.rows_excluded) used += kl_row[static_cast<size_t>(i)];  // rows 0..k-1 out
    }
    const double want_paired = used / double(paired.rows_used * H),
                 want_all = every / double(n * H);
    EXPECT_WITHIN(paired.kl_before, want_paired, testutil::kF64SumRel * want_paired);
    EXPECT_WITHIN(all.kl_before, want_all, testutil::kF64SumRel * want_all);
    EXPECT_NE(paired.kl_before, all.kl_before);
    EXPECT_EQ(paired.kl_after, all.kl_after);
    EXPECT_EQ(all.kl_reduction, all.kl_before - all.kl_after);
    EXPECT_EQ(all.rows_excluded, paired.rows_excluded);
}

// Compat's 20-row shortcut (B.5): rows linspace(0, n-1, 20) when n > 20, all rows otherwise.
TEST(SinkKl, CompatUsesTwentyRows) {
    const auto in = sink_only_heads(Masking::Bidirectional, {0.9, 0.5}, 30);
    EXPECT_EQ(sink_kl(in, 0, 0.9, true).rows_used, 20);
    EXPECT_EQ(sink_kl(in, 0, 0.9, false).rows_used, 30);
}
