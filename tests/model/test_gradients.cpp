// Gradients of the model's objective (model/gradients.hpp, model/objective.hpp) on every
// registered architecture with random weights in float64: reverse-mode gradients against central
// finite differences of the same loss, the parameter list against the parameter count, and the
// label draws of the "true" Fisher.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "random_weights.hpp"
#include "sinkscope/core/random.hpp"
#include "sinkscope/model/gradients.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/objective.hpp"
#include "sinkscope/model/registry.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
using testutil::MemoryWeightStore;

namespace {

std::vector<std::string> registered_names() {
    std::vector<std::string> out;
    for (const auto& a : architectures()) out.push_back(a.name);
    return out;
}

Model tiny_model(const std::string& arch, const MemoryWeightStore& store, ComputeDType dtype) {
    RuntimeOptions rt;
    rt.dtype = dtype;
    return build_model(testutil::tiny_config(arch),
                       WeightSource{&store, WeightFormat::HuggingFace, store.file}, rt);
}

// The sample's prediction task under the family's objective: next token (decoders), 30% of the
// tokens masked with id 1 as the mask token (encoders; the tiny models have no tokenizer), or one
// 8x8 image (ViT).
PredictionTask tiny_task(const Model& m) {
    const ModelConfig& c = m.config();
    if (c.is_vision()) {
        at::manual_seed(5);
        PredictionTask t;
        t.input.pixel_values = at::rand({1, 3, 8, 8}) * 2.0 - 1.0;
        t.rows = {0};
        return t;
    }
    const std::vector<int32_t> ids{2, 5, 9, 14, 33, 17, 4, 8, 21, 3};  // < d_vocab 40
    if (c.causal) return next_token_task(ids);
    MaskedLmVocabulary vocab;
    vocab.mask_id = 1;
    return masked_lm_task(ids, vocab, {.rate = 0.3, .seed = 9}, 0);
}

class GradientsOfEveryArchitecture : public ::testing::TestWithParam<std::string> {};

// The parameters are every tensor the loader counted, each once.
TEST_P(GradientsOfEveryArchitecture, ParametersAddUpToTheParameterCount) {
    const ModelConfig c = testutil::tiny_config(GetParam());
    const MemoryWeightStore store = testutil::random_weights(c);
    const Model m = tiny_model(GetParam(), store, ComputeDType::Float32);
    int64_t n = 0;
    std::set<const void*> seen;
    for (const Parameter& p : m.parameters()) {
        n += p.tensor.numel();
        EXPECT_TRUE(seen.insert(p.tensor.unsafeGetTensorImpl()).second)
            << role_info(p.role).name << " of layer " << p.layer << " listed twice";
        EXPECT_EQ(p.layer < 0,
                  p.role == TensorRole::TokenEmbed || p.role == TensorRole::Output ||
                      p.role == TensorRole::OutputNorm || p.role == TensorRole::OutputNormBias ||
                      p.role == TensorRole::OutputBias ||
                      role_info(p.role).component == Component::Embedding ||
                      role_info(p.role).component == Component::Output ||
                      p.role == TensorRole::EmbedNorm || p.role == TensorRole::EmbedNormBias)
            << role_info(p.role).name;
    }
    EXPECT_EQ(n, m.n_params());
}

// d loss / d theta from autograd against central differences of the loss, in float64. For each
// parameter tensor: its element with the largest |gradient| and two seeded random elements.
//
// Error budget of the check (h = 1e-4, Richardson extrapolation of the h and h/2 differences,
// D = (4 D(h/2) - D(h)) / 3): the truncation error is O(h^4 f^(5)) ~ 1e-16 for derivatives of
// order 1, far below what is tested. Rounding: each loss evaluation L (about 4 = log 40 here) is
// exact to at most k = 1e3 units in the last place (eps = 2.2e-16) after the forward's few
// thousand sequential float64 operations, and the extrapolated difference divides it by h / 2
// with weights (4 + 1) / 3 on each side, so its absolute error is at most
//     atol = 2 * (5/3) * k * eps * |L| / (h / 2) ~ 3e-8.
// Acceptance (issue): relative error < 1e-3, i.e. |D - g| <= 1e-3 |g| + atol.
TEST_P(GradientsOfEveryArchitecture, GradientsMatchFiniteDifferencesInFloat64) {
    const ModelConfig c = testutil::tiny_config(GetParam());
    const MemoryWeightStore store = testutil::random_weights(c);
    const Model m = tiny_model(GetParam(), store, ComputeDType::Float64);
    const PredictionTask task = tiny_task(m);
    ASSERT_FALSE(task.rows.empty());
    // Labels: the data's (text) or drawn from the model (vision: images carry no label).
    const std::vector<int64_t> labels =
        task.targets.empty() ? draw_labels(scored_log_probs(m, task), 11) : task.targets;
    auto loss = [&] { return mean_nll(scored_log_probs(m, task), labels).item<double>(); };

    std::vector<at::Tensor> grads;
    double l0 = 0;
    {
        GradientScope scope(m);
        const at::Tensor l = mean_nll(scored_log_probs(m, task), labels);
        EXPECT_EQ(l.scalar_type(), at::kDouble);
        l0 = l.item<double>();
        grads = scope.gradients(l);
    }
    EXPECT_NEAR(loss(), l0, 0.0) << "the loss outside the scope is the same function";
    const std::vector<Parameter> params = m.parameters();
    ASSERT_EQ(grads.size(), params.size());

    const double h = 1e-4, eps = 2.220446049250313e-16, k = 1e3;
    const double atol = 2.0 * (5.0 / 3.0) * k * eps * std::abs(l0) / (h / 2);
    Xoshiro256 rng(17);
    int64_t n_checked = 0, n_strong = 0;
    for (size_t i = 0; i < params.size(); ++i) {
        at::Tensor w = params[i].tensor.view(-1);  // the model's own storage
        const at::Tensor g = grads[i].reshape(-1);
        ASSERT_EQ(g.scalar_type(), at::kDouble);
        std::vector<int64_t> elems = {g.abs().argmax().item<int64_t>()};
        for (int r = 0; r < 2; ++r) elems.push_back(int64_t(rng.below(uint64_t(w.numel()))));
        for (int64_t e : elems) {
            const double w0 = w[e].item<double>();
            auto diff = [&](double step) {
                w[e].fill_(w0 + step);
                const double up = loss();
                w[e].fill_(w0 - step);
                const double down = loss();
                w[e].fill_(w0);
                return (up - down) / (2 * step);
            };
            const double fd = (4 * diff(h / 2) - diff(h)) / 3;
            const double ad = g[e].item<double>();
            EXPECT_LE(std::abs(fd - ad), 1e-3 * std::abs(ad) + atol)
                << role_info(params[i].role).name << " layer " << params[i].layer << " element "
                << e << ": autograd " << ad << ", finite differences " << fd;
            ++n_checked;
            n_strong += std::abs(ad) > 1e3 * atol;  // where the relative bound is what binds
        }
    }
    EXPECT_EQ(n_checked, int64_t(3 * params.size()));
    // The check is not vacuous: most tensors' largest gradient is far above the floor.
    EXPECT_GE(n_strong, int64_t(params.size()));
}

// Outside a scope the parameters do not require gradients and a forward records no graph.
TEST_P(GradientsOfEveryArchitecture, ScopeIsRestored) {
    const ModelConfig c = testutil::tiny_config(GetParam());
    const MemoryWeightStore store = testutil::random_weights(c);
    const Model m = tiny_model(GetParam(), store, ComputeDType::Float32);
    const PredictionTask task = tiny_task(m);
    {
        GradientScope scope(m);
        EXPECT_TRUE(scored_log_probs(m, task).requires_grad());
    }
    for (const Parameter& p : m.parameters()) EXPECT_FALSE(p.tensor.requires_grad());
    EXPECT_FALSE(scored_log_probs(m, task).requires_grad());
}

INSTANTIATE_TEST_SUITE_P(Gradients, GradientsOfEveryArchitecture,
                         ::testing::ValuesIn(registered_names()),
                         [](const auto& info) { return info.param; });

// Label draws: the same seed gives the same labels; over many rows of one distribution the
// counts follow it (5 binomial standard deviations: a false alarm has probability < 1e-6).
TEST(DrawLabels, FollowTheDistributionAndTheSeed) {
    const int64_t n = 20000;
    const std::vector<double> p = {0.1, 0.2, 0.0, 0.7};
    const at::Tensor logp = at::tensor(p, at::kDouble).log().view({1, 4}).expand({n, 4});
    const std::vector<int64_t> a = draw_labels(logp, 3), b = draw_labels(logp, 3),
                               other = draw_labels(logp, 4);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, other);
    std::vector<int64_t> count(4, 0);
    for (int64_t l : a) ++count[size_t(l)];
    EXPECT_EQ(count[2], 0) << "a class of probability 0 is never drawn";
    for (size_t j = 0; j < 4; ++j) {
        const double sd = std::sqrt(double(n) * p[j] * (1 - p[j]));
        EXPECT_NEAR(double(count[j]), double(n) * p[j], 5 * sd + 1e-9) << "class " << j;
    }
}

