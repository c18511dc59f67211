// The Phi family (HF PhiForCausalLM, phi-1 / phi-1.5 / phi-2): separate q/k/v/dense projections
// with biases, partial rotary embedding, ONE input_layernorm feeding attention and MLP in
// parallel, fc1/fc2 MLP with gelu_new, final_layernorm, lm_head with bias (untied by default).
//
// Partial rotary: the first rotary_dim = int(d_head * partial_rotary_factor) dims of each head
// are rotated (rotate_half within them); the rest pass through.
// Residual: x + attn(ln(x)) + mlp(ln(x)) with the same ln(x); hook_resid_mid is defined as
// x + attn(ln(x)) (the MLP reads ln(x), not resid_mid).

#include <ATen/ATen.h>

#include "family_common.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"
#include "tensor_load.hpp"

namespace sinkscope::model {

namespace {

using detail::AttentionWeights;
using detail::LayerNorm;
using detail::Linear;
using detail::Mlp;
using detail::WeightLoader;

struct PhiLayer {
    LayerNorm input_layernorm;  // [d_model], shared by attention and MLP
    AttentionWeights attn;      // q [H*dh, D], k/v [Hkv*dh, D], dense [D, H*dh], all with bias
    Mlp mlp;                    // fc1 [d_mlp, d_model], fc2 [d_model, d_mlp]
};

class PhiFamily final : public Transformer {
public:
    PhiFamily(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt);
    ForwardResult forward(const ModelInput& input, const CaptureSpec& capture,
                          const HeadMask* mask) const override;
    int64_t n_params() const override { return n_params_; }
    std::vector<Parameter> parameters() const override { return tensors_.parameters(); }

private:
    ModelConfig c_;
    at::ScalarType dtype_;
    at::Device device_;
    detail::Weight embed_;  // [d_vocab, d_model]
    LayerNorm final_layernorm_;
    Linear lm_head_;  // [d_vocab, d_model] (embed_ when tied) + bias [d_vocab]
    std::vector<PhiLayer> layers_;
    detail::TensorTable tensors_;  // parameters(), in load order
    int64_t n_params_ = 0;
};

PhiFamily::PhiFamily(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt)
    : c_(config), dtype_(detail::scalar_type(rt.dtype)), device_(detail::device_of(rt)) {
    using R = TensorRole;
    WeightLoader ld(c_, src, rt);
    const int64_t D = c_.d_model, F = c_.d_mlp, qd = c_.n_heads * c_.d_head,
                  kd = c_.n_kv_heads * c_.d_head;
    embed_ = ld.weight(R::TokenEmbed, -1, {c_.d_vocab, D});
    final_layernorm_ =
        detail::load_layer_norm(ld, R::OutputNorm, R::OutputNormBias, -1, D, c_.norm_eps);
    lm_head_.w = c_.tied_embeddings ? embed_ : ld.weight(R::Output, -1, {c_.d_vocab, D});
    if (c_.tied_embeddings) ld.record(R::Output, -1, lm_head_.w);
    lm_head_.b = ld.get(R::OutputBias, -1, {c_.d_vocab});  // tying shares the weight only
    for (int64_t l = 0; l < c_.n_layers; ++l) {
        PhiLayer w;
        w.input_layernorm =
            detail::load_layer_norm(ld, R::AttnNorm, R::AttnNormBias, l, D, c_.norm_eps);
        w.attn.q = detail::load_linear(ld, R::AttnQ, R::AttnQBias, l, qd, D);
        w.attn.k = detail::load_linear(ld, R::AttnK, R::AttnKBias, l, kd, D);
        w.attn.v = detail::load_linear(ld, R::AttnV, R::AttnVBias, l, kd, D);
        w.attn.o = detail::load_linear(ld, R::AttnO, R::AttnOBias, l, D, qd);
        w.mlp.up = detail::load_linear(ld, R::FfnUp, R::FfnUpBias, l, F, D);
        w.mlp.down = detail::load_linear(ld, R::FfnDown, R::FfnDownBias, l, D, F);
        w.mlp.act = c_.act;
        layers_.push_back(std::move(w));
    }
    n_params_ = ld.n_params();
    tensors_ = ld.take_tensors();
}

ForwardResult PhiFamily::forward(const ModelInput& input, const CaptureSpec& capture,
                                 const HeadMask* mask) const {
    detail::DecoderFrame f(input, capture, mask, c_, c_.rotary_dim, dtype_, device_);
    // Pass 1: token embedding (positions come from RoPE).
    // A later pipeline stage starts from the stream handed in (model.hpp LayerRange).
    at::Tensor x = f.stage.residual;  // [batch, pos, d_model]
    if (f.stage.embeds()) {
        x = embed_.rows(f.ids);
        x = f.hooks.keep(HookPoint::Embed, -1, x);
    }

    for (int64_t l = f.stage.begin; l < f.stage.end; ++l) {
        const PhiLayer& w = layers_[static_cast<size_t>(l)];
        x = f.hooks.keep(HookPoint::ResidPre, l, x);
        // Pass 2: one LayerNorm; attention (partial RoPE) and MLP both read it.
        const at::Tensor h = w.input_layernorm(x);  // [batch, pos, d_model]
        at::Tensor mid = x + detail::self_attention(h, w.attn, c_, f.rope_or_null(), f.hidden,
                                                    f.scale, l, mask, dtype_, f.hooks);
        mid = f.hooks.keep(HookPoint::ResidMid, l, mid);
        x = mid + w.mlp(h);
        x = f.hooks.keep(HookPoint::ResidPost, l, x);
    }
    if (!f.stage.ends_model()) return f.hand_over(x);
    // Pass 3: final_layernorm and lm_head (with bias); logits in f32.
    const at::Tensor x_final = f.final_norm(final_layernorm_(x));  // [batch, pos, d_model]
    return f.finish(f.want_logits ? lm_head_(x_final) : at::Tensor());
}

}  // namespace

std::unique_ptr<Transformer> build_phi_family(const ModelConfig& config, const WeightSource& src,
                                              const RuntimeOptions& runtime) {
    return std::make_unique<PhiFamily>(config, src, runtime);
}

}  // namespace sinkscope::model
