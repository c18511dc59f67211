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
            if (end == 1) {
                row[0] = 1;
                continue;
            }
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
    a.n_layers = 1, a.n_heads = 1, a.n_tokens = 20, a.length = 20,
    a.masking = Masking::Bidirectional;
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
    hidden[0][0] = 1;                                          // v_0 = e1
    for (int64_t j = 1; j < T; ++j) hidden[0][j * d + 1] = 1;  // v_j = e2
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
    for (int64_t k = 0; k < T * d; ++k)
        hidden[0][k] = std::sin(1.0 + k), hidden[1][k] = std::cos(k);
    std::vector<std::vector<double>> values(1);
    for (int64_t h = 0; h < H; ++h)
        values[0].insert(values[0].end(), hidden[0].begin(), hidden[0].end());
    ValueSpaceAccumulator acc(1);
    acc.add(a, hidden, d, values, d);
    const auto& L = acc.layers()[0];
    EXPECT_WITHIN(L.sum_rel_magnitude_value / L.n_value, L.sum_rel_magnitude_hidden / L.n_hidden,
                  testutil::kF64SumRel);
    // Transformation magnitude is the mean row norm of h1 - h0.
    double expect = 0;
    for (int64_t i = 0; i < T; ++i) {
        double s = 0;
        for (int64_t k = 0; k < d; ++k)
            s += std::pow(hidden[1][i * d + k] - hidden[0][i * d + k], 2);
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
    for (int64_t k = 0; k < T * d; ++k)
        hid[0][k] = std::sin(0.3 * k), hid[1][k] = std::sin(0.7 * k);
    ValueSpaceAccumulator one(1), p(1), q(1);
    one.add(a1, hid, d, {}, 0);
    one.add(a2, hid, d, {}, 0);
    p.add(a1, hid, d, {}, 0);
    q.add(a2, hid, d, {}, 0);
    p.merge(q);
    EXPECT_DOUBLE_EQ(p.layers()[0].sum_rel_magnitude_hidden,
                     one.layers()[0].sum_rel_magnitude_hidden);
    EXPECT_DOUBLE_EQ(p.layers()[0].sum_alignment, one.layers()[0].sum_alignment);
    EXPECT_EQ(p.layers()[0].n_hidden, one.layers()[0].n_hidden);
}

// Saving and loading the state reproduces the accumulator exactly.
TEST(ValueSpace, SaveLoadExact) {
    const int64_t T = 6, d = 3;
    auto a = sink_input(2, T, 0.55);
    std::vector<std::vector<double>> hid(2, std::vector<double>(T * d));
    for (int64_t k = 0; k < T * d; ++k)
        hid[0][k] = std::sin(0.9 * k), hid[1][k] = std::cos(0.2 * k);
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

namespace {
// Random attention rows (positive, closed over the visible keys) of H heads.
AttentionInput random_input(int64_t H, int64_t T, Masking m, int64_t window, uint64_t seed) {
    AttentionInput a;
    a.n_layers = 1, a.n_heads = H, a.n_tokens = T, a.length = T, a.masking = m, a.window = window;
    a.pattern.assign(size_t(H * T * T), 0.0);
    uint64_t x = seed;
    auto uniform = [&x] {  // splitmix64 -> [0, 1)
        x += 0x9e3779b97f4a7c15ULL;
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return double((z ^ (z >> 31)) >> 11) * 0x1p-53;
    };
    for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i) {
            double* row = a.pattern.data() + a.offset(0, h, i);
            double sum = 0;
            for (int64_t j = a.key_begin(i); j < a.key_end(i); ++j)
                sum += row[j] = uniform() + (j == 0) * 3;
            for (int64_t j = a.key_begin(i); j < a.key_end(i); ++j) row[j] /= sum;
        }
    return a;
}
}  // namespace

