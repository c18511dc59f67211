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

// Records part `part` (0: q, 1: k, 2: v) of a fused q/k/v projection with its bias part in the
// loader's tensor table (WeightLoader::qkv_parts leaves the parts to the family, which lists each
// weight part beside its bias part).
inline void record_qkv_part(WeightLoader& ld, int64_t part, int64_t layer, const Linear& lin) {
    static constexpr TensorRole kWeight[] = {TensorRole::AttnQ, TensorRole::AttnK,
                                             TensorRole::AttnV};
    static constexpr TensorRole kBias[] = {TensorRole::AttnQBias, TensorRole::AttnKBias,
                                           TensorRole::AttnVBias};
    ld.record(kWeight[part], layer, lin.w);
    ld.record(kBias[part], layer, lin.b);
}

// q [batch, pos, n_heads, d_head], k, v [batch, pos, n_kv_heads, d_head] of one layer through
// hook_q/k/v, RoPE of the first rope->rot_dim dims (rope null: no rotation, hook_rot_q/k =
// hook_q/k) and hook_rot_q/k, as the forward goes on with them (editing hooks), then attend().
// Returns z [batch, pos, n_heads, d_head].
at::Tensor hooked_attend(at::Tensor q, at::Tensor k, at::Tensor v, const RopeTables* rope,
                         const AttentionMask& hidden, double scale, int64_t layer,
                         const HeadMask* mask, at::ScalarType dtype, HookRecorder& hooks,
                         double softcap = 0.0);

// One attention sub-block on normalised input h [batch, pos, d_model]: projections, hook_q/k/v,
// RoPE on the first rope->rot_dim dims (rope null: no rotation, hook_rot_q/k = hook_q/k), attend()
// with scale `scale` and mask `hidden`, output projection. Returns [batch, pos, d_model].
at::Tensor self_attention(const at::Tensor& h, const AttentionWeights& w, const ModelConfig& c,
                          const RopeTables* rope, const AttentionMask& hidden, double scale,
                          int64_t layer, const HeadMask* mask, at::ScalarType dtype,
                          HookRecorder& hooks);

}  // namespace sinkscope::model::detail
