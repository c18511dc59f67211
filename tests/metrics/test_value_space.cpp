// Value-space analyses (spec 8): reference sets, reference share of the attention output (pooled
// and per head), transformation magnitude, alignment, and the entropy-magnitude and PCA
// correlations of PAPERS.md B.7; checked on hand-built inputs with known answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Dense>

#include "sinkscope/analysis/options.hpp"
#include "sinkscope/analysis/registry.hpp"
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
        std::vector<ValueSpaceHead> per_head(static_cast<size_t>(H));
        for (int64_t i = 0; i < T; ++i) {
            if (is_ref[size_t(i)]) continue;
            double rel, dir;
            if (share(avg.data() + i * T, hidden[0].data(), i, rel, dir))
                rel_h += rel, dir_h += dir, ++n_h;
            for (int64_t h = 0; h < H; ++h)
                if (share(a.pattern.data() + a.offset(0, h, i), values[0].data() + h * T * d, i,
                          rel, dir)) {
                    rel_v += rel, dir_v += dir, ++n_v;
                    auto& x = per_head[size_t(h)];
                    x.sum_rel_magnitude += rel, x.sum_direction += dir, ++x.n;
                }
        }
        const double g = testutil::gamma_k(double(T), testutil::kU64);
        ASSERT_EQ(L.n_hidden, n_h);
        ASSERT_EQ(L.n_value, n_v);
        EXPECT_WITHIN(L.sum_rel_magnitude_hidden / n_h, rel_h / n_h, 32 * g);
        EXPECT_WITHIN(L.sum_direction_hidden / n_h, dir_h / n_h, 32 * g);
        EXPECT_WITHIN(L.sum_rel_magnitude_value / n_v, rel_v / n_v, 32 * g);
        EXPECT_WITHIN(L.sum_direction_value / n_v, dir_v / n_v, 32 * g);
        // Per head: the same sums over that head's rows alone.
        ASSERT_EQ(L.heads.size(), size_t(H));
        for (int64_t h = 0; h < H; ++h) {
            const auto &got = L.heads[size_t(h)], &want = per_head[size_t(h)];
            ASSERT_EQ(got.n, want.n) << h;
            EXPECT_WITHIN(got.sum_rel_magnitude / got.n, want.sum_rel_magnitude / want.n, 32 * g);
            EXPECT_WITHIN(got.sum_direction / got.n, want.sum_direction / want.n, 32 * g);
        }

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

// --- Entropy-magnitude correlation (PAPERS.md B.7) -------------------------------------------

// Row entropy in nats over the entries above the floor, closed by their own sum: ln 4 for a
// uniform row of 4, zeros skipped (principled), entries at most 100 float32 eps dropped and the
// rest renormalised (compat), NaN without any entry. Each value is a few correctly rounded logs
// and at most three products of magnitude < 1: within 8 u of exact, so 16 u of each other.
TEST(ValueSpace, RowEntropy) {
    const double u16 = 16 * testutil::kU64;
    const double quarter[] = {0.25, 0.25, 0.25, 0.25};
    EXPECT_WITHIN(row_entropy(quarter, 0, 4, 0.0), std::log(4.0), u16);
    EXPECT_WITHIN(row_entropy(quarter, 1, 3, 0.0), std::log(2.0), u16);  // only [begin, end)
    const double with_zero[] = {0.5, 0.0, 0.5};
    EXPECT_WITHIN(row_entropy(with_zero, 0, 3, 0.0), std::log(2.0), u16);
    const double floor = 100.0 * double(FLT_EPSILON);
    const double leak[] = {0.5, 0.5 - 1e-6, 1e-6};
    auto closed = [](std::vector<double> p) {  // -sum q ln q of q = p / sum p
        double s = 0, h = 0;
        for (double x : p) s += x;
        for (double x : p) h -= x / s * std::log(x / s);
        return h;
    };
    EXPECT_WITHIN(row_entropy(leak, 0, 3, floor), closed({leak[0], leak[1]}), u16);
    EXPECT_WITHIN(row_entropy(leak, 0, 3, 0.0), closed({leak[0], leak[1], leak[2]}), u16);
    // The leaked 1e-6 adds about 1e-6 (1 - ln 1e-6) ~ 1.5e-5 nats: the two rules differ.
    EXPECT_GT(row_entropy(leak, 0, 3, 0.0) - row_entropy(leak, 0, 3, floor), 1e-5);
    const double zeros[] = {0.0, 0.0};
    EXPECT_TRUE(std::isnan(row_entropy(zeros, 0, 2, 0.0)));
    const double tiny[] = {1e-6, 1e-6};
    EXPECT_TRUE(std::isnan(row_entropy(tiny, 0, 2, floor)));
}