// The blocked matrix products give the per-row sums of spec 8 (reference share over the visible
// keys, alignment over visible off-diagonal pairs) computed here one row at a time. Vectors have
// entries in [0.5, 1.5], so with weights w >= 0 summing to 1 every output component lies in
// [0.5, 1.5] and the two summation orders differ by <= 2 gamma_T * 1.5 per component: relative
// <= 6 gamma_T on each norm and on the dot, so <= 12 gamma_T on rel and, with the cosine's
// two norms, 18 gamma_T on the direction (plus a few rounded divisions, absorbed by using 32).
TEST(ValueSpace, BlockedProductsMatchRowLoops) {
    const int64_t H = 2, T = 300, d = 5;  // T > one 256-row block
    for (const auto& [m, window] :
         {std::pair{Masking::Causal, int64_t(0)}, std::pair{Masking::Causal, int64_t(40)},
          std::pair{Masking::Bidirectional, int64_t(0)}}) {
        const auto a = random_input(H, T, m, window, 11);
        std::vector<std::vector<double>> hidden(2, std::vector<double>(T * d));
        std::vector<std::vector<double>> values(1, std::vector<double>(H * T * d));
        uint64_t x = 5;
        auto next = [&x] {
            return 0.5 + double((x = x * 6364136223846793005ULL + 1) >> 11) * 0x1p-53;
        };
        for (auto& v : hidden[0]) v = next();
        for (auto& v : hidden[1]) v = next();
        for (auto& v : values[0]) v = next();
        ValueSpaceAccumulator acc(1);
        acc.add(a, hidden, d, values, d);
        const auto& L = acc.layers()[0];

        // Reference: head average, R, and the sums row by row.
        std::vector<double> avg(size_t(T * T), 0.0);
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < T; ++i)
                for (int64_t j = a.key_begin(i); j < a.key_end(i); ++j)
                    avg[i * T + j] += a.pattern[a.offset(0, h, i) + j] / double(H);
        const auto ref = reference_tokens(avg, a, {});
        std::vector<char> is_ref(size_t(T), 0);
        for (auto j : ref) is_ref[size_t(j)] = 1;
        auto share = [&](const double* w, const double* v, int64_t i, double& rel, double& dir) {
            std::vector<double> post(size_t(d), 0.0), r(size_t(d), 0.0);
            bool any = false;
            for (int64_t j = a.key_begin(i); j < a.key_end(i); ++j) {
                for (int64_t k = 0; k < d; ++k) post[k] += w[j] * v[j * d + k];
                if (is_ref[size_t(j)]) {
                    any = true;
                    for (int64_t k = 0; k < d; ++k) r[k] += w[j] * v[j * d + k];
                }
            }
            double np = 0, nr = 0, dot = 0;
            for (int64_t k = 0; k < d; ++k)
                np += post[k] * post[k], nr += r[k] * r[k], dot += post[k] * r[k];
            if (!any || nr == 0) return false;
            rel = std::min(1.0, std::sqrt(nr / np));
            dir = (dot / std::sqrt(nr * np) + 1) / 2;
            return true;
        };
        double rel_h = 0, dir_h = 0, rel_v = 0, dir_v = 0;
        int64_t n_h = 0, n_v = 0;
        for (int64_t i = 0; i < T; ++i) {
            if (is_ref[size_t(i)]) continue;
            double rel, dir;
            if (share(avg.data() + i * T, hidden[0].data(), i, rel, dir))
                rel_h += rel, dir_h += dir, ++n_h;
            for (int64_t h = 0; h < H; ++h)
                if (share(a.pattern.data() + a.offset(0, h, i), values[0].data() + h * T * d, i,
                          rel, dir))
                    rel_v += rel, dir_v += dir, ++n_v;
        }
        const double g = testutil::gamma_k(double(T), testutil::kU64);
        ASSERT_EQ(L.n_hidden, n_h);
        ASSERT_EQ(L.n_value, n_v);
        EXPECT_WITHIN(L.sum_rel_magnitude_hidden / n_h, rel_h / n_h, 32 * g);
        EXPECT_WITHIN(L.sum_direction_hidden / n_h, dir_h / n_h, 32 * g);
        EXPECT_WITHIN(L.sum_rel_magnitude_value / n_v, rel_v / n_v, 32 * g);
        EXPECT_WITHIN(L.sum_direction_value / n_v, dir_v / n_v, 32 * g);

        // Alignment: cos(h_i, h_j) of positive vectors; each dot moves by <= 2 gamma_d |h_i||h_j|
        // (Cauchy-Schwarz), so each y by eps = 2 gamma_d + 4u; then |dr| <= (1 + |r|) eps sqrt(N)
        // / sqrt(S_yy), plus the two Pearson evaluations' own rounding, 2 gamma_N each relative.
        std::vector<double> xs, ys;
        const double* hv = hidden[0].data();
        for (int64_t i = 0; i < T; ++i)
            for (int64_t j = a.key_begin(i); j < a.key_end(i); ++j) {
                if (j == i) continue;
                double dot = 0, ni = 0, nj = 0;
                for (int64_t k = 0; k < d; ++k)
                    dot += hv[i * d + k] * hv[j * d + k], ni += hv[i * d + k] * hv[i * d + k],
                        nj += hv[j * d + k] * hv[j * d + k];
                xs.push_back(avg[i * T + j]);
                ys.push_back(dot / std::sqrt(ni * nj));
            }
        const double r = pearson_r(xs, ys);
        double my = 0, syy = 0;
        for (double y : ys) my += y / double(ys.size());
        for (double y : ys) syy += (y - my) * (y - my);
        const double eps = 2 * testutil::gamma_k(double(d), testutil::kU64) + 4 * testutil::kU64;
        const double nn = double(ys.size());
        EXPECT_WITHIN(L.sum_alignment, r,
                      2 * eps * std::sqrt(nn / syy) + 4 * testutil::gamma_k(nn, testutil::kU64));
    }
}

