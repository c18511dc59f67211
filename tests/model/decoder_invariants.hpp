// Test helper: the attention invariants every causal family must satisfy on random weights
// (issue 6), shared by test_gpt2.cpp, test_gpt_neox.cpp and test_phi.cpp.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "random_weights.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"

namespace sinkscope::testutil {

inline model::WeightSource source_of(const MemoryWeightStore& s) {
    return model::WeightSource{&s, model::WeightFormat::HuggingFace, s.file};
}

// Finite logits; every pattern row sums to 1 over its visible keys (j <= i), masked entries are
// exactly 0 with score -inf, and hook_attn_scores = log(pattern) + a per-row constant.
inline void expect_attention_invariants(const model::Model& m, const std::vector<int32_t>& ids) {
    using namespace model;
    const ModelConfig& c = m.config();
    const ForwardResult r = m.forward(ids, CaptureSpec::attention());
    EXPECT_TRUE(at::isfinite(r.logits).all().item<bool>());
    const auto in = to_attention_input(r, c, ids);
    ASSERT_TRUE(in.has_scores());
    for (int64_t l = 0; l < c.n_layers; ++l)
        for (int64_t h = 0; h < c.n_heads; ++h)
            for (int64_t i = 0; i < in.n_tokens; ++i) {
                const double* p = in.row(l, h, i);
                const double* z = in.score_row(l, h, i);
                const double offset = z[i] - std::log(p[i]);
                double sum = 0;
                for (int64_t j = 0; j < in.n_tokens; ++j) {
                    if (j > i) {
                        EXPECT_EQ(p[j], 0.0) << l << "," << h << "," << i << "," << j;
                        EXPECT_TRUE(std::isinf(z[j]) && z[j] < 0);
                        continue;
                    }
                    sum += p[j];
                    EXPECT_NEAR(z[j] - std::log(p[j]), offset, 1e-4);
                }
                EXPECT_NEAR(sum, 1.0, 1e-6);
            }
}

// Zero-ablating every head of `layer` equals removing that layer's attention contribution: the
// same logits as the model whose output projection weight of `layer` is 0 (its bias, added
// after the heads, stays), and resid_mid - resid_pre = that bias. `o_weight` / `o_bias`: HF names
// of the layer's output projection weight and bias.
inline void expect_zero_ablation_removes_layer(const model::ModelConfig& c,
                                               const MemoryWeightStore& s,
                                               const std::string& o_weight,
                                               const std::string& o_bias, int64_t layer,
                                               const std::vector<int32_t>& ids) {
    using namespace model;
    MemoryWeightStore cut = s;
    for (auto& v : cut.tensors.at(o_weight).values) v = 0.0f;
    const Model m = build_model(c, source_of(s));
    const Model m_cut = build_model(c, source_of(cut));
    HeadMask mask(HeadMask::Kind::Zero, c.n_layers, c.n_heads);
    mask.ablate_layer(layer);
    const std::string prefix = "blocks." + std::to_string(layer) + ".hook_resid_*";
    const ForwardResult r = m.forward(ids, CaptureSpec({prefix}), &mask);
    const ForwardResult r_cut = m_cut.forward(ids);
    const ForwardResult r_full = m.forward(ids);
    const at::Tensor diff = r.captured.at(hook_name(HookPoint::ResidMid, layer)) -
                            r.captured.at(hook_name(HookPoint::ResidPre, layer));
    const auto& b = s.tensors.at(o_bias).values;
    const at::Tensor bias = at::tensor(b).view({1, 1, -1});
    EXPECT_TRUE(at::allclose(diff, bias.expand_as(diff), 1e-5, 1e-5));
    EXPECT_TRUE(at::allclose(r.logits, r_cut.logits, 1e-5, 1e-5));
    EXPECT_FALSE(at::allclose(r.logits, r_full.logits, 1e-3, 1e-3));  // the ablation did something
}

// Host f32 copy of a stored tensor (for recomputing a block from its definition in a test).
inline at::Tensor stored(const MemoryWeightStore& s, const std::string& name) {
    const auto& e = s.tensors.at(name);
    return at::tensor(e.values).view(e.shape);
}

}  // namespace sinkscope::testutil
