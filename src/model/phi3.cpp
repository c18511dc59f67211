// Phi-3 (HF Phi3ForCausalLM, transformers modeling_phi3.py; llama.cpp arch "phi3"): a Llama-style
// decoder (RMSNorm, SwiGLU, pre-norm residuals) with fused projections:
// * qkv_proj rows are [q (n_heads * d_head); k (n_kv_heads * d_head); v (n_kv_heads * d_head)];
// * gate_up_proj rows are [gate (d_mlp); up (d_mlp)], MLP = down(up * silu(gate));
// both are split on load so hook_q/k/v are the same tensors as in a Llama layout.
// RoPE rotates the first int(d_head * partial_rotary_factor) dims (rotate_half within them);
// rope_scaling longrope / su picks short or long divisors by sequence length (rope.cpp).
// sliding_window applies to every layer (Mistral's mask, row i sees j > i - window).
#include <cmath>
#include <vector>

#include <ATen/ATen.h>

#include "family_common.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"
#include "tensor_load.hpp"

namespace sinkscope::model {

namespace {

struct Phi3Layer {
    at::Tensor attn_norm;         // [d_model]
    detail::Weight wq;            // [n_heads * d_head, d_model]
    detail::Weight wk, wv;        // [n_kv_heads * d_head, d_model]
    detail::Weight wo;            // [d_model, n_heads * d_head]
    at::Tensor ffn_norm;          // [d_model]
    detail::Weight w_gate, w_up;  // [d_mlp, d_model]
    detail::Weight w_down;        // [d_model, d_mlp]
};

class Phi3Family final : public Transformer {
public:
    Phi3Family(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt);
    ForwardResult forward(const ModelInput& input, const CaptureSpec& capture,
                          const HeadMask* mask) const override;
    int64_t n_params() const override { return n_params_; }
    std::vector<Parameter> parameters() const override { return tensors_.parameters(); }

private:
    // Phi3RMSNorm (= LlamaRMSNorm): normalised in f32, weight applied in the compute dtype.
    at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w) const;

    ModelConfig c_;
    at::ScalarType dtype_;
    at::Device device_;
    detail::Weight embed_;  // [d_vocab, d_model]
    at::Tensor out_norm_;   // [d_model]
    detail::Weight w_out_;  // [d_vocab, d_model] (aliases embed_ when tied)
    std::vector<Phi3Layer> layers_;
    detail::TensorTable tensors_;  // parameters(), in load order
    int64_t n_params_ = 0;
};

Phi3Family::Phi3Family(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt)
    : c_(config), dtype_(detail::scalar_type(rt.dtype)), device_(detail::device_of(rt)) {
    using R = TensorRole;
    detail::WeightLoader ld(c_, src, rt);
    const int64_t D = c_.d_model, F = c_.d_mlp, qd = c_.n_heads * c_.d_head,
                  kd = c_.n_kv_heads * c_.d_head;
    const bool embed_from_output =
        c_.tied_embeddings && !ld.has(R::TokenEmbed) && ld.has(R::Output);
    embed_ = ld.weight(embed_from_output ? R::Output : R::TokenEmbed, -1, {c_.d_vocab, D},
                       R::TokenEmbed);
    out_norm_ = ld.get(R::OutputNorm, -1, {D});
    const bool tied =
        c_.tied_embeddings || (src.format != WeightFormat::HuggingFace && !ld.has(R::Output));
    w_out_ = tied ? embed_ : ld.weight(R::Output, -1, {c_.d_vocab, D});
    if (tied) ld.record(R::Output, -1, w_out_);
    for (int64_t l = 0; l < c_.n_layers; ++l) {
        Phi3Layer w;
        w.attn_norm = ld.get(R::AttnNorm, l, {D});
        // [q; k; v] rows
        std::vector<detail::Weight> qkv = ld.split_rows(
            R::AttnQKV, l, {qd + 2 * kd, D}, {qd, kd, kd}, {R::AttnQ, R::AttnK, R::AttnV});
        w.wq = qkv[0];
        w.wk = qkv[1];
        w.wv = qkv[2];
        w.wo = ld.weight(R::AttnO, l, {D, qd});
        w.ffn_norm = ld.get(R::FfnNorm, l, {D});
        // [gate; up] rows
        std::vector<detail::Weight> gate_up =
            ld.split_rows(R::FfnGateUp, l, {2 * F, D}, {F, F}, {R::FfnGate, R::FfnUp});
        w.w_gate = gate_up[0];
        w.w_up = gate_up[1];
        w.w_down = ld.weight(R::FfnDown, l, {D, F});
        layers_.push_back(std::move(w));
    }
    n_params_ = ld.n_params();
    tensors_ = ld.take_tensors();
}

at::Tensor Phi3Family::rms_norm(const at::Tensor& x, const at::Tensor& w) const {
    // [batch, pos, d_model]
    return w * detail::rms_normalized(x, c_.norm_eps).to(dtype_);
}

ForwardResult Phi3Family::forward(const ModelInput& input, const CaptureSpec& capture,
                                  const HeadMask* mask) const {
    const int64_t H = c_.n_heads, Hkv = c_.n_kv_heads, dh = c_.d_head;
    const int64_t rot = c_.rotary_dim > 0 ? c_.rotary_dim : dh;
    detail::DecoderFrame f(input, capture, mask, c_, rot, dtype_, device_);
    const int64_t B = f.ids.size(0), T = f.n_tokens;
    auto& hooks = f.hooks;
    // A later pipeline stage starts from the stream handed in (model.hpp LayerRange).
    at::Tensor x = f.stage.residual;  // [batch, pos, d_model]
    if (f.stage.embeds()) {
        x = embed_.rows(f.ids);
        x = hooks.keep(HookPoint::Embed, -1, x);
    }
    for (int64_t l = f.stage.begin; l < f.stage.end; ++l) {
        const Phi3Layer& w = layers_[static_cast<size_t>(l)];
        x = hooks.keep(HookPoint::ResidPre, l, x);
        const at::Tensor h = rms_norm(x, w.attn_norm);  // [batch, pos, d_model]
        const at::Tensor z =
            detail::hooked_attend(detail::linear(h, w.wq).view({B, T, H, dh}),
                                  detail::linear(h, w.wk).view({B, T, Hkv, dh}),
                                  detail::linear(h, w.wv).view({B, T, Hkv, dh}), &f.rope,
                                  f.mask_of(l), f.scale, l, mask, dtype_, hooks);
        x = x + detail::linear(z.view({B, T, H * dh}), w.wo);
        x = hooks.keep(HookPoint::ResidMid, l, x);
        const at::Tensor h2 = rms_norm(x, w.ffn_norm);
        const at::Tensor up = detail::linear(h2, w.w_up) * at::silu(detail::linear(h2, w.w_gate));
        x = x + detail::linear(up, w.w_down);
        x = hooks.keep(HookPoint::ResidPost, l, x);
    }
    if (!f.stage.ends_model()) return f.hand_over(x);
    const at::Tensor x_final = f.final_norm(rms_norm(x, out_norm_));  // [batch, pos, d_model]
    return f.finish(f.want_logits ? detail::linear(x_final, w_out_) : at::Tensor());
}

}  // namespace

std::unique_ptr<Transformer> build_phi3_family(const ModelConfig& config, const WeightSource& src,
                                               const RuntimeOptions& runtime) {
    return std::make_unique<Phi3Family>(config, src, runtime);
}

}  // namespace sinkscope::model