// Layers that do not follow one another (analyze --layers 0,5) come with the pair of states
// around each layer, 2 L in all, instead of L + 1 shared boundaries: the same consecutive states
// written as pairs (h0, h1, h1, h2) give the same sums, bit for bit.
TEST(ValueSpace, PairedStatesEqualConsecutiveOnes) {
    const int64_t T = 6, d = 3, H = 2;
    AttentionInput a = sink_input(H, T, 0.55);
    AttentionInput two = a;  // the same rows in two layers
    two.n_layers = 2;
    two.pattern.insert(two.pattern.end(), a.pattern.begin(), a.pattern.end());
    std::vector<std::vector<double>> consecutive(3, std::vector<double>(T * d));
    for (size_t s = 0; s < consecutive.size(); ++s)
        for (int64_t k = 0; k < T * d; ++k)
            consecutive[s][size_t(k)] = std::sin(0.7 * double(s + 1) + 0.3 * double(k));
    const std::vector<std::vector<double>> paired = {consecutive[0], consecutive[1], consecutive[1],
                                                     consecutive[2]};
    ValueSpaceAccumulator x(2), y(2);
    x.add(two, consecutive, d, {}, 0);
    y.add(two, paired, d, {}, 0);
    for (size_t l = 0; l < 2; ++l) {
        const auto &p = x.layers()[l], &q = y.layers()[l];
        EXPECT_EQ(p.sum_transformation, q.sum_transformation) << l;
        EXPECT_EQ(p.sum_rel_magnitude_hidden, q.sum_rel_magnitude_hidden) << l;
        EXPECT_EQ(p.sum_direction_hidden, q.sum_direction_hidden) << l;
        EXPECT_EQ(p.n_hidden, q.n_hidden) << l;
        EXPECT_GT(p.sum_transformation, 0.0) << l;  // the states differ: a real comparison
    }
    // Anything else is refused.
    EXPECT_THROW(x.add(two, {consecutive[0], consecutive[1]}, d, {}, 0), std::exception);
}
