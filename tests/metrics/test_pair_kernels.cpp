// Vectorised pair kernels of the head accumulator (src/metrics/pair_kernels.hpp): every head
// distance matrix against the pairwise definitions of row.hpp, with tolerances derived from the
// arithmetic of both sides, on heads that include identical copies and near-duplicates, and on
// every SIMD target this build and CPU can run.
#include <gtest/gtest.h>

#include <array>
#include <cfloat>
#include <cmath>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/head.hpp"
#include "sinkscope/metrics/simd.hpp"
#include "synthetic_attention.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::metrics;
using testutil::kU64;

namespace {

double gamma(double k) {
    return testutil::gamma_k(k, kU64);
}
// ulp(y) <= 2^-52 |y| for a normal float64 y.
constexpr double kUlpRel = 0x1p-52;
// hwy/contrib/math/math-inl.h documents Log for float64 as "Max Error: ULP = 4", every target;
// the AVX-512 table logarithm of pair_kernels.cpp is within 4 ulp + simd::kLogAbsoluteError.
constexpr double kHwyLogUlps = 4;
constexpr double kLogAbs = simd::kLogAbsoluteError;
// glibc's log (the reference's std::log) is below 1 ulp.
constexpr double kLibmLogUlps = 1;
// Share tau of pair_kernels.hpp below which a Gram value is recomputed from the rows.
constexpr double kRecomputeShare = 1.0 / 16.0;
// kSplitLogExcess of pair_kernels.hpp (scripts/kernel_log_fit.py --check computes it).
constexpr double kSplitLogExcess = 1.39;

// Relative error of one squared distance from a centred Gram over K columns with the
// recomputation of pair_kernels.hpp: alpha (1 + 2u) / (tau - alpha) + 2u, alpha = 2 gamma_K + 5u
// (recomputed pairs: gamma_{K+3}, smaller).
double gram_squared_rel(double k) {
    const double alpha = 2 * gamma(k) + 5 * kU64;
    return alpha * (1 + 2 * kU64) / (kRecomputeShare - alpha) + 2 * kU64;
}

// Head distances by the pairwise definitions (row.hpp) over every usable row (sink 0, causal),
// with each entry's tolerance: per row, the sum of the error bounds of the kernel's arithmetic
// and of the definition's own; over rows, their mean plus the rounding of the two means.
struct Reference {
    std::map<std::string, Eigen::MatrixXd> value, tol;
};

Reference reference(const std::vector<AttentionInput>& xs, int64_t min_parts = 3) {
    const int64_t n = xs[0].n_layers * xs[0].n_heads;
    const std::array<std::string, 6> classical = {
        "cosine_keep", "cosine_drop", "js_keep", "js_drop", "euclidean_keep", "euclidean_drop"};
    std::map<std::string, Eigen::MatrixXd> sum, tol_sum;
    for (const auto& name : classical) sum[name] = tol_sum[name] = Eigen::MatrixXd::Zero(n, n);
    Eigen::MatrixXd perp2 = Eigen::MatrixXd::Zero(n, n), sink2 = perp2;
    double rows = 0, max_parts = 0, chunk_columns = 0;
    for (const auto& x : xs) {
        double columns = 0;  // content CLR columns of this input: bounds one chunk's K
        for (int64_t i = 0; i < x.length; ++i) {
            const int64_t d = x.n_visible(i);
            if (d < min_parts) continue;
            std::vector<RowQuantities> r;
            for (int64_t l = 0; l < x.n_layers; ++l)
                for (int64_t h = 0; h < x.n_heads; ++h)
                    r.push_back(row_from_probabilities(x.row(l, h, i), d, 0, {}));
            rows += 1;
            columns += double(d - 1);
            max_parts = std::max(max_parts, double(d));
            for (int64_t a = 0; a < n; ++a)
                for (int64_t b = 0; b < n; ++b) {
                    if (a == b) continue;
                    perp2(a, b) += std::pow(content_distance(r[a], r[b]), 2);
                    sink2(a, b) += std::pow(sink_term(r[a], r[b]), 2);
                    for (int c = 0; c < 2; ++c) {
                        const auto& xa = c == 0 ? r[a].p : r[a].pi;
                        const auto& xb = c == 0 ? r[b].p : r[b].pi;
                        const int64_t k = static_cast<int64_t>(xa.size());
                        const double kk = double(k);
                        double s = 0, na = 0, nb = 0, hm = 0, ha = 0, hb = 0, mass = 0;
                        for (int64_t j = 0; j < k; ++j) {
                            s += (xa[j] - xb[j]) * (xa[j] - xb[j]);
                            na += xa[j] * xa[j];
                            nb += xb[j] * xb[j];
                            const double m = 0.5 * (xa[j] + xb[j]);
                            mass += m;
                            hm -= m > 0 ? m * std::log(m) : 0;
                            ha -= xa[j] > 0 ? xa[j] * std::log(xa[j]) : 0;
                            hb -= xb[j] > 0 ? xb[j] * std::log(xb[j]) : 0;
                        }
                        na = std::sqrt(na), nb = std::sqrt(nb);
                        const std::string suffix = c == 0 ? "_keep" : "_drop";
                        // Euclidean: sqrt of a sum of k squared differences, both sides.
                        const double euc = euclidean_distance(xa.data(), xb.data(), k);
                        sum["euclidean" + suffix](a, b) += euc;
                        tol_sum["euclidean" + suffix](a, b) += (gamma(kk + 3) + 2 * kU64) * euc;
                        // Cosine (s - (|a| - |b|)^2) / (2 |a| |b|): s within gamma_{k+3} s, the
                        // norms within gamma_{k+1}, so (|a| - |b|)^2 within
                        // 2 sqrt(s) gamma_{k+1} (|a| + |b|); the denominator and the result
                        // 2 gamma_{k+1} + 3u. The definition 1 - a.b / (|a| |b|): 2 gamma_k + 4u.
                        const double cos = cosine_distance(xa.data(), xb.data(), k);
                        sum["cosine" + suffix](a, b) += cos;
                        tol_sum["cosine" + suffix](a, b) +=
                            (gamma(kk + 3) * s + 2 * std::sqrt(s) * gamma(kk + 1) * (na + nb) +
                             3 * kU64 * s) /
                                (2 * na * nb) +
                            (2 * gamma(kk + 1) + 3 * kU64) * std::abs(cos) + 2 * gamma(kk) +
                            4 * kU64;
                        // Jensen-Shannon as the kernel computes it, (A_aa + A_bb) / 4 - A_ab / 2
                        // with A_ab = sum s ln s, s = a + b (pair_kernels.hpp): s rounded once
                        // (u s |ln s + 1|), ln s within 4 ulp + kLogAbs, the product and sum
                        // gamma_{k+1}, so |dA_ab| <= (u + 4 ulp + gamma) sum s |ln s| + (u +
                        // kLogAbs) sum s, and the same for A_aa (s = 2a exact). On AVX-512 A is
                        // two sums (s k and s (ln c + ln(1 + r))) combined at the end: their
                        // roundings (<= 4.5 u < 4 ulp a part, gamma_{k+2} with the combination)
                        // are relative to terms up to |ln s| + kSplitLogExcess, which adds
                        // kSplitLogExcess times the weights' sum s / 2 + (2a + 2b) / 4 = 2m
                        // (every target is held to it). With s |ln s| <= 2m (|ln m| + ln 2),
                        // sum m = mass and the final addition and multiply-add (u each on terms
                        // of the same size): the kernel is within (3u + 4 ulp + gamma_{k+2})
                        // (hm + (ha + hb) / 2 + (2 ln2 + 2 kSplitLogExcess) mass)
                        // + (u + 2 kLogAbs) mass. The definition sum x ln(x / m) / 2 with libm's
                        // log: 2u + 2 (1 ulp + gamma_{2k+2}) (its terms' |.| sum to
                        // <= 1/e + ln 2), + u js.
                        const double js = js_divergence(xa.data(), xb.data(), k);
                        sum["js" + suffix](a, b) += js;
                        tol_sum["js" + suffix](a, b) +=
                            (3 * kU64 + kHwyLogUlps * kUlpRel + gamma(kk + 2)) *
                                (hm + 0.5 * (ha + hb) +
                                 (2 * std::log(2.0) + 2 * kSplitLogExcess) * mass) +
                            (kU64 + 2 * kLogAbs) * mass + 2 * kU64 +
                            2 * (kLibmLogUlps * kUlpRel + gamma(2 * kk + 2)) + kU64 * js;
                    }
                }
        }
        chunk_columns = std::max(chunk_columns, columns);
    }
    Reference ref;
    const double mean_rel = 2 * gamma(rows);  // two means over `rows` row sets
    for (const auto& name : classical) {
        ref.value[name] = sum[name] / rows;
        ref.tol[name] = tol_sum[name] / rows + mean_rel * ref.value[name].cwiseAbs();
    }
    // Root mean squares: the chunk's Gram values (or the direct sums of the balance columns)
    // against per-row squared l2 distances (gamma_{k+3} + 2u each), then the means; relative on
    // the squares, so also on the roots.
    const double row_rel = gamma(max_parts + 3) + 2 * kU64;
    const double perp_rel = gram_squared_rel(chunk_columns) + row_rel + mean_rel + 4 * kU64;
    const double sink_rel = gamma(rows + 3) + row_rel + mean_rel + 4 * kU64;
    ref.value["dA_perp"] = (perp2 / rows).cwiseSqrt();
    ref.tol["dA_perp"] = perp_rel * ref.value["dA_perp"];
    ref.value["sink_term"] = (sink2 / rows).cwiseSqrt();
    ref.tol["sink_term"] = sink_rel * ref.value["sink_term"];
    // dA^2 = dA_perp^2 + (b - b')^2 (spec 1), which is how the accumulator sums it.
    ref.value["dA"] = ((perp2 + sink2) / rows).cwiseSqrt();
    ref.tol["dA"] = std::max(perp_rel, sink_rel) * ref.value["dA"];
    return ref;
}

void expect_near_reference(const HeadResults& r, const Reference& ref) {
    for (const char* name : kDistanceNames) {
        const auto& got = r.distances.at(name);
        const auto& want = ref.value.at(name);
        const auto& tol = ref.tol.at(name);
        for (int64_t a = 0; a < want.rows(); ++a)
            for (int64_t b = 0; b < want.cols(); ++b) {
                if (a == b) continue;
                ASSERT_WITHIN(got(a, b), want(a, b), tol(a, b))
                    << name << " (" << a << ", " << b << ") on " << simd::active_target().name;
            }
    }
}

// Copies head (l_from, h_from) onto (l_to, h_to), each visible entry scaled by 1 + eps U(-1, 1)
// and the row closed again (eps = 0: an exact copy).
void copy_head(AttentionInput& x, std::mt19937_64& rng, int64_t l_to, int64_t h_to, int64_t l_from,
               int64_t h_from, double eps) {
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (int64_t i = 0; i < x.n_tokens; ++i) {
        const double* from = x.row(l_from, h_from, i);
        double* to = x.pattern.data() + x.offset(l_to, h_to, i);
        const int64_t d = x.n_visible(i);
        double total = 0;
        for (int64_t j = 0; j < d; ++j) total += to[j] = from[j] * (1 + eps * u(rng));
        if (eps != 0)
            for (int64_t j = 0; j < d; ++j) to[j] /= total;
    }
}

// Random causal heads where layer 0 head 1 and layer 1 head 0 are exact copies of layer 0
// head 0, and heads 2 and 3 of layer 0 are copies perturbed by 1e-9 and 1e-6 relative.
AttentionInput with_duplicates(uint64_t seed, int64_t n_layers, int64_t n_heads, int64_t t) {
    auto x = testutil::random_input(seed, n_layers, n_heads, t, Masking::Causal, false);
    std::mt19937_64 rng(seed + 1000);
    copy_head(x, rng, 0, 1, 0, 0, 0.0);
    copy_head(x, rng, 1, 0, 0, 0, 0.0);
    copy_head(x, rng, 0, 2, 0, 0, 1e-9);
    copy_head(x, rng, 0, 3, 0, 0, 1e-6);
    return x;
}

HeadResults run(const std::vector<AttentionInput>& xs, int n_threads = 1) {
    HeadOptions o;
    o.n_threads = n_threads;
    HeadAccumulator acc(xs[0].n_layers, xs[0].n_heads, o);
    for (const auto& x : xs) acc.add(x);
    return acc.finish();
}

// Restores the CPU's best target when a test ends, whatever it forced.
struct TargetGuard {
    ~TargetGuard() { simd::force_target(0); }
};

}  // namespace

