// Vectorised pair kernels of the head accumulator (see pair_kernels.hpp). Highway compiles this
// file once per target (foreach_target.h re-includes it) and HWY_DYNAMIC_DISPATCH picks the best
// one at run time (sinkscope/metrics/simd.hpp names it and can restrict it).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "metrics/pair_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "metrics/pair_kernels.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/simd.hpp"

HWY_BEFORE_NAMESPACE();
namespace sinkscope::metrics::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

static_assert(HWY_MAX_BYTES / sizeof(double) <= kPad, "rows must be padded to a whole vector");

// Sum of lanes of one vector, the same reduction for every caller.
template <class V>
HWY_INLINE double lane_sum(V v) {
    const hn::ScalableTag<double> d;
    return hn::GetLane(hn::SumOfLanes(d, v));
}

// sum_j (x_j - y_j)^2 over the padded rows.
HWY_INLINE double sum_squared_difference(const double* x, const double* y, int64_t k) {
    const hn::ScalableTag<double> d;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    auto acc = hn::Zero(d);
    for (int64_t j = 0; j < k; j += lanes) {
        const auto diff = hn::Sub(hn::LoadU(d, x + j), hn::LoadU(d, y + j));
        acc = hn::MulAdd(diff, diff, acc);
    }
    return lane_sum(acc);
}

