// Gemma-2 (HF Gemma2ForCausalLM, transformers modeling_gemma2.py; llama.cpp arch "gemma2").
// What differs from Gemma (src/model/llama.cpp):
// * scores = q.k * query_pre_attn_scalar^-0.5, then soft-capped, cap * tanh(scores / cap)
//   (attn_logit_softcapping), before the mask; hook_attn_scores holds the capped scores;
// * sliding-window attention on the local layers (even layers, or config.json layer_types),
//   global causal attention on the others; row i sees j with i - j < window (spec section 0);
// * sandwich norms: x + post_attention_norm(attn(input_norm(x))), then
//   x + post_feedforward_norm(mlp(pre_feedforward_norm(x)));
// * logits = final_cap * tanh(logits / final_cap) (final_logit_softcapping).
// Shared with Gemma: RMSNorm scale (1 + w) in f32, embeddings times sqrt(d_model), GeGLU with the
// tanh GELU, grouped-query attention, tied embeddings.
#include <cmath>

#include <ATen/ATen.h>

#include "family_common.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"
#include "tensor_load.hpp"

namespace sinkscope::model {

namespace {

struct Gemma2Layer {
    at::Tensor input_norm;        // [d_model] f32, effective scale 1 + w
    detail::Weight wq;            // [n_heads * d_head, d_model]
    detail::Weight wk, wv;        // [n_kv_heads * d_head, d_model]
    detail::Weight wo;            // [d_model, n_heads * d_head]
    at::Tensor post_attn_norm;    // [d_model] f32
    at::Tensor pre_ffn_norm;      // [d_model] f32
    detail::Weight w_gate, w_up;  // [d_mlp, d_model]
    detail::Weight w_down;        // [d_model, d_mlp]
    at::Tensor post_ffn_norm;     // [d_model] f32
};

class Gemma2Family final : public Transformer {
public:
    Gemma2Family(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt);
    ForwardResult forward(const ModelInput& input, const CaptureSpec& capture,
                          const HeadMask* mask) const override;
    int64_t n_params() const override { return n_params_; }
    std::vector<Parameter> parameters() const override { return tensors_.parameters(); }

private:
    // Gemma2RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w) in f32, back to the compute dtype.
    at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& scale_f32) const;