namespace {
// One layer, one head, bidirectional, 4 tokens whose head-average rows have entropies
// (0 or nearly 0, ln 2, 0, ln 2): row 0 puts 1e-6 on key 1 (`leak`), rows 1 and 3 split
// evenly over two keys, row 2 is one-hot. Magnitudes ||h1_i - h0_i|| = i + 1 exactly (h0 = 0,
// h1_i = (i + 1) e_1; sqrt((i+1)^2) is exact).
struct EntropyCase {
    AttentionInput a;
    std::vector<std::vector<double>> hidden;
    static constexpr int64_t T = 4, d = 2;
};
EntropyCase entropy_case(double leak, std::vector<double> magnitudes = {1, 2, 3, 4}) {
    EntropyCase c;
    auto& a = c.a;
    a.n_layers = 1, a.n_heads = 1, a.n_tokens = a.length = c.T, a.masking = Masking::Bidirectional;
    a.pattern = {1 - leak, leak, 0,   0,  //
                 0.5,      0.5,  0,   0,  //
                 0,        0,    1,   0,  //
                 0,        0,    0.5, 0.5};
    c.hidden.assign(2, std::vector<double>(size_t(c.T * c.d), 0.0));
    for (int64_t i = 0; i < c.T; ++i) c.hidden[1][size_t(i * c.d)] = magnitudes[size_t(i)];
    return c;
}
}  // namespace

// With entropies (0, ln 2, 0, ln 2) and magnitudes (1, 2, 3, 4) the centred vectors are
// (ln 2 / 2)(-1, 1, -1, 1) and (-1.5, -0.5, 0.5, 1.5): r = ln 2 / (ln 2 sqrt 5) = 1/sqrt 5. The
// compat rule drops row 0's leak of 1e-6 (below 100 float32 eps), so compat gives exactly that
// case; principled keeps it (H_0 ~ 1.5e-5), which moves r by ~1e-5. Pearson r of 4 values of
// magnitude <= 4: within 16 u of exact.
TEST(ValueSpace, EntropyMagnitudeHandCase) {
    const double tol = 16 * testutil::kU64;
    auto c = entropy_case(1e-6);
    ValueSpaceOptions compat;
    compat.compat = true;
    ValueSpaceAccumulator x(1, compat), y(1);
    x.add(c.a, c.hidden, c.d, {}, 0);
    y.add(c.a, c.hidden, c.d, {}, 0);
    const auto &X = x.layers()[0], &Y = y.layers()[0];
    ASSERT_EQ(X.n_entropy_magnitude, 1);
    EXPECT_EQ(X.n_entropy_magnitude_undefined, 0);
    EXPECT_WITHIN(X.sum_entropy_magnitude, 1 / std::sqrt(5.0), tol);
    // Principled: H_0 = binary entropy of (1 - 1e-6, 1e-6), the others as above; r by hand.
    const double e = 1e-6, h0 = -(1 - e) * std::log(1 - e) - e * std::log(e), l2 = std::log(2.0);
    const double hs[] = {h0, l2, 0, l2}, ms[] = {1, 2, 3, 4};
    const double mh = (h0 + 2 * l2) / 4, mm = 2.5;
    double sxy = 0, sxx = 0, syy = 0;
    for (int k = 0; k < 4; ++k)
        sxy += (hs[k] - mh) * (ms[k] - mm), sxx += (hs[k] - mh) * (hs[k] - mh),
            syy += (ms[k] - mm) * (ms[k] - mm);
    ASSERT_EQ(Y.n_entropy_magnitude, 1);
    EXPECT_WITHIN(Y.sum_entropy_magnitude, sxy / std::sqrt(sxx * syy), tol);
    EXPECT_GT(std::abs(Y.sum_entropy_magnitude - 1 / std::sqrt(5.0)), 1e-6);
    // Magnitudes reversed: r changes sign.
    auto rev = entropy_case(0, {4, 3, 2, 1});
    ValueSpaceAccumulator z(1);
    z.add(rev.a, rev.hidden, rev.d, {}, 0);
    EXPECT_WITHIN(z.layers()[0].sum_entropy_magnitude, -1 / std::sqrt(5.0), tol);
}

// r is undefined (counted, not averaged) when every token has the same magnitude or the same
// entropy; the mean over inputs takes the defined inputs only.
TEST(ValueSpace, EntropyMagnitudeUndefined) {
    auto flat = entropy_case(0, {2, 2, 2, 2});
    auto good = entropy_case(0);
    ValueSpaceAccumulator acc(1);
    acc.add(flat.a, flat.hidden, flat.d, {}, 0);
    acc.add(good.a, good.hidden, good.d, {}, 0);
    auto same_entropy = good;  // every row splits evenly over two keys
    same_entropy.a.pattern = {0.5, 0.5, 0, 0, 0.5, 0.5, 0, 0, 0, 0, 0.5, 0.5, 0, 0, 0.5, 0.5};
    acc.add(same_entropy.a, same_entropy.hidden, same_entropy.d, {}, 0);
    const auto& L = acc.layers()[0];
    EXPECT_EQ(L.n_entropy_magnitude, 1);
    EXPECT_EQ(L.n_entropy_magnitude_undefined, 2);
    EXPECT_WITHIN(L.sum_entropy_magnitude, 1 / std::sqrt(5.0), 16 * testutil::kU64);
}