// ||x_a - x_b||^2 from the centred Gram, or from the rows where the Gram value cancels
// (pair_kernels.hpp states the bound).
HWY_INLINE double squared_distance(const double* gram, int64_t ld, int64_t a, int64_t b,
                                   const double* xa, const double* xb, int64_t k) {
    const double n2 = gram[a * ld + a] + gram[b * ld + b];
    const double s = n2 - 2.0 * gram[b * ld + a];
    if (s > kRecomputeShare * n2) return s;
    return sum_squared_difference(xa, xb, k);
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// ln x for AVX-512 (8 doubles a vector) without a division: Highway's Log reduces to
// s = (z - 1) / (z + 1), and that division is its most expensive step here.
// Reduction: x = 2^k m with m in [1, 2) by the instructions getexp (k, already a double) and
// getmant (m; both exact, subnormal x included), then m = c_i (1 + r), r = m / c_i - 1 =
// fma(m, 1/c_i, -1), for the interval i of m (16 of them, 1/16 wide, by the top 4 bits of the
// mantissa; c_i at the middle). Both 16-entry tables fit in two registers each, looked up by one
// permute. r is in [-1/33, 1/33], and ln(1 + r) = r + r^2 p(r) with p of degree 5 fitted to the
// range (kLogP): |error| <= kLogAbsoluteError absolute (simd.hpp). The Jensen-Shannon sums
// weight the logarithm by probabilities that add up to at most 2 (pair_kernels.hpp), so an
// absolute error is what they see; degree 7 instead of an 11-degree Taylor polynomial (below
// 1e-19) needs 5 fewer multiplications and multiply-adds a part. Result k ln2 + (ln c_i + r +
// r^2 p(r)), ln2 rounded once (relative error < 2^-54 on k ln2, |k| <= 1075). Rounding: the sum
// ln c_i + r and the polynomial's last multiply-add are each within u = 2^-53 of a value below
// ln 2 (absolute: x just below 1 has k = -1 and ln m near ln 2, so this reduction, unlike one
// centred on 1, does not keep ln x's relative accuracy there, and the Jensen-Shannon sums do not
// need it), the tabulated values within u of theirs, and the final multiply-add within 1 ulp of
// the result: |error| <= 4 ulp of the result + kLogAbsoluteError over all positive x
// (tests/metrics/test_pair_kernels.cpp checks it against long double ln x). getexp(0) is -inf:
// k is clamped to -1075, so x = 0 gives -1075 ln 2 (finite) and 0 * ln 0 = 0.
// Compared with the integer reduction before (subtract, shift, shift, subtract, shift, convert),
// getexp, getmant, the clamp and one shift are two vector operations fewer a part.
alignas(64) constexpr double kInvC[16] = {
    0x1.f07c1f07c1f08p-1, 0x1.d41d41d41d41dp-1, 0x1.bacf914c1bad0p-1, 0x1.a41a41a41a41ap-1,
    0x1.8f9c18f9c18fap-1, 0x1.7d05f417d05f4p-1, 0x1.6c16c16c16c17p-1, 0x1.5c9882b931057p-1,
    0x1.4e5e0a72f0539p-1, 0x1.4141414141414p-1, 0x1.3521cfb2b78c1p-1, 0x1.29e4129e4129ep-1,
    0x1.1f7047dc11f70p-1, 0x1.15b1e5f75270dp-1, 0x1.0c9714fbcda3bp-1, 0x1.0410410410410p-1};
// ln c_i = -ln(1/c_i) of the rounded 1/c_i above, rounded to nearest (200-bit evaluation).
alignas(64) constexpr double kLnC[16] = {
    0x1.f829b0e7832f8p-6, 0x1.6f0d28ae56b4ep-4, 0x1.29552f81ff521p-3, 0x1.9525a9cf456b6p-3,
    0x1.fb9186d5e3e29p-3, 0x1.2e8e2bae11d31p-2, 0x1.5d1bdbf5809cap-2, 0x1.89a3386c1425bp-2,
    0x1.b44f77bcc8f64p-2, 0x1.dd46a04c1c4a1p-2, 0x1.02552a5a5d0ffp-1, 0x1.154c3d2f4d5eap-1,
    0x1.2795e1289b11bp-1, 0x1.393e0d3562a1ap-1, 0x1.4a4f85db03ebbp-1, 0x1.5ad404c359f2dp-1};

// p(r) ~ (ln(1 + r) - r) / r^2 on the range of r, lowest power first: a fit at Chebyshev nodes,
// rounded to double (scripts/kernel_log_fit.py computes it at 50 digits, and its error on 40,001
// points of the range).
constexpr double kLogP[6] = {-0x1.0000000006a8ap-1, 0x1.55555555612bdp-2,  -0x1.fffff808ab64fp-3,
                             0x1.99999284d16bep-3,  -0x1.55afad8f43231p-3, 0x1.24e297f3dad64p-3};

constexpr double kLn2 = 0x1.62e42fefa39efp-1;

// table_log in two stages, so that a loop can start the next part's reduction (getexp,
// getmant, two permutes: independent of the polynomial) while it finishes the current one:
// prepare reduces x to k, c_i and r; the sums take k and ln m = ln c_i + ln(1 + r) apart.
template <class V>
struct LogPrepared {
    V r, ln_c, kd;
};

template <class D, class V>
HWY_INLINE LogPrepared<V> table_log_prepare(D d, V x) {
    const hn::RebindToSigned<D> di;
    const V m{_mm512_getmant_pd(x.raw, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_src)};
    const V kd = hn::Max(V{_mm512_getexp_pd(x.raw)}, hn::Set(d, -1075.0));
    const auto i = hn::ShiftRight<48>(hn::BitCast(di, m));  // the permute reads the low 4 bits
    const V inv_c{
        _mm512_permutex2var_pd(hn::Load(d, kInvC).raw, i.raw, hn::Load(d, kInvC + 8).raw)};
    const V ln_c{_mm512_permutex2var_pd(hn::Load(d, kLnC).raw, i.raw, hn::Load(d, kLnC + 8).raw)};
    return {hn::MulAdd(m, inv_c, hn::Set(d, -1.0)), ln_c, kd};
}

// ln m = ln c_i + r + r^2 p(r), p of degree 5 (kLogP): pairs of terms in r, then Horner's
// scheme in r^2; ln c_i + r is added off the polynomial's chain.
template <class D, class V>
HWY_INLINE V table_log_mantissa(D d, const LogPrepared<V>& p) {
    const auto c = [d](double v) { return hn::Set(d, v); };
    const V r = p.r, r2 = hn::Mul(r, r);
    const V p01 = hn::MulAdd(r, c(kLogP[1]), c(kLogP[0]));
    const V p23 = hn::MulAdd(r, c(kLogP[3]), c(kLogP[2]));
    const V p45 = hn::MulAdd(r, c(kLogP[5]), c(kLogP[4]));
    const V q = hn::MulAdd(r2, hn::MulAdd(r2, p45, p23), p01);
    return hn::MulAdd(r2, q, hn::Add(p.ln_c, r));
}

// k ln 2 + ln m, one multiply-add: the logarithm from its two parts (table_log), and
// sum_j s_j ln s_j from the split sums sum_j s_j k_j and sum_j s_j ln m_j (part_sums,
// row_statistics).
template <class D, class V>
HWY_INLINE V split_total(D d, V k, V ln_m) {
    return hn::MulAdd(k, hn::Set(d, kLn2), ln_m);
}

template <class D, class V>
HWY_INLINE V table_log(D d, V x) {
    const LogPrepared<V> p = table_log_prepare(d, x);
    return split_total(d, p.kd, table_log_mantissa(d, p));
}
#endif

// The logarithm of the Jensen-Shannon parts: table_log above on AVX-512; elsewhere Highway's
// Log (at most 4 ulp, documented in math-inl.h), where max(s, DBL_MIN) only changes s = 0
// (0 ln 0 = 0) and subnormal s, whose s ln s is below 1e-305, and keeps Log in its documented
// range (0, DBL_MAX]; hn::Log is impl::Log<D, V, true>, which first rescales subnormal inputs;
// for normal inputs (all of ours) impl::Log<D, V, false> computes the same bits without that
// step, ~20% faster on AVX-512 (bench/README.md).
template <class D, class V>
HWY_INLINE V kernel_log(D d, V s) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    return table_log(d, s);
#else
    return hn::impl::Log<D, V, /*kAllowSubnormals=*/false>(d, hn::Max(s, hn::Set(d, DBL_MIN)));
#endif
}