// Every distance of heads with identical copies and near-duplicates is within its derived
// bound of the pairwise definition; identical heads are exactly 0 in every matrix.
TEST(PairKernels, DuplicateHeadsMatchThePairwiseDefinition) {
    const std::vector<AttentionInput> xs = {with_duplicates(31, 2, 6, 14),
                                            with_duplicates(32, 2, 6, 14)};
    const HeadResults r = run(xs);
    expect_near_reference(r, reference(xs));
    const int64_t h = 6;  // heads per layer: (layer, head) -> l * h + head
    for (const char* name : kDistanceNames)
        for (auto [a, b] : {std::pair<int64_t, int64_t>{0, 1}, {0, h}, {1, h}}) {
            EXPECT_EQ(r.distances.at(name)(a, b), 0.0) << name << " (" << a << ", " << b << ")";
            EXPECT_EQ(r.distances.at(name)(b, a), 0.0) << name << " (" << b << ", " << a << ")";
        }
    // The near-duplicates are resolved, not rounded to 0.
    EXPECT_GT(r.distances.at("dA_perp")(2, 0), 0.0);
    EXPECT_GT(r.distances.at("euclidean_drop")(2, 0), 0.0);
}

// The Jensen-Shannon, cosine and Euclidean kernels (and the Gram corrections) give the pairwise
// definitions within the bounds of the kernels' logarithm (4 ulp + simd::kLogAbsoluteError)
// on every compiled SIMD target the CPU runs (on an AVX-512 machine: AVX3, AVX2, SSE4, SSSE3 and
// scalar).
TEST(PairKernels, EverySimdTargetMatchesThePairwiseDefinition) {
    const std::vector<AttentionInput> xs = {with_duplicates(41, 2, 5, 19)};
    const Reference ref = reference(xs);
    TargetGuard guard;
    const auto targets = simd::available_targets();
    ASSERT_FALSE(targets.empty());
    std::string names;
    for (const auto& t : targets) {
        simd::force_target(t.bits);
        ASSERT_EQ(simd::active_target().bits, t.bits) << t.name;
        expect_near_reference(run(xs), ref);
        names += " " + t.name;
    }
    std::cout << "[ targets  ]" << names << "\n";
    RecordProperty("simd_targets", names);
}