// --- PCA correlation (PAPERS.md B.7) -----------------------------------------------------------

namespace {
// 9 samples x 4 features: orthogonal zero-mean columns of squared norms 14, 6.5, 1.625 and 0.06,
// so the principal components are the columns themselves, in that order, and each column's
// largest |entry| is positive (3, 2, 1): the expected scores are col_k / ||col_k||, signs
// included.
std::vector<double> orthogonal_columns(int64_t p_total) {
    const double cols[4][9] = {{3, -1, -2, 0, 0, 0, 0, 0, 0},
                               {0, 0, 0, 2, -0.5, -1.5, 0, 0, 0},
                               {0, 0, 0, 0, 0, 0, 1, -0.25, -0.75},
                               {0.1, 0.1, 0.1, -0.1, -0.1, -0.1, 0, 0, 0}};
    std::vector<double> x(size_t(9 * p_total), 0.0);  // [9, p_total] row-major; extra columns 0
    for (int64_t i = 0; i < 9; ++i)
        for (int64_t c = 0; c < 4; ++c) x[size_t(i * p_total + c)] = cols[c][i];
    return x;
}
}  // namespace

// Both routes (the [p, p] Gram when the samples outnumber the features, the [n, n] one
// otherwise: 6 zero columns added) give the columns. Rounding moves the Gram by at most tau =
// 8 (p + n) u ||X_c||_F^2 (the implementation's rounding level), so each eigenvector by at most
// tau / gap (Davis-Kahan), gap = min(14 - 6.5, 6.5 - 1.625, 1.625 - 0.06) = 1.565; and the
// normalised score by twice that.
TEST(ValueSpace, PrincipalScoresOfOrthogonalColumns) {
    const double frob2 = 14 + 6.5 + 1.625 + 0.06;
    for (int64_t p : {4, 10}) {
        const auto x = orthogonal_columns(p);
        const auto s = principal_scores(x.data(), 9, p, p, 3);
        ASSERT_EQ(s.size(), 3u) << p;
        const double tol = 2 * 8.0 * double(p + 9) * testutil::kU64 * frob2 / 1.565;
        for (int k = 0; k < 3; ++k) {
            double norm = 0;
            for (int64_t i = 0; i < 9; ++i) norm += x[size_t(i * p + k)] * x[size_t(i * p + k)];
            norm = std::sqrt(norm);
            ASSERT_EQ(s[size_t(k)].size(), 9u);
            for (int64_t i = 0; i < 9; ++i)
                EXPECT_WITHIN(s[size_t(k)][size_t(i)], x[size_t(i * p + k)] / norm, tol)
                    << "p " << p << " component " << k << " sample " << i;
        }
    }
}

// The sign convention makes the scores a property of the data: -X gives the scores of X bit for
// bit (the centred -X is the exact negation, so the Gram matrix is the same), and every score's
// largest |entry| is positive. On random data, so that Eigen's own signs vary.
TEST(ValueSpace, PrincipalScoresSignConvention) {
    uint64_t state = 17;
    auto next = [&state] {
        return double((state = state * 6364136223846793005ULL + 1442695040888963407ULL) >> 11) *
                   0x1p-53 -
               0.5;
    };
    for (const auto& [n, p] : {std::pair<int64_t, int64_t>{12, 5}, {6, 9}, {20, 20}}) {
        for (int trial = 0; trial < 5; ++trial) {
            std::vector<double> x(size_t(n * p)), neg(size_t(n * p));
            for (size_t k = 0; k < x.size(); ++k) neg[k] = -(x[k] = next());
            const auto s = principal_scores(x.data(), n, p, p, 3);
            const auto t = principal_scores(neg.data(), n, p, p, 3);
            ASSERT_EQ(s.size(), 3u);
            EXPECT_EQ(s, t) << n << "x" << p;
            for (const auto& u : s) {
                double top = 0;
                for (double v : u)
                    if (std::abs(v) > std::abs(top)) top = v;
                EXPECT_GT(top, 0.0);
            }
        }
    }
}