// One part of the Jensen-Shannon sum of L pairs (heads in lanes): acc += s ln s with s = x + y
// (pair_kernels.hpp: JS = (A_aa + A_bb) / 4 - A_ab / 2). row_statistics (y = x) and
// classical_pairs compute the same bits for a pair of identical heads.
template <class D, class V>
HWY_INLINE V add_s_log_s(D d, V x, V y, V acc) {
    const V s = hn::Add(x, y);
    return hn::MulAdd(s, kernel_log(d, s), acc);
}

void kernel_log_impl(const double* x, int64_t n, double* out) {
    const hn::ScalableTag<double> d;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    for (int64_t i = 0; i < n; i += lanes)
        hn::StoreU(kernel_log(d, hn::LoadU(d, x + i)), d, out + i);
}

void row_statistics_impl(const PartMajor& rows, int64_t n, double* self, double* norm) {
    const hn::ScalableTag<double> d;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    for (int64_t a0 = 0; a0 < n; a0 += lanes) {
        auto acc = hn::Zero(d), acc_sq = hn::Zero(d);
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
        auto acc_k = hn::Zero(d), acc_m = hn::Zero(d);  // as part_sums sums them
        for (int64_t j = 0; j < rows.k; ++j) {
            const auto x = hn::LoadU(d, rows.x + j * rows.ld + a0);
            const auto s = hn::Add(x, x);
            const auto p = table_log_prepare(d, s);
            acc_k = hn::MulAdd(s, p.kd, acc_k);
            acc_m = hn::MulAdd(s, table_log_mantissa(d, p), acc_m);
            acc_sq = hn::MulAdd(x, x, acc_sq);
        }
        acc = split_total(d, acc_k, acc_m);
#else
        for (int64_t j = 0; j < rows.k; ++j) {
            const auto x = hn::LoadU(d, rows.x + j * rows.ld + a0);
            acc = add_s_log_s(d, x, x, acc);
            acc_sq = hn::MulAdd(x, x, acc_sq);
        }
#endif
        hn::StoreU(hn::Mul(hn::Set(d, 0.25), acc), d, self + a0);
        hn::StoreU(hn::Sqrt(acc_sq), d, norm + a0);
    }
}

