// LazyAttention (analysis/lazy_attention.hpp): attention rows recomputed from the captured
// rotated queries and keys, one row at a time through its cache (row) and a block at a time
// (copy_rows, the path of the reference-frame analyses), against a float64 softmax of the same q
// and k.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "sinkscope/analysis/lazy_attention.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/hooks.hpp"

namespace sinkscope::analysis {
namespace {

constexpr int64_t kT = 300;  // more than one copy_rows block (256) and many cache blocks (8)
constexpr int64_t kHeads = 2, kKvHeads = 1, kDHead = 8;

model::ModelConfig config() {
    model::ModelConfig c;
    c.n_layers = 1;
    c.n_heads = kHeads;
    c.n_kv_heads = kKvHeads;  // both query heads read key head 0 (GQA)
    c.d_head = kDHead;
    c.causal = true;
    return c;
}

// Rotated q [1, T, H, d] and k [1, T, H_kv, d] of layer 0, as a forward captures them.
model::ForwardResult captured(const at::Tensor& q, const at::Tensor& k) {
    model::ForwardResult r;
    r.captured[model::hook_name(model::HookPoint::RotQ, 0)] = q;
    r.captured[model::hook_name(model::HookPoint::RotK, 0)] = k;
    return r;
}

TEST(LazyAttention, RowsAndBlocksAreTheSoftmaxOfTheScaledScores) {
    at::manual_seed(7);
    const at::Tensor q = at::randn({1, kT, kHeads, kDHead}, at::kFloat);
    const at::Tensor k = at::randn({1, kT, kKvHeads, kDHead}, at::kFloat);
    auto result = captured(q, k);
    const auto cfg = config();
    const LazyAttention lazy(result, cfg);
    const at::Tensor q64 = q[0].to(at::kDouble), k64 = k[0].to(at::kDouble);
    const auto qd = q64.accessor<double, 3>(), kd = k64.accessor<double, 3>();
    const double scale = cfg.score_scale();
    // float32 arithmetic, u = 2^-24: each score q.k * scale is off by at most
    // (d + 1) u sum_c |q_c k_c| scale (a d-term dot product and one product); a probability
    // exp(s_j - max) / sum by twice the largest score error, plus the rounding of exp, the
    // division and the conversion (4 u) and of a sum of at most T terms (T u), relative.
    const double u = std::ldexp(1.0, -24);
    std::vector<double> block(static_cast<size_t>(kT * kT));
    for (int64_t h = 0; h < kHeads; ++h) {
        if (h == 0) {  // one call: blocks of 256 and 44 rows
            lazy.copy_rows(0, h, 0, kT, block.data());
        } else {  // two calls, the second starting inside a cache block
            lazy.copy_rows(0, h, 0, 137, block.data());
            lazy.copy_rows(0, h, 137, kT, block.data() + 137 * kT);
        }
        for (int64_t i = 0; i < kT; ++i) {
            const double* row = lazy.row(0, h, i);
            std::vector<double> s(static_cast<size_t>(i + 1));
            double max_s = -std::numeric_limits<double>::infinity(), max_err = 0;
            for (int64_t j = 0; j <= i; ++j) {
                double dot = 0, abs_dot = 0;
                for (int64_t c = 0; c < kDHead; ++c) {
                    const double a = qd[i][h][c], b = kd[j][0][c];
                    dot += a * b;
                    abs_dot += std::fabs(a * b);
                }
                s[static_cast<size_t>(j)] = dot * scale;
                max_s = std::max(max_s, dot * scale);
                max_err = std::max(max_err, (kDHead + 1) * u * abs_dot * scale);
            }
            double sum = 0;
            for (double v : s) sum += std::exp(v - max_s);
            const double rel = 2 * max_err + (4 + static_cast<double>(kT)) * u;
            for (int64_t j = 0; j < kT; ++j) {
                const double got_block = block[static_cast<size_t>(i * kT + j)];
                if (j > i) {  // masked keys: exactly 0 in both paths
                    ASSERT_EQ(got_block, 0.0) << "head " << h << " row " << i << " key " << j;
                    ASSERT_EQ(row[j], 0.0) << "head " << h << " row " << i << " key " << j;
                    continue;
                }
                const double want = std::exp(s[static_cast<size_t>(j)] - max_s) / sum;
                ASSERT_NEAR(got_block, want, rel * want)
                    << "copy_rows, head " << h << " row " << i << " key " << j;
                ASSERT_NEAR(row[j], want, rel * want)
                    << "row, head " << h << " row " << i << " key " << j;
            }
        }
    }
}

TEST(LazyAttention, NonFiniteScoresAreAnInputErrorOnBothPaths) {
    at::manual_seed(3);
    at::Tensor q = at::randn({1, kT, kHeads, kDHead}, at::kFloat);
    q[0][100][1][2] = std::numeric_limits<float>::quiet_NaN();
    const at::Tensor k = at::randn({1, kT, kKvHeads, kDHead}, at::kFloat);
    auto result = captured(q, k);
    const LazyAttention lazy(result, config());
    std::vector<double> block(static_cast<size_t>(kT * kT));
    lazy.copy_rows(0, 0, 0, kT, block.data());  // head 0 is finite
    try {
        lazy.copy_rows(0, 1, 0, kT, block.data());
        FAIL() << "a NaN query gave no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("head 1"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("not finite"), std::string::npos) << e.what();
    }
    EXPECT_THROW(lazy.row(0, 1, 100), InputError);
    EXPECT_NO_THROW(lazy.row(0, 1, 95));  // its cache block, rows 88..95, is finite
}

// drop_cache (between analyses) empties the row cache: rows read after it are computed again,
// with the same values as before it.
TEST(LazyAttention, DroppedCacheRecomputesTheSameRows) {
    at::manual_seed(5);
    const at::Tensor q = at::randn({1, kT, kHeads, kDHead}, at::kFloat);
    const at::Tensor k = at::randn({1, kT, kKvHeads, kDHead}, at::kFloat);
    auto result = captured(q, k);
    const LazyAttention lazy(result, config());
    const std::vector<double> before(lazy.row(0, 1, 42), lazy.row(0, 1, 42) + kT);
    const int64_t computed = lazy.n_computed_blocks();
    lazy.row(0, 1, 43);  // same cache block: not computed again
    EXPECT_EQ(lazy.n_computed_blocks(), computed);
    lazy.drop_cache();
    const double* again = lazy.row(0, 1, 42);
    EXPECT_EQ(lazy.n_computed_blocks(), computed + 1);
    EXPECT_EQ(std::vector<double>(again, again + kT), before);
}

}  // namespace
}  // namespace sinkscope::analysis