TEST(MaskedLmTask, MasksRoundedShareOfNonSpecialTokens) {
    MaskedLmVocabulary vocab;
    vocab.mask_id = 1;
    vocab.special = {2, 3};
    const std::vector<int32_t> ids{2, 7, 8, 9, 10, 11, 12, 13, 14, 15, 3};  // 9 maskable
    const PredictionTask t = masked_lm_task(ids, vocab, {.rate = 0.15, .seed = 4}, 6);
    ASSERT_EQ(t.rows.size(), 1u);  // round(0.15 x 9 = 1.35) = 1
    const int64_t pos = t.rows[0];
    EXPECT_TRUE(pos >= 1 && pos <= 9);
    EXPECT_EQ(t.targets[0], ids[size_t(pos)]);
    EXPECT_EQ(t.input.ids[0][pos].item<int64_t>(), 1);
    const PredictionTask many = masked_lm_task(ids, vocab, {.rate = 0.5, .seed = 4}, 6);
    EXPECT_EQ(many.rows.size(), 5u);  // round(4.5) = 5, halves up
    for (int64_t r : many.rows) EXPECT_FALSE(vocab.special.count(ids[size_t(r)]));
    EXPECT_EQ(masked_lm_task(ids, vocab, {.rate = 0.5, .seed = 4}, 6).rows, many.rows);
}

}  // namespace