// acc += sum_j s_j ln s_j (s = x_a + x_b) and acc_sq += sum_j (x_aj - x_bj)^2 over the parts of
// one row set, heads a in the lanes at a0, head b in every lane, parts in order j = 0, 1, ...
// Elsewhere than AVX-512 (the #else branch), each part is added as add_s_log_s adds it. On
// AVX-512 the loop is software-pipelined: a part's chain of dependent steps (load, reduction,
// permutes, polynomial, accumulation) is about 45 cycles long, and written part by part the
// out-of-order core held ~6 parts of it in flight, ~8 cycles a part against the ~5.5 its
// multiply-adds need. Here each step reduces part j, loads part j + 1 and finishes part j - 1,
// so the three stages enter the core as their inputs become ready; unrolled by two, so that the
// three stages' registers alternate instead of being copied. And sum_j s ln s is taken as two
// sums, sum_j s k (table_log's exponent, a double) as soon as part j is reduced and
// sum_j s ln m (ln c_i + ln(1 + r)) when it is finished, combined at the end (split_total), which
// keeps k ln2 off the chain (bench/README.md). row_statistics sums the same two sums, so
// identical heads still have a divergence of exactly 0; the rounding of the split is in
// pair_kernels.hpp (kSplitLogExcess).
template <class D, class V>
HWY_INLINE void part_sums(D d, const PartMajor& x, int64_t a0, int64_t b, V& acc, V& acc_sq) {
    const int64_t k = x.k, ld = x.ld;
    const double* col = x.x;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    if (k == 0) return;
    V s, diff;  // the part loaded last
    const auto load = [&](int64_t j) {
        const V xa = hn::LoadU(d, col + j * ld + a0), xb = hn::Set(d, col[j * ld + b]);
        s = hn::Add(xa, xb);
        diff = hn::Sub(xa, xb);
    };
    struct Prepared {  // a part reduced, not yet finished
        V s, diff;
        LogPrepared<V> log;
    };
    V acc_k = hn::Zero(d), acc_m = hn::Zero(d);
    const auto prepare = [&] {
        const Prepared p{s, diff, table_log_prepare(d, s)};
        acc_k = hn::MulAdd(p.s, p.log.kd, acc_k);
        return p;
    };
    const auto finish = [&](const Prepared& p) {
        acc_m = hn::MulAdd(p.s, table_log_mantissa(d, p.log), acc_m);
        acc_sq = hn::MulAdd(p.diff, p.diff, acc_sq);
    };
    load(0);
    Prepared even = prepare(), odd;  // even: part j - 1 at the top of the loops below
    if (k > 1) load(1);
    int64_t j = 1;
    for (; j + 2 < k; j += 2) {  // parts j and j + 1 reduced, j + 1 and j + 2 loaded
        odd = prepare();
        load(j + 1);
        finish(even);
        even = prepare();
        load(j + 2);
        finish(odd);
    }
    if (j < k) {  // part j loaded; j + 1 = k - 1 or k
        odd = prepare();
        if (j + 1 < k) {
            load(j + 1);
            finish(even);
            even = prepare();
            finish(odd);
        } else {
            finish(even);
            even = odd;
        }
    }
    finish(even);
    acc = hn::Add(acc, split_total(d, acc_k, acc_m));
#else
    for (int64_t j = 0; j < k; ++j) {
        const auto xa = hn::LoadU(d, col + j * ld + a0);
        const auto xb = hn::Set(d, col[j * ld + b]);
        acc = add_s_log_s(d, xa, xb, acc);
        const auto diff = hn::Sub(xa, xb);
        acc_sq = hn::MulAdd(diff, diff, acc_sq);
    }
#endif
}

