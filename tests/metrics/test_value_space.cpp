// Value-space analyses (spec 8): reference sets, reference share of the attention output,
// transformation magnitude, alignment; checked on hand-built inputs with known answers.
#include <gtest/gtest.h>

#include <cmath>

#include "sinkscope/metrics/value_space.hpp"
#include "testing.hpp"

using namespace sinkscope::metrics;
namespace testutil = sinkscope::testutil;

namespace {
// One layer, H heads, causal, T tokens; every row puts `sink` on key 0 and spreads the rest
// uniformly over its other visible keys (row 0 puts everything on key 0).
AttentionInput sink_input(int64_t H, int64_t T, double sink, Masking m = Masking::Causal) {
    AttentionInput a;
    a.n_layers = 1, a.n_heads = H, a.n_tokens = T, a.length = T, a.masking = m;
    a.pattern.assign(size_t(H * T * T), 0.0);
    for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i) {
            double* row = a.pattern.data() + a.offset(0, h, i);
            int64_t end = a.key_end(i);
            if (end == 1) { row[0] = 1; continue; }
            row[0] = sink;
            for (int64_t j = 1; j < end; ++j) row[j] = (1 - sink) / double(end - 1);
        }
    return a;
}
}  // namespace

// A key that receives most of every row's mass is the only reference token.
TEST(ValueSpace, ReferenceSetSink) {
    auto a = sink_input(2, 10, 0.9);
    std::vector<double> avg(a.pattern.begin(), a.pattern.begin() + 100);
    EXPECT_EQ(reference_tokens(avg, a, {}), (std::vector<int64_t>{0}));
}

// Without any column above 0.1 the top 10% are used; with too many, the cap (30%) applies.
TEST(ValueSpace, ReferenceSetFallbackAndCap) {
    AttentionInput a;
    a.n_layers = 1, a.n_heads = 1, a.n_tokens = 20, a.length = 20, a.masking = Masking::Bidirectional;
    std::vector<double> avg(400, 1.0 / 20);
    avg[0 * 20 + 7] += 0.001, avg[0 * 20 + 3] += 0.0005;  // tiny preference: 7 then 3
    auto r = reference_tokens(avg, a, {});
    EXPECT_EQ(r, (std::vector<int64_t>{7, 3}));
    a.n_tokens = a.length = 5;
    std::vector<double> flat(25, 0.2);
    EXPECT_EQ(reference_tokens(flat, a, {}).size(), 1u);  // int(0.3 * 5) = 1
}

// With the sink's vector orthogonal to all others, the reference share has a closed form:
// post = a e1 + (1-a) e2, ref = a e1 -> rel = a/sqrt(a^2+(1-a)^2), direction = (rel + 1)/2.
TEST(ValueSpace, ReferenceShareClosedForm) {
    const int64_t T = 6, d = 3;
    const double s = 0.7;
    auto a = sink_input(1, T, s);
    std::vector<std::vector<double>> hidden(2, std::vector<double>(T * d, 0.0));
    hidden[0][0] = 1;                                           // v_0 = e1
    for (int64_t j = 1; j < T; ++j) hidden[0][j * d + 1] = 1;   // v_j = e2
    hidden[1] = hidden[0];
    ValueSpaceAccumulator acc(1);
    acc.add(a, hidden, d, {}, 0);
    const auto& L = acc.layers()[0];
    double rel = s / std::sqrt(s * s + (1 - s) * (1 - s));
    ASSERT_EQ(L.n_hidden, T - 1);  // every non-reference query
    EXPECT_WITHIN(L.sum_rel_magnitude_hidden / L.n_hidden, rel, testutil::kF64SumRel);
    EXPECT_WITHIN(L.sum_direction_hidden / L.n_hidden, (rel + 1) / 2, testutil::kF64SumRel);
    EXPECT_EQ(L.sum_reference_count, 1.0);
    EXPECT_EQ(L.sum_transformation, 0.0);  // h^{l+1} == h^l
}

