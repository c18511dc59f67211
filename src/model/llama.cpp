// The Llama family: llama, mistral (sliding window), qwen2 (q/k/v bias), gemma (RMSNorm 1 + w,
// sqrt(d_model) embedding scale, GeGLU with tanh GELU); grouped-query attention. Eager attention
// with explicit scores and pattern so every hook of hooks.hpp is a real tensor.
//
// GGUF and llama2.c store Q/K rows in llama.cpp's interleaved RoPE order; the loader returns them
// in the HF rotate_half order (detail::WeightLoader::host_rope_rows), so hooks are identical
// across formats.
#include <cmath>

#include <ATen/ATen.h>

#include "family_common.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"
#include "tensor_load.hpp"

namespace sinkscope::model {

namespace {

struct LayerWeights {
    at::Tensor attn_norm, attn_norm_f32;  // [d_model] (compute dtype, f32)
    detail::Weight wq;                    // [n_heads * d_head, d_model]
    detail::Weight wk, wv;                // [n_kv_heads * d_head, d_model]
    detail::Weight wo;                    // [d_model, n_heads * d_head]
    at::Tensor bq, bk, bv;                // [n_heads * d_head], [n_kv_heads * d_head]; qwen2 only
    at::Tensor slot_k, slot_v;            // [n_kv_heads * d_head]: the kv slot (config kv_slot)
    at::Tensor ffn_norm, ffn_norm_f32;    // [d_model]
    detail::Weight w_gate, w_up;          // [d_mlp, d_model]
    detail::Weight w_down;                // [d_model, d_mlp]
};

class LlamaFamily final : public Transformer {
public:
    LlamaFamily(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt);
    ForwardResult forward(const ModelInput& input, const CaptureSpec& capture,
                          const HeadMask* mask) const override;
    int64_t n_params() const override { return n_params_; }
    std::vector<Parameter> parameters() const override { return tensors_.parameters(); }

private:
    at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& w_f32) const;