// Undetermined components give no scores: fewer than 4 samples (centred rank <= 2), fewer than
// 3 features, rank 2 data in 5 features (lambda_3 is rounding), and a tie lambda_1 = lambda_2
// (two orthogonal columns of equal norm: any rotation of the pair is as good).
TEST(ValueSpace, PrincipalScoresUndetermined) {
    const std::vector<double> three = {1, 2, 3, 4, 5, 6, 7, 8, 10, 1, 0, 0, 0, 1, 0};  // [3, 5]
    EXPECT_TRUE(principal_scores(three.data(), 3, 5, 5, 3).empty());
    const auto x = orthogonal_columns(4);
    EXPECT_TRUE(principal_scores(x.data(), 9, 2, 4, 3).empty());  // the first 2 columns only
    std::vector<double> rank2(9 * 5);
    for (int64_t i = 0; i < 9; ++i)
        for (int64_t c = 0; c < 5; ++c)
            rank2[size_t(i * 5 + c)] =
                (c + 1) * x[size_t(i * 4)] + (c % 2 ? 0.3 : -0.7) * x[size_t(i * 4 + 1)];
    EXPECT_TRUE(principal_scores(rank2.data(), 9, 5, 5, 3).empty());
    std::vector<double> tie = x;  // column 1 scaled to the norm of column 0: 6.5 -> 14
    for (int64_t i = 0; i < 9; ++i) tie[size_t(i * 4 + 1)] *= std::sqrt(14 / 6.5);
    // sqrt(14 / 6.5) is rounded, so the two norms agree to a few u: a tie at rounding level.
    EXPECT_TRUE(principal_scores(tie.data(), 9, 4, 4, 3).empty());
    // The same data without the tie is determined (the test above is not vacuous).
    EXPECT_EQ(principal_scores(x.data(), 9, 4, 4, 3).size(), 3u);
}

// r_k per component: (x, x) 1, (y, -y) -1, (z, w) 0.5 (PearsonR above): the sign-invariant
// mean is (1 + 1 + 0.5) / 3, the signed one (1 - 1 + 0.5) / 3; no value for undetermined or
// mismatched sets or a constant score.
TEST(ValueSpace, PcaCorrelationMeans) {
    const std::vector<double> x = {1, 2, 3}, y = {3, 1, 2}, ny = {-3, -1, -2}, w = {1, 3, 2};
    const auto r = pca_correlation({x, y, x}, {x, ny, w});
    EXPECT_WITHIN(r.abs_mean, 2.5 / 3, 4 * testutil::kFewOps);
    EXPECT_WITHIN(r.signed_mean, 0.5 / 3, 4 * testutil::kFewOps);
    EXPECT_TRUE(std::isnan(pca_correlation({}, {x, y, x}).abs_mean));
    EXPECT_TRUE(std::isnan(pca_correlation({x, y}, {x, y, x}).signed_mean));
    EXPECT_TRUE(std::isnan(pca_correlation({x, y, x}, {x, y, {1, 1, 1}}).abs_mean));
}

namespace {
// One layer, one head, bidirectional, T = 8 tokens whose rows are multiples of 1/128 summing to
// 1 exactly, so the closed head average is the pattern itself, bit for bit.
AttentionInput dyadic_input(uint64_t seed) {
    const int64_t T = 8;
    AttentionInput a;
    a.n_layers = 1, a.n_heads = 1, a.n_tokens = a.length = T, a.masking = Masking::Bidirectional;
    a.pattern.assign(size_t(T * T), 0.0);
    uint64_t x = seed;
    for (int64_t i = 0; i < T; ++i) {
        int64_t rest = 128;
        for (int64_t j = 0; j < T - 1; ++j) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            const int64_t w = 1 + int64_t((x >> 33) % 15);
            a.pattern[size_t(i * T + j)] = double(w) / 128;
            rest -= w;
        }
        a.pattern[size_t(i * T + T - 1)] = double(rest) / 128;  // >= 128 - 7 * 15 = 23
    }
    return a;
}
}  // namespace

// The hidden states equal to the attention rows (d_model = T) give the attention's own
// components: every r_k is 1 bit for bit (the same computation; sqrt(x^2) = x), so both means
// are exactly 1; with the negated rows too (the sign convention), and with columns permuted
// (the same components up to the Gram matrix's summation order: r_k = 1 to within the
// rounding bound of PrincipalScoresOfOrthogonalColumns, per score entry, times 2 sqrt(T) for
// a correlation of two unit vectors).
TEST(ValueSpace, PcaCorrelationOfTheAttentionItself) {
    const int64_t T = 8;
    const auto a = dyadic_input(3);
    for (int variant = 0; variant < 3; ++variant) {
        std::vector<std::vector<double>> hidden(2, std::vector<double>(size_t(T * T)));
        for (int64_t i = 0; i < T; ++i)
            for (int64_t c = 0; c < T; ++c) {
                const double v = a.pattern[size_t(i * T + c)];
                const int64_t col = variant == 2 ? (c * 3 + 1) % T : c;
                hidden[0][size_t(i * T + col)] = variant == 1 ? -v : v;
            }
        hidden[1] = dyadic_input(4).pattern;  // the state leaving the layer: not analysed here
        ValueSpaceAccumulator acc(1);
        acc.add(a, hidden, T, {}, 0);
        const auto& L = acc.layers()[0];
        ASSERT_EQ(L.n_pca, 1) << variant;
        EXPECT_EQ(L.n_pca_undefined, 0);
        if (variant < 2) {
            EXPECT_EQ(L.sum_pca, 1.0) << variant;
            EXPECT_EQ(L.sum_pca_signed, 1.0) << variant;
            continue;
        }
        // The tolerance from the spectrum of the centred attention.
        Eigen::MatrixXd x(T, T);
        for (int64_t i = 0; i < T; ++i)
            for (int64_t c = 0; c < T; ++c) x(i, c) = a.pattern[size_t(i * T + c)];
        x.rowwise() -= x.colwise().mean();
        const Eigen::VectorXd lam =
            Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(x * x.transpose()).eigenvalues();
        double gap = lam(T - 1);
        for (int k = 1; k <= 3; ++k) gap = std::min(gap, lam(T - k) - lam(T - k - 1));
        const double per_entry = 2 * 8.0 * double(2 * T) * testutil::kU64 * x.squaredNorm() / gap;
        const double tol = 2 * std::sqrt(double(T)) * per_entry;
        EXPECT_WITHIN(L.sum_pca, 1.0, tol);
        EXPECT_WITHIN(L.sum_pca_signed, 1.0, tol);
    }
}

