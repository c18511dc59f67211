// Test helper: the attention invariants every causal family must satisfy on random weights
// (issue 6), shared by test_gpt2.cpp, test_gpt_neox.cpp and test_phi.cpp.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "forward_bound.hpp"
#include "random_weights.hpp"
#include "sinkscope/analysis/capture.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"
#include "tensor_tolerance.hpp"

namespace sinkscope::testutil {

using analysis::to_attention_input;

inline model::WeightSource source_of(const MemoryWeightStore& s) {
    return model::WeightSource{&s, model::WeightFormat::HuggingFace, s.file};
}

// Finite logits; every pattern row sums to 1 over its visible keys (j <= i), masked entries are
// exactly 0 with score -inf, and hook_attn_scores = log(pattern) + a per-row constant (both up to
// float32 softmax rounding: expect_softmax_row).
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
                for (int64_t j = i + 1; j < in.n_tokens; ++j) {
                    EXPECT_EQ(p[j], 0.0) << l << "," << h << "," << i << "," << j;
                    EXPECT_TRUE(std::isinf(z[j]) && z[j] < 0);
                }
                expect_softmax_row(p, z, 0, i + 1, row_name(l, h, i));
            }
}

// Zero-ablating every head of `layer` equals removing that layer's attention contribution: exactly
// the same logits as the model whose output projection weight of `layer` is 0 (its bias, added
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
    // resid_mid = fl(x + b), and diff = fl(resid_mid - x): two roundings, u|x + b| + u|b|
    const at::Tensor x = r.captured.at(hook_name(HookPoint::ResidPre, layer));
    expect_close("resid_mid - resid_pre vs bias", diff, bias.expand_as(diff),
                 f32_step_tol(2, x.abs() + bias.abs()));
    // Exact: the ablated z and the zero weight both make the projection exactly 0 + bias, and
    // everything after it is the same code on the same shapes and values.
    EXPECT_TRUE(at::equal(r.logits, r_cut.logits));
    // the ablation did something: far above the float32 noise of two forwards
    const int64_t T = static_cast<int64_t>(ids.size());
    expect_differs("logits ablated vs full", r.logits, r_full.logits,
                   logit_tol(c, T, max_abs(r_full.logits)));
}

// Host f32 copy of a stored tensor (for recomputing a block from its definition in a test).
inline at::Tensor stored(const MemoryWeightStore& s, const std::string& name) {
    const auto& e = s.tensors.at(name);
    return at::tensor(e.values).view(e.shape);
}

}  // namespace sinkscope::testutil
