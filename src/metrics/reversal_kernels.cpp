// Vectorised verdict counting of the exact reversal rates (see reversal_kernels.hpp). Highway
// compiles this file once per target (foreach_target.h re-includes it) and HWY_DYNAMIC_DISPATCH
// picks the best one at run time (the same target as the pair kernels: simd.hpp).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "metrics/reversal_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "metrics/reversal_kernels.hpp"
#include "sinkscope/metrics/reversal.hpp"

HWY_BEFORE_NAMESPACE();
namespace sinkscope::metrics::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

static_assert(kVerdictWord % (HWY_MAX_BYTES / sizeof(double)) == 0,
              "a word holds whole vectors of verdicts");

// gt / lt words [w0, n_words) of row x for candidate b: bit c set where triple_verdict(x[b],
// x[c]) is +1 / -1, for c > b only.
HWY_INLINE void verdict_words(const double* x, int64_t b, int64_t w0, int64_t n_words, uint64_t* gt,
                              uint64_t* lt) {
    const hn::ScalableTag<double> d;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    const auto xb = hn::Set(d, x[b]);
    const auto axb = hn::Abs(xb);
    const auto rel = hn::Set(d, kTieRelTol);
    for (int64_t w = w0; w < n_words; ++w) {
        uint64_t g = 0, l = 0;
        for (int64_t i = 0; i < kVerdictWord; i += lanes) {
            const auto xc = hn::LoadU(d, x + w * kVerdictWord + i);
            // The operations of triple_verdict: diff = x_b - x_c, tol = rel * max(|x_b|, |x_c|).
            const auto diff = hn::Sub(xb, xc);
            const auto tol = hn::Mul(rel, hn::Max(axb, hn::Abs(xc)));
            uint8_t bg = 0, bl = 0;  // a vector has at most 8 doubles: one byte of bits
            hn::StoreMaskBits(d, hn::Gt(diff, tol), &bg);
            hn::StoreMaskBits(d, hn::Lt(diff, hn::Neg(tol)), &bl);
            g |= uint64_t{bg} << i;
            l |= uint64_t{bl} << i;
        }
        gt[w] = g;
        lt[w] = l;
    }
    // Only the c after b: clear bits 0 .. b of word w0 (b + 1 may end a word: nothing to clear).
    const uint64_t keep = ~uint64_t{0} << ((b + 1) % kVerdictWord);
    gt[w0] &= keep;
    lt[w0] &= keep;
}

void count_anchor_impl(const AnchorRows& rows, const std::array<int, 2>* slots, int64_t n_slots,
                       uint64_t* words, int64_t* compared, int64_t* disagree) {
    const int64_t n_words = rows.stride / kVerdictWord;
    uint64_t* gt = words;                          // [n_used][n_words]
    uint64_t* lt = words + rows.n_used * n_words;  // [n_used][n_words]
    for (int64_t b = 0; b + 1 < rows.m; ++b) {
        const int64_t w0 = (b + 1) / kVerdictWord;
        for (int64_t u = 0; u < rows.n_used; ++u)
            verdict_words(rows.x + u * rows.stride, b, w0, n_words, gt + u * n_words,
                          lt + u * n_words);
        for (int64_t q = 0; q < n_slots; ++q) {
            const int64_t u = slots[q][0] * n_words, v = slots[q][1] * n_words;
            int64_t n_cmp = 0, n_dis = 0;
            for (int64_t w = w0; w < n_words; ++w) {
                const uint64_t gu = gt[u + w], lu = lt[u + w], gv = gt[v + w], lv = lt[v + w];
                n_cmp += hwy::PopCount((gu | lu) & (gv | lv));
                n_dis += hwy::PopCount((gu & lv) | (lu & gv));
            }
            compared[q] += n_cmp;
            disagree[q] += n_dis;
        }
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace sinkscope::metrics::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

namespace sinkscope::metrics::kernels {

HWY_EXPORT(count_anchor_impl);

void count_anchor(const AnchorRows& rows, const std::array<int, 2>* slots, int64_t n_slots,
                  uint64_t* words, int64_t* compared, int64_t* disagree) {
    HWY_DYNAMIC_DISPATCH(count_anchor_impl)(rows, slots, n_slots, words, compared, disagree);
}

}  // namespace sinkscope::metrics::kernels

#endif  // HWY_ONCE
