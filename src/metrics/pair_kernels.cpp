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

// One part of the Jensen-Shannon sum of L pairs (heads in lanes): acc += m ln m with
// m = (x + y) / 2. max(m, DBL_MIN) only changes m = 0 (0 ln 0 = 0) and subnormal m, whose m ln m
// is below 1e-305; it keeps Log in its documented range (0, DBL_MAX]. With x == y, m == x
// exactly, so row_statistics (y = x) and classical_pairs give a pair of identical heads the same
// bits. hn::Log is impl::Log<D, V, true>, which first rescales subnormal inputs; for normal
// inputs (all of ours) impl::Log<D, V, false> computes the same bits without that step, ~20%
// faster on AVX-512 (bench/README.md), so the documented 4-ulp bound is unchanged.
template <class D, class V>
HWY_INLINE V add_m_log_m(D d, V x, V y, V acc) {
    const V m = hn::Mul(hn::Set(d, 0.5), hn::Add(x, y));
    const V log_m =
        hn::impl::Log<D, V, /*kAllowSubnormals=*/false>(d, hn::Max(m, hn::Set(d, DBL_MIN)));
    return hn::MulAdd(m, log_m, acc);
}

void row_statistics_impl(const PartMajor& rows, int64_t n, double* h, double* norm) {
    const hn::ScalableTag<double> d;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    for (int64_t a0 = 0; a0 < n; a0 += lanes) {
        auto acc = hn::Zero(d), acc_sq = hn::Zero(d);
        for (int64_t j = 0; j < rows.k; ++j) {
            const auto x = hn::LoadU(d, rows.x + j * rows.ld + a0);
            acc = add_m_log_m(d, x, x, acc);
            acc_sq = hn::MulAdd(x, x, acc_sq);
        }
        hn::StoreU(hn::Neg(acc), d, h + a0);
        hn::StoreU(hn::Sqrt(acc_sq), d, norm + a0);
    }
}

// Heads a in lanes [a0, a0 + L), b in [b_begin, b_end): per block of lanes, the distances of
// every row set are summed in a tile and added once, so the [n, n] sums are read and written
// once per batch of row sets, and the rows of one set stay in L1 while its b rows are swept.
void classical_pairs_impl(const ClassicalPairs& c, int64_t n, int64_t b_begin, int64_t b_end) {
    const hn::ScalableTag<double> d;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    constexpr int64_t kB = kPairBlock;
    HWY_ALIGN double tile[3 * kB * kPad];  // [metric][b - b_begin][lane]: cosine, JS, Euclidean
    const auto zero = hn::Zero(d), half = hn::Set(d, 0.5), two = hn::Set(d, 2.0);
    for (int64_t a0 = (b_begin + 1) / lanes * lanes; a0 < n; a0 += lanes) {
        const int64_t b_stop = std::min(b_end, a0 + lanes - 1);  // pairs need a > b
        for (int64_t i = 0; i < 3 * kB * lanes; ++i) tile[i] = 0;
        for (int64_t r = 0; r < c.n_sets; ++r) {
            const ClassicalRows& set = c.sets[r];
            const PartMajor& x = set.rows;
            const auto ha = hn::LoadU(d, set.entropy + a0), na = hn::LoadU(d, set.norm + a0);
            for (int64_t b = b_begin; b < b_stop; ++b) {
                auto acc = zero, acc_sq = zero;
                for (int64_t j = 0; j < x.k; ++j) {
                    const auto xa = hn::LoadU(d, x.x + j * x.ld + a0);
                    const auto xb = hn::Set(d, x.x[j * x.ld + b]);
                    acc = add_m_log_m(d, xa, xb, acc);
                    const auto diff = hn::Sub(xa, xb);
                    acc_sq = hn::MulAdd(diff, diff, acc_sq);
                }
                const auto nb = hn::Set(d, set.norm[b]), hb = hn::Set(d, set.entropy[b]);
                const auto dn = hn::Sub(na, nb);
                const auto cos = hn::Div(hn::Max(zero, hn::NegMulAdd(dn, dn, acc_sq)),
                                         hn::Mul(two, hn::Mul(na, nb)));
                const auto js =
                    hn::Max(zero, hn::Sub(hn::Neg(acc), hn::Mul(half, hn::Add(ha, hb))));
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

HWY_EXPORT(row_statistics_impl);
HWY_EXPORT(classical_pairs_impl);
HWY_EXPORT(squared_pairs_impl);

void row_statistics(const PartMajor& rows, int64_t n, double* h, double* norm) {
    HWY_DYNAMIC_DISPATCH(row_statistics_impl)(rows, n, h, norm);
}

void classical_pairs(const ClassicalPairs& args, int64_t n, int64_t b_begin, int64_t b_end) {
    HWY_DYNAMIC_DISPATCH(classical_pairs_impl)(args, n, b_begin, b_end);
}

void squared_pairs(const Rows& rows, const double* gram, double* sum, int64_t ld, int64_t n,
                   int64_t b_begin, int64_t b_end) {
    HWY_DYNAMIC_DISPATCH(squared_pairs_impl)(rows, gram, sum, ld, n, b_begin, b_end);
}

}  // namespace sinkscope::metrics::kernels

#endif  // HWY_ONCE
