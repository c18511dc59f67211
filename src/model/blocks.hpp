// Internal (model families): the building blocks of the blocks: blocked linear products, norms,
// activations, MLPs, attention projections and the parameter list.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "attention_core.hpp"
#include "hook_recorder.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"
#include "weight_loader.hpp"

namespace sinkscope::model::detail {

// ---- Building blocks of the LayerNorm families (GPT-2, GPT-NeoX, Phi, BERT, ViT) ----

// at::linear(x, w.use(), b) (x [..., n_in], w [n_out, n_in], b [n_out] or undefined) with the
// output features in blocks of kLinearBlockRows weight rows: each block is one product
// x w[rows]^T on one thread, the blocks spread over forward_workers() threads (model.hpp), so a
// value does not depend on the thread count. A stored weight (Weight) is widened a block at a
// time, on the thread that multiplies it. While gradients are recorded, or off the CPU, the
// blocks run one after the other on the calling thread (the same values on the CPU).
constexpr int64_t kLinearBlockRows = 512;
at::Tensor linear(const at::Tensor& x, const Weight& w, const at::Tensor& b = {});

struct Linear {
    Weight w;
    at::Tensor b;
    at::Tensor operator()(const at::Tensor& x) const { return linear(x, w, b); }
};
// Linear weights of roles (w_role, b_role) of `layer`; no b_role: no bias.
Linear load_linear(WeightLoader& ld, TensorRole w_role, std::optional<TensorRole> b_role,
                   int64_t layer, int64_t n_out, int64_t n_in);

// LayerNorm with weight and bias, both [d_model] (HF nn.LayerNorm, in the compute dtype).
struct LayerNorm {
    at::Tensor w, b;
    double eps = 1e-5;
    at::Tensor operator()(const at::Tensor& x) const;  // x: [..., d_model]
};
LayerNorm load_layer_norm(WeightLoader& ld, TensorRole w_role, TensorRole b_role, int64_t layer,
                          int64_t d, double eps);

// RMS normalisation of the last dim in accum_type (f32), as HF's Llama / Gemma / Phi-3 RMSNorm
// compute it: x * rsqrt(mean(x^2) + eps) with x cast to f32 (the family applies its weight after).
at::Tensor rms_normalized(const at::Tensor& x, double eps);

// Elementwise activation of an MLP (Silu, GeluTanh = HF gelu_new, Gelu = exact erf).
at::Tensor activate(const at::Tensor& x, Activation act);

// Two-layer MLP: down(act(up(x))) (GPT-2 c_fc/c_proj, NeoX dense_h_to_4h/4h_to_h, Phi fc1/fc2).
struct Mlp {
    Linear up;    // [d_mlp, d_model]
    Linear down;  // [d_model, d_mlp]
    Activation act = Activation::Gelu;
    at::Tensor operator()(const at::Tensor& x) const { return down(activate(up(x), act)); }
};

// Separate q/k/v/output projections of one attention layer (fused layouts are split on load).
struct AttentionWeights {
    Linear q;     // [n_heads * d_head, d_model]
    Linear k, v;  // [n_kv_heads * d_head, d_model]
    Linear o;     // [d_model, n_heads * d_head]
};

// Builds a family's Transformer::parameters() list; undefined tensors (absent biases) are skipped.
struct ParameterList {
    std::vector<Parameter> items;
    void add(TensorRole role, int64_t layer, const at::Tensor& t) {
        if (t.defined()) items.push_back(Parameter{role, layer, t});
    }
    void add(TensorRole role, int64_t layer, const Weight& w) {
        if (w.defined()) items.push_back(Parameter{role, layer, w.param()});
    }
    void add(const Linear& lin, TensorRole w_role, TensorRole b_role, int64_t layer) {
        add(w_role, layer, lin.w);
        add(b_role, layer, lin.b);
    }
    void add(const LayerNorm& n, TensorRole w_role, TensorRole b_role, int64_t layer) {
        add(w_role, layer, n.w);
        add(b_role, layer, n.b);
    }
    // q, k, v, o weights and their biases.
    void add(const AttentionWeights& a, int64_t layer) {
        add(a.q, TensorRole::AttnQ, TensorRole::AttnQBias, layer);
        add(a.k, TensorRole::AttnK, TensorRole::AttnKBias, layer);
        add(a.v, TensorRole::AttnV, TensorRole::AttnVBias, layer);
        add(a.o, TensorRole::AttnO, TensorRole::AttnOBias, layer);
    }
};

// One attention sub-block on normalised input h [batch, pos, d_model]: projections, hook_q/k/v,
// RoPE on the first rope->rot_dim dims (rope null: no rotation, hook_rot_q/k = hook_q/k), attend()
// with scale `scale` and mask `hidden`, output projection. Returns [batch, pos, d_model].
at::Tensor self_attention(const at::Tensor& h, const AttentionWeights& w, const ModelConfig& c,
                          const RopeTables* rope, const AttentionMask& hidden, double scale,
                          int64_t layer, const HeadMask* mask, at::ScalarType dtype,
                          HookRecorder& hooks);

}  // namespace sinkscope::model::detail