    ModelConfig c_;
    at::ScalarType dtype_;
    at::Device device_;
    detail::Weight embed_;  // [d_vocab, d_model]
    at::Tensor out_norm_;   // [d_model] f32
    detail::Weight w_out_;  // [d_vocab, d_model] (aliases embed_ when tied)
    std::vector<Gemma2Layer> layers_;
    detail::TensorTable tensors_;  // parameters(), in load order
    int64_t n_params_ = 0;
};

Gemma2Family::Gemma2Family(const ModelConfig& config, const WeightSource& src,
                           const RuntimeOptions& rt)
    : c_(config), dtype_(detail::scalar_type(rt.dtype)), device_(detail::device_of(rt)) {
    using R = TensorRole;
    detail::WeightLoader ld(c_, src, rt);
    const int64_t D = c_.d_model, dh = c_.d_head, H = c_.n_heads, Hkv = c_.n_kv_heads;
    // Norm weights as the f32 effective scale: HF stores w (scale 1 + w), llama.cpp's converter
    // stores 1 + w (c.norm_add_one false). Counted once each.
    auto norm = [&](R role, int64_t layer) {
        at::Tensor host = ld.host(role, layer, {D});
        if (c_.norm_add_one) host = host + 1.0f;
        n_params_ += host.numel();
        at::Tensor scale = host.to(device_, detail::accum_type(dtype_)).contiguous();
        ld.record(role, layer, scale);
        return scale;
    };
    const bool embed_from_output =
        c_.tied_embeddings && !ld.has(R::TokenEmbed) && ld.has(R::Output);
    embed_ = ld.weight(embed_from_output ? R::Output : R::TokenEmbed, -1, {c_.d_vocab, D},
                       R::TokenEmbed);
    out_norm_ = norm(R::OutputNorm, -1);
    const bool tied =
        c_.tied_embeddings || (src.format != WeightFormat::HuggingFace && !ld.has(R::Output));
    w_out_ = tied ? embed_ : ld.weight(R::Output, -1, {c_.d_vocab, D});
    if (tied) ld.record(R::Output, -1, w_out_);
    for (int64_t l = 0; l < c_.n_layers; ++l) {
        Gemma2Layer w;
        w.input_norm = norm(R::AttnNorm, l);
        w.wq = ld.rope_rows_weight(R::AttnQ, l, H, dh, D);
        w.wk = ld.rope_rows_weight(R::AttnK, l, Hkv, dh, D);
        w.wv = ld.weight(R::AttnV, l, {Hkv * dh, D});
        w.wo = ld.weight(R::AttnO, l, {D, H * dh});
        w.post_attn_norm = norm(R::AttnPostNorm, l);
        w.pre_ffn_norm = norm(R::FfnNorm, l);
        w.w_gate = ld.weight(R::FfnGate, l, {c_.d_mlp, D});
        w.w_up = ld.weight(R::FfnUp, l, {c_.d_mlp, D});
        w.w_down = ld.weight(R::FfnDown, l, {D, c_.d_mlp});
        w.post_ffn_norm = norm(R::FfnPostNorm, l);
        layers_.push_back(std::move(w));
    }
    n_params_ += ld.n_params();
    tensors_ = ld.take_tensors();
}

at::Tensor Gemma2Family::rms_norm(const at::Tensor& x, const at::Tensor& scale_f32) const {
    // [batch, pos, d_model]
    return (detail::rms_normalized(x, c_.norm_eps) * scale_f32).to(dtype_);
}

ForwardResult Gemma2Family::forward(const ModelInput& input, const CaptureSpec& capture,
                                    const HeadMask* mask) const {
    const int64_t H = c_.n_heads, Hkv = c_.n_kv_heads, dh = c_.d_head;
    // RoPE over the whole head; f.mask_of(l): the window on local layers, causal on global ones;
    // f.scale = query_pre_attn_scalar^-0.5.
    detail::DecoderFrame f(input, capture, mask, c_, /*rot_dim=*/dh, dtype_, device_);
    const int64_t B = f.ids.size(0), T = f.n_tokens;
    auto& hooks = f.hooks;
    // Embedding times sqrt(d_model) rounded to the compute dtype (HF's normalizer tensor).
    // A later pipeline stage starts from the stream handed in (model.hpp LayerRange).
    at::Tensor x = f.stage.residual;  // [batch, pos, d_model]
    if (f.stage.embeds()) {
        x = embed_.rows(f.ids) *
            at::scalar_tensor(std::sqrt(static_cast<double>(c_.d_model)),
                              at::TensorOptions().dtype(dtype_).device(device_));
        x = hooks.keep(HookPoint::Embed, -1, x);
    }

    for (int64_t l = f.stage.begin; l < f.stage.end; ++l) {
        const Gemma2Layer& w = layers_[static_cast<size_t>(l)];
        x = hooks.keep(HookPoint::ResidPre, l, x);
        const at::Tensor h = rms_norm(x, w.input_norm);  // [batch, pos, d_model]
        const at::Tensor z =
            detail::hooked_attend(detail::linear(h, w.wq).view({B, T, H, dh}),
                                  detail::linear(h, w.wk).view({B, T, Hkv, dh}),
                                  detail::linear(h, w.wv).view({B, T, Hkv, dh}), &f.rope,
                                  f.mask_of(l), f.scale, l, mask, dtype_, hooks, c_.attn_softcap);
        x = x + rms_norm(detail::linear(z.view({B, T, H * dh}), w.wo), w.post_attn_norm);
        x = hooks.keep(HookPoint::ResidMid, l, x);
        const at::Tensor h2 = rms_norm(x, w.pre_ffn_norm);
        const at::Tensor gate =
            at::gelu(detail::linear(h2, w.w_gate), "tanh");  // [batch, pos, d_mlp]
        x = x +
            rms_norm(detail::linear(gate * detail::linear(h2, w.w_up), w.w_down), w.post_ffn_norm);
        x = hooks.keep(HookPoint::ResidPost, l, x);
    }
    if (!f.stage.ends_model()) return f.hand_over(x);
    const at::Tensor x_final = f.final_norm(rms_norm(x, out_norm_));  // [batch, pos, d_model]
    if (!f.want_logits) return f.finish(at::Tensor());
    at::Tensor logits =
        detail::linear(x_final, w_out_).to(detail::accum_type(dtype_));  // [batch, pos, d_vocab]
    if (c_.final_softcap > 0) logits = at::tanh(logits / c_.final_softcap) * c_.final_softcap;
    return f.finish(logits);
}

}  // namespace

std::unique_ptr<Transformer> build_gemma2_family(const ModelConfig& config, const WeightSource& src,
                                                 const RuntimeOptions& runtime) {
    return std::make_unique<Gemma2Family>(config, src, runtime);
}

}  // namespace sinkscope::model