    ModelConfig c_;
    at::ScalarType dtype_;
    at::Device device_;
    detail::Weight embed_;                // [d_vocab, d_model]
    at::Tensor out_norm_, out_norm_f32_;  // [d_model]
    detail::Weight w_out_;                // [d_vocab, d_model] (aliases embed_ when tied)
    std::vector<LayerWeights> layers_;
    detail::TensorTable tensors_;  // parameters(), in load order
    int64_t n_params_ = 0;
};

LlamaFamily::LlamaFamily(const ModelConfig& config, const WeightSource& src,
                         const RuntimeOptions& rt)
    : c_(config), dtype_(detail::scalar_type(rt.dtype)), device_(detail::device_of(rt)) {
    using R = TensorRole;
    detail::WeightLoader ld(c_, src, rt);
    const int64_t D = c_.d_model, dh = c_.d_head, H = c_.n_heads, Hkv = c_.n_kv_heads;
    // Norm weights: the compute-dtype copy (Llama multiplies in the compute dtype, counted) and
    // an f32 copy holding the effective scale (Gemma multiplies by 1 + w in f32).
    auto norm = [&](R role, int64_t layer, at::Tensor& w, at::Tensor& w_f32) {
        at::Tensor host = ld.host(role, layer, {D});
        if (c_.norm_add_one) host = host + 1.0f;
        w_f32 = host.to(device_, detail::accum_type(dtype_)).contiguous();
        w = ld.to_device(host);
        // The scale the forward multiplies by: the f32 copy holds 1 + w when norm_add_one.
        ld.record(role, layer, c_.norm_add_one ? w_f32 : w);
    };

    // Tied HF checkpoints may store only lm_head.weight (transformers then fills both).
    const bool embed_from_output =
        c_.tied_embeddings && !ld.has(R::TokenEmbed) && ld.has(R::Output);
    embed_ = ld.weight(embed_from_output ? R::Output : R::TokenEmbed, -1, {c_.d_vocab, D},
                       R::TokenEmbed);
    norm(R::OutputNorm, -1, out_norm_, out_norm_f32_);
    // HF: config.json decides; GGUF omits output.weight and llama2.c omits wcls when tied.
    const bool tied =
        c_.tied_embeddings || (src.format != WeightFormat::HuggingFace && !ld.has(R::Output));
    w_out_ = tied ? embed_ : ld.weight(R::Output, -1, {c_.d_vocab, D});
    if (tied) ld.record(R::Output, -1, w_out_);

    for (int64_t l = 0; l < c_.n_layers; ++l) {
        LayerWeights w;
        norm(R::AttnNorm, l, w.attn_norm, w.attn_norm_f32);
        w.wq = ld.rope_rows_weight(R::AttnQ, l, H, dh, D);
        w.wk = ld.rope_rows_weight(R::AttnK, l, Hkv, dh, D);
        w.wv = ld.weight(R::AttnV, l, {Hkv * dh, D});
        w.wo = ld.weight(R::AttnO, l, {D, H * dh});
        if (c_.qkv_bias) {
            w.bq = ld.get(R::AttnQBias, l, {H * dh});
            w.bk = ld.get(R::AttnKBias, l, {Hkv * dh});
            w.bv = ld.get(R::AttnVBias, l, {Hkv * dh});
        }
        if (c_.kv_slot) {
            w.slot_k = ld.get(R::AttnSlotK, l, {Hkv * dh});
            w.slot_v = ld.get(R::AttnSlotV, l, {Hkv * dh});
        }
        norm(R::FfnNorm, l, w.ffn_norm, w.ffn_norm_f32);
        w.w_gate = ld.weight(R::FfnGate, l, {c_.d_mlp, D});
        w.w_up = ld.weight(R::FfnUp, l, {c_.d_mlp, D});
        w.w_down = ld.weight(R::FfnDown, l, {D, c_.d_mlp});
        layers_.push_back(std::move(w));
    }
    n_params_ = ld.n_params();
    tensors_ = ld.take_tensors();
}

at::Tensor LlamaFamily::rms_norm(const at::Tensor& x, const at::Tensor& w,
                                 const at::Tensor& w_f32) const {
    // [batch, pos, d_model]; normalised in f32 as HF LlamaRMSNorm / GemmaRMSNorm do.
    const at::Tensor xf = detail::rms_normalized(x, c_.norm_eps);
    if (c_.norm_add_one) return (xf * w_f32).to(dtype_);
    return w * xf.to(dtype_);
}

ForwardResult LlamaFamily::forward(const ModelInput& input, const CaptureSpec& capture,
                                   const HeadMask* mask) const {
    const int64_t H = c_.n_heads, Hkv = c_.n_kv_heads, dh = c_.d_head;
    // RoPE over the whole head (HF LlamaRotaryEmbedding) and the causal / sliding-window mask of
    // spec section 0: row i sees j <= i and j > i - window.
    detail::DecoderFrame f(input, capture, mask, c_, /*rot_dim=*/dh, dtype_, device_);
    const int64_t B = f.ids.size(0), T = f.n_tokens;
    auto& hooks = f.hooks;
    // Pass 1: embedding (Gemma scales by sqrt(d_model) rounded to the compute dtype, as HF).
    // A later pipeline stage starts from the stream handed in (model.hpp LayerRange).
    at::Tensor x = f.stage.residual;  // [batch, pos, d_model]
    if (f.stage.embeds()) {
        x = embed_.rows(f.ids);
        if (c_.embed_scale)
            x = x * at::scalar_tensor(std::sqrt(static_cast<double>(c_.d_model)),
                                      at::TensorOptions().dtype(dtype_).device(device_));
        x = hooks.keep(HookPoint::Embed, -1, x);
    }

    for (int64_t l = f.stage.begin; l < f.stage.end; ++l) {
        const LayerWeights& w = layers_[static_cast<size_t>(l)];
        x = hooks.keep(HookPoint::ResidPre, l, x);
        // Pass 2: attention.
        const at::Tensor h = rms_norm(x, w.attn_norm, w.attn_norm_f32);  // [batch, pos, d_model]
        const at::Tensor z = detail::hooked_attend(
            detail::linear(h, w.wq, w.bq).view({B, T, H, dh}),
            detail::linear(h, w.wk, w.bk).view({B, T, Hkv, dh}),
            detail::linear(h, w.wv, w.bv).view({B, T, Hkv, dh}), &f.rope,
            f.slot_mask(l, w.slot_k, w.slot_v), f.scale, l, mask, dtype_, hooks);
        x = x + detail::linear(z.view({B, T, H * dh}), w.wo);
        x = hooks.keep(HookPoint::ResidMid, l, x);
        // Pass 3: gated MLP, down(act(gate(x)) * up(x)).
        const at::Tensor h2 = rms_norm(x, w.ffn_norm, w.ffn_norm_f32);
        at::Tensor gate = detail::linear(h2, w.w_gate);  // [batch, pos, d_mlp]
        gate = c_.act == Activation::Silu ? at::silu(gate) : at::gelu(gate, "tanh");
        x = x + detail::linear(gate * detail::linear(h2, w.w_up), w.w_down);
        x = hooks.keep(HookPoint::ResidPost, l, x);
    }
    if (!f.stage.ends_model()) return f.hand_over(x);
    // Pass 4: final norm and unembedding; logits handed out in f32.
    const at::Tensor x_final =
        f.final_norm(rms_norm(x, out_norm_, out_norm_f32_));  // [batch, pos, d_model]
    return f.finish(f.want_logits ? detail::linear(x_final, w_out_) : at::Tensor());
}

}  // namespace

std::unique_ptr<Transformer> build_llama_family(const ModelConfig& config, const WeightSource& src,
                                                const RuntimeOptions& runtime) {
    return std::make_unique<LlamaFamily>(config, src, runtime);
}

}  // namespace sinkscope::model