// --- True-V results per head -------------------------------------------------------------------

// Head 0 puts 0.9 on the sink, head 1 0.5 (R = {key 0}: the cap int(0.3 * 6) = 1); with the
// sink's value orthogonal to the others each head has the closed form of
// ReferenceShareClosedForm, rel = s / sqrt(s^2 + (1 - s)^2) on each of its 5 non-reference
// rows, and the pooled value is the mean of the two heads (equal counts).
TEST(ValueSpace, TrueValuePerHeadClosedForm) {
    const int64_t T = 6, d = 2, H = 2;
    auto a = sink_input(H, T, 0.9);
    const auto second = sink_input(1, T, 0.5);
    std::copy(second.pattern.begin(), second.pattern.end(), a.pattern.begin() + a.offset(0, 1, 0));
    std::vector<std::vector<double>> hidden(2, std::vector<double>(T * d, 0.0));
    hidden[0][0] = 1;
    for (int64_t j = 1; j < T; ++j) hidden[0][j * d + 1] = 1;
    hidden[1] = hidden[0];
    std::vector<std::vector<double>> values(1);
    for (int64_t h = 0; h < H; ++h)
        values[0].insert(values[0].end(), hidden[0].begin(), hidden[0].end());
    ValueSpaceAccumulator acc(1);
    std::vector<ValueSpaceLayer> mine;
    acc.add(a, hidden, d, values, d, &mine);
    const auto& L = acc.layers()[0];
    ASSERT_EQ(L.heads.size(), 2u);
    double pooled = 0;
    for (int64_t h = 0; h < H; ++h) {
        const double s = h == 0 ? 0.9 : 0.5, rel = s / std::sqrt(s * s + (1 - s) * (1 - s));
        const auto& x = L.heads[size_t(h)];
        ASSERT_EQ(x.n, T - 1) << h;
        EXPECT_WITHIN(x.sum_rel_magnitude / x.n, rel, testutil::kF64SumRel) << h;
        EXPECT_WITHIN(x.sum_direction / x.n, (rel + 1) / 2, testutil::kF64SumRel) << h;
        pooled += rel / H;
        // This input's own sums (per_input) are the same: one input.
        EXPECT_EQ(mine[0].heads[size_t(h)].sum_rel_magnitude, x.sum_rel_magnitude);
        EXPECT_EQ(mine[0].heads[size_t(h)].n, x.n);
    }
    EXPECT_EQ(L.n_value, 2 * (T - 1));
    EXPECT_WITHIN(L.sum_rel_magnitude_value / L.n_value, pooled, testutil::kF64SumRel);
}

// --- State: merge, save, load ------------------------------------------------------------------

