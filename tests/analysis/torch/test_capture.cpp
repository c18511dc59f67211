// The hand-off of captured attention to the analyses (analysis/capture.hpp): fp32 and fp64 host
// squares are served in place (held_attention) with exactly the rows of the fp64 copy
// (to_attention_input), the tensors held for as long as the rows are read; other dtypes and
// layouts are left to the copy.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "sinkscope/analysis/capture.hpp"
#include "sinkscope/model/hooks.hpp"

namespace sinkscope::analysis {
namespace {

constexpr int64_t kLayers = 2, kHeads = 3, kT = 7;

model::ModelConfig config() {
    model::ModelConfig c;
    c.n_layers = kLayers;
    c.n_heads = kHeads;
    c.n_kv_heads = kHeads;
    c.d_head = 4;
    c.causal = true;
    return c;
}

// Pattern (softmax of causal scores) and scores of every layer, [1, H, T, T] of `dtype`.
model::ForwardResult captured(at::ScalarType dtype, bool scores = true) {
    model::ForwardResult r;
    const at::Tensor hidden = at::ones({kT, kT}, at::kBool).triu(1);
    for (int64_t l = 0; l < kLayers; ++l) {
        const at::Tensor z =
            at::randn({1, kHeads, kT, kT}, at::kFloat).masked_fill(hidden, -INFINITY);
        r.captured[model::hook_name(model::HookPoint::Pattern, l)] = z.softmax(-1).to(dtype);
        if (scores) r.captured[model::hook_name(model::HookPoint::AttnScores, l)] = z.to(dtype);
    }
    return r;
}

TEST(Capture, HeldRowsAreTheCopysRowsAndOutliveTheResult) {
    at::manual_seed(3);
    for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
        model::ForwardResult r = captured(dtype);
        const metrics::AttentionInput copy = to_attention_input(r, config(), {});
        const auto held = held_attention(r, config());
        ASSERT_NE(held, nullptr);
        EXPECT_TRUE(held->has_scores());
        r.captured.clear();  // the source holds the tensors
        for (int64_t l = 0; l < kLayers; ++l)
            for (int64_t h = 0; h < kHeads; ++h)
                for (int64_t i = 0; i < kT; ++i) {
                    const double* p = held->row(l, h, i);
                    const double* z = held->score_row(l, h, i);
                    for (int64_t j = 0; j < kT; ++j) {
                        EXPECT_EQ(p[j], copy.row(l, h, i)[j]) << l << " " << h << " " << i;
                        EXPECT_EQ(z[j], copy.score_row(l, h, i)[j]) << l << " " << h << " " << i;
                    }
                }
    }
}

TEST(Capture, OtherDtypesLayoutsAndMissingScoresFallBackOrDropScores) {
    at::manual_seed(4);
    EXPECT_EQ(held_attention(captured(at::kBFloat16), config()), nullptr);
    EXPECT_EQ(held_attention(captured(at::kHalf), config()), nullptr);
    model::ForwardResult r = captured(at::kFloat);
    auto& p1 = r.captured[model::hook_name(model::HookPoint::Pattern, 1)];
    p1 = p1.transpose(2, 3).contiguous().transpose(2, 3);  // same values, not C order
    EXPECT_EQ(held_attention(r, config()), nullptr);
    EXPECT_FALSE(to_attention_input(r, config(), {}).pattern.empty());  // the copy still works
    // Scores of one layer missing: no scores at all, as in the copy.
    model::ForwardResult s = captured(at::kFloat);
    s.captured.erase(model::hook_name(model::HookPoint::AttnScores, 0));
    const auto held = held_attention(s, config());
    ASSERT_NE(held, nullptr);
    EXPECT_FALSE(held->has_scores());
    EXPECT_FALSE(to_attention_input(s, config(), {}).has_scores());
}

}  // namespace
}  // namespace sinkscope::analysis