// The logarithm of the kernels is within the 4 ulp + kLogAbs the bounds above assume, on every
// target (kLogAbs is the AVX-512 table logarithm's polynomial; Highway's Log has 4 ulp alone):
// against long double ln x (glibc's logl, < 1 ulp of its 64-bit mantissa, so < 2^-10 ulp of a
// double) on x spread over every binade of the normal range, the edges of table_log's
// intervals (mantissa 1 + j/16, each side), values near 1, powers of 2, DBL_MIN and DBL_MAX;
// ln 1 = 0 exactly with Highway's Log, within kLogAbs with the AVX-512 table logarithm (its
// reduction of 1 is c_0 (1 + r), r != 0).
TEST(PairKernels, KernelLogarithmIsWithinItsBound) {
    std::vector<double> x;
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> unit(1.0, 2.0);
    for (int e = -1022; e <= 1023; ++e)
        for (int i = 0; i < 24; ++i) x.push_back(std::ldexp(unit(rng), e));
    for (int e : {-1022, -300, -1, 0, 1, 700})
        for (int j = 0; j <= 16; ++j) {
            const double edge = 1.0 + j / 16.0;
            for (double z : {edge, std::nextafter(edge, 0.0), std::nextafter(edge, 4.0)})
                if (std::ldexp(z, e) >= DBL_MIN) x.push_back(std::ldexp(z, e));
        }
    for (int i = 0; i < 4096; ++i) x.push_back(1.0 + std::ldexp(unit(rng) - 1.5, -(i % 60)));
    for (int e = -1022; e <= 1023; e += 7) x.push_back(std::ldexp(1.0, e));
    x.push_back(DBL_MIN);
    x.push_back(DBL_MAX);
    while (x.size() % 32 != 0) x.push_back(1.0);
    std::vector<double> out(x.size());
    TargetGuard guard;
    for (const auto& t : simd::available_targets()) {
        simd::force_target(t.bits);
        simd::kernel_log(x.data(), static_cast<int64_t>(x.size()), out.data());
        const bool table_log = t.name == "AVX3" || t.name == "AVX3_DL";  // pair_kernels.cpp
        double worst = 0, worst_x = 0;
        for (size_t i = 0; i < x.size(); ++i) {
            const long double ref = std::log(static_cast<long double>(x[i]));
            if (ref == 0) {  // exact with Highway's Log; within kLogAbs with the table's
                if (table_log)
                    EXPECT_LE(std::fabs(out[i]), kLogAbs) << t.name << " x = 1";
                else
                    EXPECT_EQ(out[i], 0.0) << t.name << " x = 1";
                continue;
            }
            // ulp of the double nearest ref: 2^(exponent - 52); the error beyond kLogAbs in ulp
            const double ulp = std::ldexp(1.0, std::ilogb(static_cast<double>(ref)) - 52);
            const double err =
                std::max(0.0, static_cast<double>(std::fabs(out[i] - ref)) - kLogAbs) / ulp;
            if (err > worst) worst = err, worst_x = x[i];
        }
        EXPECT_LE(worst, kHwyLogUlps)
            << t.name << ": " << worst << " ulp + " << kLogAbs << " at x = " << worst_x;
        std::cout << "[ log ulp  ] " << t.name << " " << worst << " (beyond " << kLogAbs << ")\n";
    }
}

// Forcing a target that is not available is a usage error; 0 restores the best one.
TEST(PairKernels, ForcingAnUnknownTargetIsRefused) {
    TargetGuard guard;
    const auto targets = simd::available_targets();
    EXPECT_THROW(simd::force_target(int64_t(1) << 62 | 1), UsageError);
    simd::force_target(0);
    EXPECT_EQ(simd::active_target().bits, targets.front().bits);
}

// The blocked, threaded kernels give bit-identical matrices for 1, 2 and 3 threads with several
// Gram blocks (160 heads > 64) and pair blocks, and more row sets than one batch holds.
TEST(PairKernels, ThreadCountDoesNotChangeResultsAcrossBlocks) {
    const std::vector<AttentionInput> xs = {
        testutil::random_input(51, 2, 80, 20, Masking::Causal, false)};
    const HeadResults one = run(xs, 1), two = run(xs, 2), three = run(xs, 3);
    for (const char* name : kDistanceNames) {
        EXPECT_EQ((one.distances.at(name) - two.distances.at(name)).cwiseAbs().maxCoeff(), 0.0)
            << name;
        EXPECT_EQ((one.distances.at(name) - three.distances.at(name)).cwiseAbs().maxCoeff(), 0.0)
            << name;
    }
}