namespace {
// Two layers of random rows (H heads), random hidden states and values: every sum is non-zero.
struct Sample {
    AttentionInput a;
    std::vector<std::vector<double>> hidden, values;
    static constexpr int64_t H = 2, T = 9, d = 4, dh = 3;
};
Sample sample(uint64_t seed) {
    Sample s;
    s.a = random_input(s.H, s.T, Masking::Causal, 0, seed);
    s.a.n_layers = 2;
    const auto second = random_input(s.H, s.T, Masking::Causal, 0, seed + 100);
    s.a.pattern.insert(s.a.pattern.end(), second.pattern.begin(), second.pattern.end());
    uint64_t x = seed * 7 + 1;
    auto next = [&x] { return double((x = x * 6364136223846793005ULL + 1) >> 11) * 0x1p-53; };
    s.hidden.assign(3, std::vector<double>(size_t(s.T * s.d)));
    for (auto& h : s.hidden)
        for (auto& v : h) v = next() - 0.5;
    s.values.assign(2, std::vector<double>(size_t(s.H * s.T * s.dh)));
    for (auto& h : s.values)
        for (auto& v : h) v = next() - 0.5;
    return s;
}

// Every field of two layer states, bit for bit.
void expect_same_state(const ValueSpaceLayer& p, const ValueSpaceLayer& q, const char* what) {
    EXPECT_EQ(p.sum_reference_count, q.sum_reference_count) << what;
    EXPECT_EQ(p.n_inputs, q.n_inputs) << what;
    EXPECT_EQ(p.sum_rel_magnitude_hidden, q.sum_rel_magnitude_hidden) << what;
    EXPECT_EQ(p.sum_direction_hidden, q.sum_direction_hidden) << what;
    EXPECT_EQ(p.n_hidden, q.n_hidden) << what;
    EXPECT_EQ(p.sum_rel_magnitude_value, q.sum_rel_magnitude_value) << what;
    EXPECT_EQ(p.sum_direction_value, q.sum_direction_value) << what;
    EXPECT_EQ(p.n_value, q.n_value) << what;
    EXPECT_EQ(p.n_no_reference_visible, q.n_no_reference_visible) << what;
    EXPECT_EQ(p.sum_transformation, q.sum_transformation) << what;
    EXPECT_EQ(p.n_transformation, q.n_transformation) << what;
    EXPECT_EQ(p.sum_alignment, q.sum_alignment) << what;
    EXPECT_EQ(p.n_alignment, q.n_alignment) << what;
    EXPECT_EQ(p.n_alignment_undefined, q.n_alignment_undefined) << what;
    EXPECT_EQ(p.sum_entropy_magnitude, q.sum_entropy_magnitude) << what;
    EXPECT_EQ(p.n_entropy_magnitude, q.n_entropy_magnitude) << what;
    EXPECT_EQ(p.n_entropy_magnitude_undefined, q.n_entropy_magnitude_undefined) << what;
    EXPECT_EQ(p.sum_pca, q.sum_pca) << what;
    EXPECT_EQ(p.sum_pca_signed, q.sum_pca_signed) << what;
    EXPECT_EQ(p.n_pca, q.n_pca) << what;
    EXPECT_EQ(p.n_pca_undefined, q.n_pca_undefined) << what;
    ASSERT_EQ(p.heads.size(), q.heads.size()) << what;
    for (size_t h = 0; h < p.heads.size(); ++h) {
        EXPECT_EQ(p.heads[h].sum_rel_magnitude, q.heads[h].sum_rel_magnitude) << what << h;
        EXPECT_EQ(p.heads[h].sum_direction, q.heads[h].sum_direction) << what << h;
        EXPECT_EQ(p.heads[h].n, q.heads[h].n) << what << h;
    }
}
}  // namespace

// A run saved after its first input and resumed from the state ends with every sum of the
// uninterrupted run, bit for bit (the new sums and the per-head ones included); the state
// round-trips exactly and nothing is left unread.
TEST(ValueSpace, ResumedStateIsIdentical) {
    const Sample s1 = sample(1), s2 = sample(2);
    ValueSpaceAccumulator whole(2), first(2), resumed(2);
    whole.add(s1.a, s1.hidden, s1.d, s1.values, s1.dh);
    whole.add(s2.a, s2.hidden, s2.d, s2.values, s2.dh);
    first.add(s1.a, s1.hidden, s1.d, s1.values, s1.dh);
    sinkscope::BinaryWriter w;
    first.save(w);
    sinkscope::BinaryReader r(w.bytes(), "state");
    resumed.load(r);
    EXPECT_TRUE(r.at_end());
    for (size_t l = 0; l < 2; ++l)
        expect_same_state(resumed.layers()[l], first.layers()[l], "load");
    resumed.add(s2.a, s2.hidden, s2.d, s2.values, s2.dh);
    for (size_t l = 0; l < 2; ++l) {
        const auto& L = whole.layers()[l];
        ASSERT_EQ(L.n_pca + L.n_pca_undefined, 2);
        EXPECT_GT(L.n_pca, 0) << "a PCA correlation to carry";
        EXPECT_GT(L.n_entropy_magnitude, 0);
        EXPECT_EQ(L.heads.size(), size_t(Sample::H));
        expect_same_state(resumed.layers()[l], L, "resumed");
    }
}