// The true-V variant with values equal to the hidden states per head reproduces the hidden one.
TEST(ValueSpace, ValueVariantMatchesHiddenWhenEqual) {
    const int64_t T = 5, d = 2, H = 3;
    auto a = sink_input(H, T, 0.6);
    std::vector<std::vector<double>> hidden(2, std::vector<double>(T * d));
    for (int64_t k = 0; k < T * d; ++k) hidden[0][k] = std::sin(1.0 + k), hidden[1][k] = std::cos(k);
    std::vector<std::vector<double>> values(1);
    for (int64_t h = 0; h < H; ++h) values[0].insert(values[0].end(), hidden[0].begin(), hidden[0].end());
    ValueSpaceAccumulator acc(1);
    acc.add(a, hidden, d, values, d);
    const auto& L = acc.layers()[0];
    EXPECT_WITHIN(L.sum_rel_magnitude_value / L.n_value, L.sum_rel_magnitude_hidden / L.n_hidden,
                  testutil::kF64SumRel);
    // Transformation magnitude is the mean row norm of h1 - h0.
    double expect = 0;
    for (int64_t i = 0; i < T; ++i) {
        double s = 0;
        for (int64_t k = 0; k < d; ++k) s += std::pow(hidden[1][i * d + k] - hidden[0][i * d + k], 2);
        expect += std::sqrt(s) / T;
    }
    EXPECT_WITHIN(L.sum_transformation / L.n_transformation, expect, testutil::kF64SumRel);
}

// Pearson r: +1 and -1 on exact linear relations, NaN on a constant sample.
TEST(ValueSpace, PearsonR) {
    EXPECT_WITHIN(pearson_r({1, 2, 3, 4}, {3, 5, 7, 9}), 1.0, testutil::kFewOps);
    EXPECT_WITHIN(pearson_r({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0, testutil::kFewOps);
    EXPECT_TRUE(std::isnan(pearson_r({1, 1, 1}, {1, 2, 3})));
    EXPECT_WITHIN(pearson_r({1, 2, 3}, {1, 3, 2}), 0.5, testutil::kFewOps);
}

// Merging two accumulators equals accumulating both inputs in one.
TEST(ValueSpace, MergeEqualsSinglePass) {
    const int64_t T = 7, d = 4;
    auto a1 = sink_input(2, T, 0.5), a2 = sink_input(2, T, 0.8);
    std::vector<std::vector<double>> hid(2, std::vector<double>(T * d));
    for (int64_t k = 0; k < T * d; ++k) hid[0][k] = std::sin(0.3 * k), hid[1][k] = std::sin(0.7 * k);
    ValueSpaceAccumulator one(1), p(1), q(1);
    one.add(a1, hid, d, {}, 0);
    one.add(a2, hid, d, {}, 0);
    p.add(a1, hid, d, {}, 0);
    q.add(a2, hid, d, {}, 0);
    p.merge(q);
    EXPECT_DOUBLE_EQ(p.layers()[0].sum_rel_magnitude_hidden, one.layers()[0].sum_rel_magnitude_hidden);
    EXPECT_DOUBLE_EQ(p.layers()[0].sum_alignment, one.layers()[0].sum_alignment);
    EXPECT_EQ(p.layers()[0].n_hidden, one.layers()[0].n_hidden);
}

// Saving and loading the state reproduces the accumulator exactly.
TEST(ValueSpace, SaveLoadExact) {
    const int64_t T = 6, d = 3;
    auto a = sink_input(2, T, 0.55);
    std::vector<std::vector<double>> hid(2, std::vector<double>(T * d));
    for (int64_t k = 0; k < T * d; ++k) hid[0][k] = std::sin(0.9 * k), hid[1][k] = std::cos(0.2 * k);
    ValueSpaceAccumulator acc(1), back(1);
    acc.add(a, hid, d, {}, 0);
    sinkscope::BinaryWriter w;
    acc.save(w);
    sinkscope::BinaryReader r(w.bytes(), "state");
    back.load(r);
    EXPECT_EQ(back.layers()[0].sum_alignment, acc.layers()[0].sum_alignment);
    EXPECT_EQ(back.layers()[0].n_hidden, acc.layers()[0].n_hidden);
    ValueSpaceAccumulator wrong(2);
    sinkscope::BinaryReader r2(w.bytes(), "state");
    EXPECT_THROW(wrong.load(r2), sinkscope::InputError);
}