// Heads a in lanes [a0, a0 + L), b in [b_begin, b_end): per block of lanes, the distances of
// every row set are summed in a tile and added once, so the [n, n] sums are read and written
// once per batch of row sets, and the rows of one set stay in L1 while its b rows are swept.
void classical_pairs_impl(const ClassicalPairs& c, int64_t n, int64_t b_begin, int64_t b_end) {
    const hn::ScalableTag<double> d;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    constexpr int64_t kB = kPairBlock;
    HWY_ALIGN double tile[3 * kB * kPad];  // [metric][b - b_begin][lane]: cosine, JS, Euclidean
    const auto zero = hn::Zero(d), minus_half = hn::Set(d, -0.5), two = hn::Set(d, 2.0);
    for (int64_t a0 = (b_begin + 1) / lanes * lanes; a0 < n; a0 += lanes) {
        const int64_t b_stop = std::min(b_end, a0 + lanes - 1);  // pairs need a > b
        for (int64_t i = 0; i < 3 * kB * lanes; ++i) tile[i] = 0;
        for (int64_t r = 0; r < c.n_sets; ++r) {
            const ClassicalRows& set = c.sets[r];
            const PartMajor& x = set.rows;
            const auto ea = hn::LoadU(d, set.self + a0), na = hn::LoadU(d, set.norm + a0);
            for (int64_t b = b_begin; b < b_stop; ++b) {
                auto acc = zero, acc_sq = zero;
                part_sums(d, x, a0, b, acc, acc_sq);
                const auto nb = hn::Set(d, set.norm[b]), eb = hn::Set(d, set.self[b]);
                const auto dn = hn::Sub(na, nb);
                const auto cos = hn::Div(hn::Max(zero, hn::NegMulAdd(dn, dn, acc_sq)),
                                         hn::Mul(two, hn::Mul(na, nb)));
                const auto js = hn::Max(zero, hn::MulAdd(minus_half, acc, hn::Add(ea, eb)));
                double* t = tile + (b - b_begin) * lanes;
                hn::StoreU(hn::Add(hn::LoadU(d, t), cos), d, t);
                t += kB * lanes;
                hn::StoreU(hn::Add(hn::LoadU(d, t), js), d, t);
                t += kB * lanes;
                hn::StoreU(hn::Add(hn::LoadU(d, t), hn::Sqrt(acc_sq)), d, t);
            }
        }
        double* sums[3] = {c.cos_sum, c.js_sum, c.euc_sum};
        for (int64_t b = b_begin; b < b_stop; ++b)
            for (int m = 0; m < 3; ++m) {
                const double* t = tile + (m * kB + (b - b_begin)) * lanes;
                double* out = sums[m] + b * c.ld;
                if (a0 > b && a0 + lanes <= n) {
                    hn::StoreU(hn::Add(hn::LoadU(d, out + a0), hn::LoadU(d, t)), d, out + a0);
                } else {
                    for (int64_t a = std::max(a0, b + 1); a < std::min(n, a0 + lanes); ++a)
                        out[a] += t[a - a0];
                }
            }
    }
}

void squared_pairs_impl(const Rows& rows, const double* gram, double* sum, int64_t ld, int64_t n,
                        int64_t b_begin, int64_t b_end) {
    const int64_t stride = rows.stride, k = rows.k;
    for (int64_t a0 = b_begin; a0 < n; a0 += kPairBlock) {
        const int64_t a1 = std::min(n, a0 + kPairBlock);
        for (int64_t b = b_begin; b < b_end; ++b) {
            const double* xb = rows.x + b * stride;
            for (int64_t a = std::max(a0, b + 1); a < a1; ++a) {
                const double* xa = rows.x + a * stride;
                sum[b * ld + a] += gram ? squared_distance(gram, ld, a, b, xa, xb, k)
                                        : sum_squared_difference(xa, xb, k);
            }
        }
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace sinkscope::metrics::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

namespace sinkscope::metrics::kernels {

HWY_EXPORT(kernel_log_impl);
HWY_EXPORT(row_statistics_impl);
HWY_EXPORT(classical_pairs_impl);
HWY_EXPORT(squared_pairs_impl);

namespace {
void dispatch_kernel_log(const double* x, int64_t n, double* out) {
    HWY_DYNAMIC_DISPATCH(kernel_log_impl)(x, n, out);
}
}  // namespace

void row_statistics(const PartMajor& rows, int64_t n, double* self, double* norm) {
    HWY_DYNAMIC_DISPATCH(row_statistics_impl)(rows, n, self, norm);
}

void classical_pairs(const ClassicalPairs& args, int64_t n, int64_t b_begin, int64_t b_end) {
    HWY_DYNAMIC_DISPATCH(classical_pairs_impl)(args, n, b_begin, b_end);
}

void squared_pairs(const Rows& rows, const double* gram, double* sum, int64_t ld, int64_t n,
                   int64_t b_begin, int64_t b_end) {
    HWY_DYNAMIC_DISPATCH(squared_pairs_impl)(rows, gram, sum, ld, n, b_begin, b_end);
}

}  // namespace sinkscope::metrics::kernels

namespace sinkscope::metrics::simd {

void kernel_log(const double* x, int64_t n, double* out) {
    SS_CHECK(n % kernels::kPad == 0, "kernel_log: n = ", n, " is not a multiple of ",
             kernels::kPad);
    kernels::dispatch_kernel_log(x, n, out);
}

}  // namespace sinkscope::metrics::simd

#endif  // HWY_ONCE