// Merging shards adds every sum: with one input per shard the per-input sums (one term each:
// entropy-magnitude r, PCA) equal the single pass bit for bit; the per-head sums, regrouped,
// to the rounding of a sum of n terms in [0, 1] (gamma_n relative).
TEST(ValueSpace, MergeCarriesTheNewSums) {
    const Sample s1 = sample(3), s2 = sample(4);
    ValueSpaceAccumulator one(2), p(2), q(2), empty(2);
    one.add(s1.a, s1.hidden, s1.d, s1.values, s1.dh);
    one.add(s2.a, s2.hidden, s2.d, s2.values, s2.dh);
    p.add(s1.a, s1.hidden, s1.d, s1.values, s1.dh);
    q.add(s2.a, s2.hidden, s2.d, s2.values, s2.dh);
    empty.merge(p);  // an empty shard takes the other's heads
    empty.merge(q);
    for (size_t l = 0; l < 2; ++l) {
        const auto &x = empty.layers()[l], &y = one.layers()[l];
        EXPECT_EQ(x.sum_entropy_magnitude, y.sum_entropy_magnitude);
        EXPECT_EQ(x.n_entropy_magnitude + x.n_entropy_magnitude_undefined, 2);
        EXPECT_EQ(x.n_entropy_magnitude, y.n_entropy_magnitude);
        EXPECT_EQ(x.sum_pca, y.sum_pca);
        EXPECT_EQ(x.sum_pca_signed, y.sum_pca_signed);
        EXPECT_EQ(x.n_pca, y.n_pca);
        EXPECT_EQ(x.n_pca_undefined, y.n_pca_undefined);
        ASSERT_EQ(x.heads.size(), y.heads.size());
        int64_t n = 0;
        for (size_t h = 0; h < x.heads.size(); ++h) {
            const double g = testutil::gamma_k(double(y.heads[h].n), testutil::kU64);
            EXPECT_EQ(x.heads[h].n, y.heads[h].n);
            EXPECT_WITHIN(x.heads[h].sum_rel_magnitude, y.heads[h].sum_rel_magnitude,
                          g * y.heads[h].sum_rel_magnitude);
            EXPECT_WITHIN(x.heads[h].sum_direction, y.heads[h].sum_direction,
                          g * y.heads[h].sum_direction);
            n += x.heads[h].n;
        }
        EXPECT_EQ(n, y.n_value);  // the per-head counts partition the pooled one
    }
}

// A state of the earlier layout (tag "value_space", the per-layer struct copied raw) is refused
// with a message that says why; so is a state of another section.
TEST(ValueSpace, EarlierStateLayoutIsRefused) {
    sinkscope::BinaryWriter w;
    w.tag("value_space");
    w.put<uint64_t>(0);
    ValueSpaceAccumulator acc(1);
    sinkscope::BinaryReader r(w.bytes(), "old.state");
    try {
        acc.load(r);
        FAIL() << "an earlier state was accepted";
    } catch (const sinkscope::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("earlier sinkscope"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("start the run again"), std::string::npos);
    }
    sinkscope::BinaryWriter other;
    other.tag("heads");
    sinkscope::BinaryReader r2(other.bytes(), "other.state");
    EXPECT_THROW(acc.load(r2), sinkscope::InputError);
}

// --- value_space.csv ---------------------------------------------------------------------------

namespace {
namespace an = sinkscope::analysis;
// Hands an input's vectors to an InputView of either layout: separate pointers (hidden, values,
// d_model, d_head) or one ModelVectors (`vectors`); the returned holder keeps the latter alive.
template <class View>
std::shared_ptr<void> attach(View& v, const Sample& s) {
    if constexpr (requires { v.hidden; }) {
        v.hidden = &s.hidden, v.values = &s.values, v.d_model = s.d, v.d_head = s.dh;
        return nullptr;
    } else {
        using Vectors = std::remove_cvref_t<decltype(*v.vectors)>;
        auto m = std::make_shared<Vectors>();
        m->hidden = s.hidden, m->values = s.values, m->d_model = s.d, m->d_head = s.dh;
        v.vectors = m.get();
        return m;
    }
}

an::AnalysisContext context(const an::ResolvedOptions& o) {
    an::AnalysisContext c;
    c.n_layers = 2, c.n_heads = Sample::H, c.options = &o, c.model_name = "synthetic";
    return c;
}

an::AnalysisOutput run_value_space(const an::AnalysisContext& ctx, const std::vector<Sample>& in,
                                   an::PerInputValues* per_input = nullptr) {
    auto a = an::find_analysis("value").make(ctx);
    for (size_t k = 0; k < in.size(); ++k) {
        an::InputView v;
        v.index = int64_t(k);
        v.attention = &in[k].a;
        const auto hold = attach(v, in[k]);
        a->add(v, per_input);
    }
    return a->finish(an::FinishContext{});
}
}  // namespace

