// Tensor comparisons for the model tests (header only: needs ATen, which only the model and
// analysis tests link): max |diff| with the worst index, recorded as a margin (tolerance.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "tolerance.hpp"

namespace sinkscope::testutil {

// Largest |x| over the finite entries (the magnitude a float32 error bound scales with).
inline double max_abs(const at::Tensor& t) {
    const at::Tensor d = t.to(at::kCPU, at::kDouble);
    const at::Tensor finite = d.masked_select(at::isfinite(d));
    return finite.numel() == 0 ? 0.0 : finite.abs().max().item<double>();
}

// Max |got - expected| over every entry; -inf == -inf (and +inf == +inf) counts as equal, any
// other non-finite mismatch as infinite.
inline double max_abs_diff(const at::Tensor& got_any, const at::Tensor& expected_any,
                           int64_t* worst_index = nullptr) {
    const at::Tensor got = got_any.to(at::kCPU, at::kDouble).contiguous();
    const at::Tensor expected = expected_any.to(at::kCPU, at::kDouble).contiguous();
    const double* g = got.data_ptr<double>();
    const double* e = expected.data_ptr<double>();
    double worst = 0;
    int64_t at_index = -1;
    for (int64_t i = 0; i < got.numel(); ++i) {
        double d;
        if (std::isinf(e[i]) || std::isinf(g[i]))
            d = g[i] == e[i] ? 0 : INFINITY;
        else
            d = std::fabs(g[i] - e[i]);
        if (!(d <= worst)) {
            worst = d;
            at_index = i;
        }
    }
    if (worst_index) *worst_index = at_index;
    return worst;
}

// Checks max |got - expected| <= tol (same shapes); fails naming the worst multi-index and both
// values. Returns the max |diff| (infinite on a shape mismatch).
inline double expect_close(const std::string& what, const at::Tensor& got_any,
                           const at::Tensor& expected_any, double tol) {
    EXPECT_EQ(got_any.sizes(), expected_any.sizes()) << what << ": shape";
    if (got_any.sizes() != expected_any.sizes()) return INFINITY;
    const at::Tensor got = got_any.to(at::kCPU, at::kDouble).contiguous();
    const at::Tensor expected = expected_any.to(at::kCPU, at::kDouble).contiguous();
    int64_t at_index = -1;
    const double worst = max_abs_diff(got, expected, &at_index);
    record_margin(what, worst, tol);
    std::ostringstream idx;
    if (at_index >= 0) {
        std::vector<int64_t> multi(static_cast<size_t>(got.dim()));
        int64_t rest = at_index;
        for (int64_t d = got.dim() - 1; d >= 0; --d) {
            multi[static_cast<size_t>(d)] = rest % got.size(d);
            rest /= got.size(d);
        }
        idx << "[";
        for (size_t d = 0; d < multi.size(); ++d) idx << (d ? ", " : "") << multi[d];
        idx << "] got " << got.data_ptr<double>()[at_index] << " expected "
            << expected.data_ptr<double>()[at_index];
    }
    EXPECT_LE(worst, tol) << what << ": max |diff| " << worst << " at " << idx.str();
    return worst;
}

// The opposite check, for "the intervention changed something": max |a - b| is above `floor`,
// the float32 noise bound of the comparison, so the change is not rounding.
inline void expect_differs(const std::string& what, const at::Tensor& a, const at::Tensor& b,
                           double floor) {
    const double d = max_abs_diff(a, b);
    EXPECT_GT(d, floor) << what << ": max |diff| " << d << " is within float32 noise";
}

}  // namespace sinkscope::testutil
