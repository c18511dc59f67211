// The analyses' reading of attention functions other than softmax (analysis/capture.hpp,
// model/config.hpp AttentionFunction): every captured row is closed (divided by its sum over the
// visible keys) before any analysis reads it, and the scores handed on are the closed row's
// logits (softmax_one: the scores; sigmoid: log sigmoid(s)), so that row = softmax(scores) as
// for a softmax model. Softmax rows pass untouched, bit for bit. A sigmoid input too long to hold
// is refused rather than recomputed as softmax rows.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "sinkscope/analysis/capture.hpp"
#include "sinkscope/analysis/inputs.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/hooks.hpp"
#include "sinkscope/model/train.hpp"
#include "tolerance.hpp"

namespace sinkscope::analysis {
namespace {

using model::AttentionFunction;
using model::HookPoint;
using testutil::kU32;
using testutil::kU64;

constexpr int64_t kT = 24;

std::unique_ptr<model::Trainer> random_model(AttentionFunction f) {
    model::TrainConfig c = model::train_preset("tiny");
    c.attention = f;
    c.init_std = 0.5;  // scores of a few units: rows far from uniform
    return std::make_unique<model::Trainer>(c, model::hf_config_json(c, 257, 256), 3);
}

AnalysisInputs one_input() {
    AnalysisInputs in;
    in.data_name = "test";
    at::manual_seed(8);
    const at::Tensor ids = at::randint(0, 257, {kT}, at::TensorOptions().dtype(at::kLong));
    in.ids.push_back({});
    for (int64_t t = 0; t < kT; ++t) in.ids[0].push_back(int32_t(ids[t].item<int64_t>()));
    in.sample_index = {0};
    in.rows = {0};
    return in;
}

class CaptureClosure : public ::testing::TestWithParam<AttentionFunction> {};

// Each analysed row is the raw row over its sum (float64 closure, stored in float32: within one
// rounding, 2^-24 relative, plus the float64 sum's gamma_T(2^-53)), sums to 1 within the same,
// and for sigmoid its scores are log sigmoid of the raw scores (one float32 rounding of a float64
// value); softmax rows are the raw rows bit for bit.
TEST_P(CaptureClosure, RowsAreClosedAndScoresAreTheirLogits) {
    const AttentionFunction f = GetParam();
    const auto trainer = random_model(f);
    const model::Model& m = trainer->model();
    const AnalysisInputs in = one_input();
    const model::ForwardResult raw = m.forward(
        in.model_input(m, 0), model::CaptureSpec({model::hook_glob(HookPoint::Pattern),
                                                  model::hook_glob(HookPoint::AttnScores)})
                                  .without_logits());
    const Captured c = capture_input(m, in, 0, {}, /*lazy=*/false);
    const metrics::AttentionInput& a = c.attention;
    ASSERT_TRUE(a.has_scores());
    const double rel = kU32 + testutil::gamma_k(double(kT), kU64);
    double worst_row = 0, worst_sum = 0, worst_score = 0, raw_sum_gap = 0;
    for (int64_t l = 0; l < m.config().n_layers; ++l) {
        const at::Tensor p = raw.captured.at(model::hook_name(HookPoint::Pattern, l))[0].to(
            at::kDouble);  // [H, T, T]
        const at::Tensor s =
            raw.captured.at(model::hook_name(HookPoint::AttnScores, l))[0].to(at::kDouble);
        for (int64_t h = 0; h < m.config().n_heads; ++h)
            for (int64_t i = 0; i < kT; ++i) {
                const double* row = a.row(l, h, i);
                const double* zrow = a.score_row(l, h, i);
                double raw_sum = 0, sum = 0;
                for (int64_t j = 0; j <= i; ++j) raw_sum += p[h][i][j].item<double>();
                raw_sum_gap = std::max(raw_sum_gap, std::abs(raw_sum - 1.0));
                for (int64_t j = 0; j <= i; ++j) {
                    const double pr = p[h][i][j].item<double>(), sr = s[h][i][j].item<double>();
                    sum += row[j];
                    if (f == AttentionFunction::Softmax) {
                        EXPECT_EQ(row[j], pr);
                        EXPECT_EQ(zrow[j], sr);
                        continue;
                    }
                    const double closed = pr / raw_sum;
                    worst_row = std::max(worst_row, std::abs(row[j] - closed) / (rel * closed));
                    const double logit =
                        f == AttentionFunction::Sigmoid ? -std::log1p(std::exp(-sr)) : sr;
                    worst_score =
                        std::max(worst_score, std::abs(zrow[j] - logit) /
                                                  ((kU32 + 4 * kU64) * std::abs(logit) + 0x1p-126));
                }
                if (f != AttentionFunction::Softmax)
                    worst_sum = std::max(worst_sum, std::abs(sum - 1.0) / rel);
            }
    }
    EXPECT_ERROR_WITHIN(worst_row, 1.0);
    EXPECT_ERROR_WITHIN(worst_sum, 1.0);
    EXPECT_ERROR_WITHIN(worst_score, 1.0);
    // The raw rows of the other functions are off the simplex: the closure did something.
    if (f != AttentionFunction::Softmax) EXPECT_GT(raw_sum_gap, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Functions, CaptureClosure,
                         ::testing::Values(AttentionFunction::Softmax,
                                           AttentionFunction::SoftmaxOne,
                                           AttentionFunction::Sigmoid),
                         [](const auto& info) {
                             return std::string(model::attention_function_name(info.param));
                         });

// Recomputed (lazy) rows are softmax rows of the scores: the closed rows of softmax_one, never
// those of sigmoid, which is refused with one line.
TEST(CaptureClosure, LazyRowsOfSigmoidAreRefused) {
    const AnalysisInputs in = one_input();
    const auto sigmoid = random_model(AttentionFunction::Sigmoid);
    EXPECT_THROW(capture_input(sigmoid->model(), in, 0, {}, /*lazy=*/true), UnsupportedError);
    const auto one = random_model(AttentionFunction::SoftmaxOne);
    const Captured lazy = capture_input(one->model(), in, 0, {}, /*lazy=*/true);
    const Captured held = capture_input(one->model(), in, 0, {}, /*lazy=*/false);
    // Both closed: the softmax of their scores. The recomputed scores differ from the captured
    // ones by rounding (ds, measured per row); a score change ds moves p_j by at most 2 p_j
    // max|ds| (p_j (ds_j - sum_k p_k ds_k)), and each side's float32 softmax adds
    // testutil::f32_softmax_rel_bound p_j (over the keys and the zero logit), the closure one
    // rounding (2^-24).
    double worst = 0;
    for (int64_t l = 0; l < 2; ++l)
        for (int64_t h = 0; h < 2; ++h)
            for (int64_t i = 0; i < kT; ++i) {
                const double* x = lazy.attention.row(l, h, i);
                const double* zx = lazy.attention.score_row(l, h, i);
                // copies: a held row stays valid only until other rows are widened
                const double* yp = held.attention.row(l, h, i);
                const std::vector<double> y(yp, yp + kT);
                const double* zyp = held.attention.score_row(l, h, i);
                const std::vector<double> zy(zyp, zyp + kT);
                double ds = 0, hi = -INFINITY, lo = INFINITY;
                for (int64_t j = 0; j <= i; ++j) {
                    ds = std::max(ds, std::abs(zx[j] - zy[j]));
                    hi = std::max(hi, zy[j]);
                    lo = std::min(lo, zy[j]);
                }
                const double rel = 2 * ds + kU32 +
                                   2 * testutil::f32_softmax_rel_bound(
                                           double(i + 2), std::max(hi, 0.0) - std::min(lo, 0.0));
                for (int64_t j = 0; j <= i; ++j)
                    worst = std::max(worst, std::abs(x[j] - y[j]) / (rel * y[j] + 0x1p-126));
            }
    EXPECT_ERROR_WITHIN(worst, 1.0);
}

// A sigmoid head whose visible scores are all very negative: every weight of its rows underflows
// to 0 in float32 (sigmoid(-200)), so the row over its sum would be 0 / 0. The closed row is the
// softmax of the logits log sigmoid(-200), all equal: uniform over the visible keys, 1 / (i + 1)
// within one float32 rounding, and no NaN reaches the analyses.
TEST(CaptureClosureUnderflow, ASigmoidRowOfZerosClosesToItsLogitsSoftmax) {
    const auto trainer = random_model(AttentionFunction::Sigmoid);
    const model::Model& m = trainer->model();
    const AnalysisInputs in = one_input();
    model::CaptureSpec very_negative;
    very_negative.edit(model::hook_name(HookPoint::AttnScores, 0),
                       [](const at::Tensor& s, const model::HookSite&) {
                           return at::where(s.isneginf(), s, at::full_like(s, -200.0));
                       });
    const model::ForwardResult raw = m.forward(
        in.model_input(m, 0),
        model::CaptureSpec({model::hook_name(HookPoint::Pattern, 0)}).add_edits(very_negative));
    EXPECT_EQ(raw.captured.at(model::hook_name(HookPoint::Pattern, 0)).abs().max().item<double>(),
              0.0)
        << "the raw rows underflow";
    const Captured c = capture_input(m, in, 0, {}, /*lazy=*/false, {}, &very_negative);
    for (int64_t h = 0; h < m.config().n_heads; ++h)
        for (int64_t i = 0; i < kT; ++i) {
            const double* row = c.attention.row(0, h, i);
            for (int64_t j = 0; j <= i; ++j)
                EXPECT_NEAR(row[j], 1.0 / double(i + 1), kU32 / double(i + 1))
                    << h << "," << i << "," << j;
        }
}

}  // namespace
}  // namespace sinkscope::analysis