// The table keeps the rows it had, in their order (per layer: the seven means and
// rows_without_visible_reference), then per layer the B.7 correlations and their undefined
// counts, then the true-V rows of each head (head = h): each the accumulator's mean. The
// per-input values carry the same metrics.
TEST(ValueSpace, TableRowsAndOrder) {
    const an::ResolvedOptions o = an::resolve(an::AnalysisOptions{}, {.hidden_states = true});
    const an::AnalysisContext ctx = context(o);
    const std::vector<Sample> in = {sample(5), sample(6)};
    an::PerInputValues per_input;
    const auto out = run_value_space(ctx, in, &per_input);
    ASSERT_EQ(out.tables.size(), 1u);
    const auto& rows = out.tables[0].table.rows();
    ValueSpaceAccumulator acc(2);
    for (const auto& s : in) acc.add(s.a, s.hidden, s.d, s.values, s.dh);
    const std::vector<std::string> old = {"reference_count",
                                          "relative_magnitude",
                                          "directional_influence",
                                          "relative_magnitude",
                                          "directional_influence",
                                          "transformation_magnitude",
                                          "geometric_semantic_alignment",
                                          "rows_without_visible_reference"};
    const std::vector<std::string> added = {
        "entropy_magnitude_r", "pca_correlation", "pca_correlation_signed",
        "entropy_magnitude_r_undefined", "pca_correlation_undefined"};
    const size_t L = 2, H = Sample::H;
    ASSERT_EQ(rows.size(), L * (old.size() + added.size()) + L * H * 2);
    auto cell = [&](size_t r, size_t c) { return rows[r][c]; };
    auto metric = [&](size_t r) { return std::get<std::string>(cell(r, 4)); };
    auto value = [&](size_t r) { return std::get<double>(cell(r, 6)); };
    size_t r = 0;
    for (size_t l = 0; l < L; ++l)
        for (const auto& m : old) {
            EXPECT_EQ(metric(r), m) << r;
            EXPECT_EQ(std::get<int64_t>(cell(r, 3)), -1);
            ++r;
        }
    for (size_t l = 0; l < L; ++l) {
        const auto& S = acc.layers()[l];
        const double want[] = {S.sum_entropy_magnitude / double(S.n_entropy_magnitude),
                               S.sum_pca / double(S.n_pca), S.sum_pca_signed / double(S.n_pca),
                               double(S.n_entropy_magnitude_undefined), double(S.n_pca_undefined)};
        for (size_t k = 0; k < added.size(); ++k, ++r) {
            EXPECT_EQ(metric(r), added[k]) << r;
            EXPECT_EQ(std::get<int64_t>(cell(r, 2)), int64_t(l));
            EXPECT_EQ(std::get<int64_t>(cell(r, 3)), -1);
            EXPECT_EQ(std::get<std::string>(cell(r, 5)), "principled");
            EXPECT_EQ(value(r), want[k]) << added[k];
        }
    }
    for (size_t l = 0; l < L; ++l)
        for (size_t h = 0; h < H; ++h) {
            const auto& x = acc.layers()[l].heads[h];
            for (const auto& [m, sum] : {std::pair{"relative_magnitude", x.sum_rel_magnitude},
                                         std::pair{"directional_influence", x.sum_direction}}) {
                EXPECT_EQ(metric(r), m) << r;
                EXPECT_EQ(std::get<int64_t>(cell(r, 2)), int64_t(l));
                EXPECT_EQ(std::get<int64_t>(cell(r, 3)), int64_t(h));
                EXPECT_EQ(std::get<std::string>(cell(r, 5)), "value");
                EXPECT_EQ(value(r), sum / double(x.n));
                ++r;
            }
        }
    // Per input: the new metrics are there, per head with head = h and weight = rows.
    size_t pca = 0, per_head = 0;
    for (const auto& v : per_input) {
        pca += v.metric == "pca_correlation";
        if (v.head >= 0) {
            ++per_head;
            EXPECT_EQ(v.param, "value");
            EXPECT_GT(v.weight, 0);
        }
    }
    EXPECT_EQ(pca, size_t(acc.layers()[0].n_pca + acc.layers()[1].n_pca));
    EXPECT_EQ(per_head, in.size() * L * H * 2);
}

// Through the analysis: a run resumed from its saved state writes the same table, byte for byte.
TEST(ValueSpace, TableOfResumedRunIsIdentical) {
    const an::ResolvedOptions o = an::resolve(an::AnalysisOptions{}, {.hidden_states = true});
    const an::AnalysisContext ctx = context(o);
    const std::vector<Sample> in = {sample(7), sample(8), sample(9)};
    const std::string whole = run_value_space(ctx, in).tables[0].table.to_csv();
    auto first = an::find_analysis("value").make(ctx);
    auto feed = [&](an::Analysis& a, size_t b, size_t e) {
        for (size_t k = b; k < e; ++k) {
            an::InputView v;
            v.index = int64_t(k);
            v.attention = &in[k].a;
            const auto hold = attach(v, in[k]);
            a.add(v, nullptr);
        }
    };
    feed(*first, 0, 1);
    sinkscope::BinaryWriter w;
    first->save(w);
    auto resumed = an::find_analysis("value").make(ctx);
    sinkscope::BinaryReader r(w.bytes(), "state");
    resumed->load(r);
    feed(*resumed, 1, 3);
    EXPECT_EQ(resumed->finish(an::FinishContext{}).tables[0].table.to_csv(), whole);
}
