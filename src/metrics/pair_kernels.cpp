// Vectorised pair kernels of the head accumulator (see pair_kernels.hpp) and the SIMD target
// control of sinkscope/metrics/simd.hpp. Highway compiles this file once per target
// (foreach_target.h re-includes it) and HWY_DYNAMIC_DISPATCH picks the best one at run time.
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

// m_j = (x_j + y_j) / 2 and the running sums of m_j ln m_j and (x_j - y_j)^2 over the padded
// rows (the zero padding adds 0). max(m, DBL_MIN) only changes m = 0 (0 ln 0 = 0) and subnormal
// m, whose m ln m is below 1e-305; it keeps Log in its documented range (0, DBL_MAX]. With
// x == y, m == x exactly, so row_statistics and classical_pairs give the same bits.
struct PairSums {
    double m_log_m = 0, squared_difference = 0;
};
HWY_INLINE PairSums pair_sums(const double* x, const double* y, int64_t k) {
    const hn::ScalableTag<double> d;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    const auto half = hn::Set(d, 0.5);
    const auto tiny = hn::Set(d, DBL_MIN);
    auto acc = hn::Zero(d), acc_sq = hn::Zero(d);
    for (int64_t j = 0; j < k; j += lanes) {
        const auto vx = hn::LoadU(d, x + j), vy = hn::LoadU(d, y + j);
        const auto m = hn::Mul(half, hn::Add(vx, vy));
        acc = hn::MulAdd(m, hn::Log(d, hn::Max(m, tiny)), acc);
        const auto diff = hn::Sub(vx, vy);
        acc_sq = hn::MulAdd(diff, diff, acc_sq);
    }
    return {lane_sum(acc), lane_sum(acc_sq)};
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

void row_statistics_impl(const Rows& rows, int64_t n, double* h, double* norm) {
    for (int64_t r = 0; r < n; ++r) {
        const double* x = rows.x + r * rows.stride;
        h[r] = -pair_sums(x, x, rows.k).m_log_m;
        const hn::ScalableTag<double> d;
        auto acc = hn::Zero(d);
        for (int64_t j = 0; j < rows.k; j += static_cast<int64_t>(hn::Lanes(d))) {
            const auto v = hn::LoadU(d, x + j);
            acc = hn::MulAdd(v, v, acc);
        }
        norm[r] = std::sqrt(lane_sum(acc));
    }
}

// Pairs a > b with b in [b_begin, b_end) (at most kPairBlock columns), rows a in blocks of
// kPairBlock: per block the distances of all row sets are summed in a tile and added once, so
// the [n, n] sums are read and written once per batch of row sets, not once per row set.
void classical_pairs_impl(const ClassicalPairs& c, int64_t n, int64_t b_begin, int64_t b_end) {
    constexpr int64_t kB = kPairBlock;
    double tile[3][kB][kB];  // [metric][a - a0][b - b_begin]: cosine, JS, Euclidean
    for (int64_t a0 = b_begin; a0 < n; a0 += kB) {
        const int64_t a1 = std::min(n, a0 + kB);
        for (auto& m : tile)
            for (auto& row : m)
                for (double& v : row) v = 0;
        for (int64_t r = 0; r < c.n_sets; ++r) {
            const ClassicalRows& set = c.sets[r];
            for (int64_t b = b_begin; b < b_end; ++b) {
                const double* xb = set.x + b * c.stride;
                const double hb = set.entropy[b], nb = set.norm[b];
                for (int64_t a = std::max(a0, b + 1); a < a1; ++a) {
                    const PairSums p = pair_sums(set.x + a * c.stride, xb, set.k);
                    const double s = p.squared_difference;
                    const double na = set.norm[a], dn = na - nb;
                    tile[0][a - a0][b - b_begin] += std::max(0.0, s - dn * dn) / (2.0 * na * nb);
                    tile[1][a - a0][b - b_begin] +=
                        std::max(0.0, -p.m_log_m - 0.5 * (set.entropy[a] + hb));
                    tile[2][a - a0][b - b_begin] += std::sqrt(s);
                }
            }
        }
        for (int64_t b = b_begin; b < b_end; ++b)
            for (int64_t a = std::max(a0, b + 1); a < a1; ++a) {
                const int64_t at = b * c.ld + a;
                c.cos_sum[at] += tile[0][a - a0][b - b_begin];
                c.js_sum[at] += tile[1][a - a0][b - b_begin];
                c.euc_sum[at] += tile[2][a - a0][b - b_begin];
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

int64_t target_impl() {
    return HWY_TARGET;
}

}  // namespace HWY_NAMESPACE
}  // namespace sinkscope::metrics::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/simd.hpp"

namespace sinkscope::metrics::kernels {

HWY_EXPORT(row_statistics_impl);
HWY_EXPORT(classical_pairs_impl);
HWY_EXPORT(squared_pairs_impl);
HWY_EXPORT(target_impl);

void row_statistics(const Rows& rows, int64_t n, double* h, double* norm) {
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

namespace sinkscope::metrics::simd {

namespace {
int64_t forced = 0;  // the mask given to force_target (0: none)

Target make_target(int64_t bits) {
    return Target{bits, hwy::TargetName(bits)};
}
}  // namespace

std::vector<Target> available_targets() {
    if (forced != 0) hwy::SetSupportedTargetsForTest(0);
    std::vector<Target> out;
    for (int64_t bits : hwy::SupportedAndGeneratedTargets()) out.push_back(make_target(bits));
    if (forced != 0) hwy::SetSupportedTargetsForTest(forced);
    return out;
}

Target active_target() {
    return make_target(HWY_DYNAMIC_DISPATCH(kernels::target_impl)());
}

void force_target(int64_t bits) {
    if (bits != 0) {
        bool known = false;
        for (const Target& t : available_targets()) known = known || t.bits == bits;
        if (!known)
            throw UsageError("SIMD target " + std::to_string(bits) +
                             " is not compiled in or not supported by this CPU");
    }
    forced = bits;
    hwy::SetSupportedTargetsForTest(bits);
}

}  // namespace sinkscope::metrics::simd

#endif  // HWY_ONCE
