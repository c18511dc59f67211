// The GPT-NeoX family (HF GPTNeoXForCausalLM: Pythia, GPT-NeoX-20B): fused per-head q/k/v,
// partial rotary embedding, parallel residual, LayerNorm with bias, exact-erf GELU, untied
// embed_out. Eager attention with every hook of hooks.hpp.
//
// query_key_value layout: in HF its 3 * d_model output rows are grouped per head, then per part:
//     row h * 3 * d_head + p * d_head + i,   p = 0 (q), 1 (k), 2 (v)
// (HF views the projection as [batch, pos, n_heads, 3 * d_head] and splits the last dim); GGUF's
// attn_qkv is [all q; all k; all v]. WeightLoader::host_qkv gives the latter from both, which
// is split into separate q/k/v projections whose rows are h * d_head + i.
// Partial rotary: only the first rotary_dim = int(d_head * rotary_pct) dims of each head are
// rotated (rotate_half within those dims); the rest pass through.
//
// hook_resid_mid with the parallel residual x + attn(ln1(x)) + mlp(ln2(x)) is defined as
// x + attn(ln1(x)) (the MLP reads x, not resid_mid); with use_parallel_residual=false it is the
// usual sequential residual stream after attention.

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

struct NeoxLayer {
    LayerNorm input_layernorm, post_attention_layernorm;  // [d_model]
    AttentionWeights attn;  // q/k/v split from query_key_value; o = attention.dense
    Mlp mlp;                // dense_h_to_4h [d_mlp, d_model], dense_4h_to_h [d_model, d_mlp]
};

class GptNeoxFamily final : public Transformer {
public:
    GptNeoxFamily(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt);
    ForwardResult forward(const ModelInput& input, const CaptureSpec& capture,
                          const HeadMask* mask) const override;
    int64_t n_params() const override { return n_params_; }
    std::vector<Parameter> parameters() const override { return tensors_.parameters(); }

private:
    ModelConfig c_;
    at::ScalarType dtype_;
    at::Device device_;
    detail::Weight embed_in_;  // [d_vocab, d_model]
    LayerNorm final_layer_norm_;
    Linear embed_out_;  // [d_vocab, d_model], no bias; embed_in_ when tied
    std::vector<NeoxLayer> layers_;
    detail::TensorTable tensors_;  // parameters(), in load order
    int64_t n_params_ = 0;
};

GptNeoxFamily::GptNeoxFamily(const ModelConfig& config, const WeightSource& src,
                             const RuntimeOptions& rt)
    : c_(config), dtype_(detail::scalar_type(rt.dtype)), device_(detail::device_of(rt)) {
    using R = TensorRole;
    WeightLoader ld(c_, src, rt);
    const int64_t D = c_.d_model, F = c_.d_mlp, H = c_.n_heads, dh = c_.d_head;
    embed_in_ = ld.weight(R::TokenEmbed, -1, {c_.d_vocab, D});
    final_layer_norm_ =
        detail::load_layer_norm(ld, R::OutputNorm, R::OutputNormBias, -1, D, c_.norm_eps);
    embed_out_.w = c_.tied_embeddings ? embed_in_ : ld.weight(R::Output, -1, {c_.d_vocab, D});
    if (c_.tied_embeddings) ld.record(R::Output, -1, embed_out_.w);
    for (int64_t l = 0; l < c_.n_layers; ++l) {
        NeoxLayer w;
        w.input_layernorm =
            detail::load_layer_norm(ld, R::AttnNorm, R::AttnNormBias, l, D, c_.norm_eps);
        // [3 * H * dh, D] with rows [all q; all k; all v] (the loader re-orders HF's per-head
        // grouping); part p -> [H * dh, D]
        const std::vector<detail::Weight> qkv_w = ld.qkv_parts(R::AttnQKV, l, H, dh, D);
        const at::Tensor qkv_b = ld.host_qkv(R::AttnQKVBias, l, H, dh, 0);
        Linear* parts[] = {&w.attn.q, &w.attn.k, &w.attn.v};
        for (int64_t p = 0; p < 3; ++p) {
            parts[p]->w = qkv_w[static_cast<size_t>(p)];
            parts[p]->b = ld.to_device(qkv_b.narrow(0, p * H * dh, H * dh));
            detail::record_qkv_part(ld, p, l, *parts[p]);
        }
        w.attn.o = detail::load_linear(ld, R::AttnO, R::AttnOBias, l, D, H * dh);
        w.post_attention_layernorm =
            detail::load_layer_norm(ld, R::FfnNorm, R::FfnNormBias, l, D, c_.norm_eps);
        w.mlp.up = detail::load_linear(ld, R::FfnUp, R::FfnUpBias, l, F, D);
        w.mlp.down = detail::load_linear(ld, R::FfnDown, R::FfnDownBias, l, D, F);
        w.mlp.act = c_.act;
        layers_.push_back(std::move(w));
    }
    n_params_ = ld.n_params();
    tensors_ = ld.take_tensors();
}

ForwardResult GptNeoxFamily::forward(const ModelInput& input, const CaptureSpec& capture,
                                     const HeadMask* mask) const {
    detail::DecoderFrame f(input, capture, mask, c_, c_.rotary_dim, dtype_, device_);
    // Pass 1: token embedding (no position embedding: RoPE).
    // A later pipeline stage starts from the stream handed in (model.hpp LayerRange).
    at::Tensor x = f.stage.residual;  // [batch, pos, d_model]
    if (f.stage.embeds()) {
        x = embed_in_.rows(f.ids);
        x = f.hooks.keep(HookPoint::Embed, -1, x);
    }

    for (int64_t l = f.stage.begin; l < f.stage.end; ++l) {
        const NeoxLayer& w = layers_[static_cast<size_t>(l)];
        x = f.hooks.keep(HookPoint::ResidPre, l, x);
        // Pass 2: attention on input_layernorm(x) with partial RoPE.
        const at::Tensor attn =
            detail::self_attention(w.input_layernorm(x), w.attn, c_, f.rope_or_null(), f.hidden,
                                   f.scale, l, mask, dtype_, f.hooks);
        // Pass 3: MLP on post_attention_layernorm of x (parallel) or of x + attn (sequential).
        at::Tensor mid = x + attn;  // [batch, pos, d_model]
        mid = f.hooks.keep(HookPoint::ResidMid, l, mid);
        x = mid + w.mlp(w.post_attention_layernorm(c_.parallel_residual ? x : mid));
        x = f.hooks.keep(HookPoint::ResidPost, l, x);
    }
    if (!f.stage.ends_model()) return f.hand_over(x);
    // Pass 4: final_layer_norm and embed_out; logits in f32.
    const at::Tensor x_final = f.final_norm(final_layer_norm_(x));  // [batch, pos, d_model]
    return f.finish(f.want_logits ? embed_out_(x_final) : at::Tensor());
}

}  // namespace

std::unique_ptr<Transformer> build_gpt_neox_family(const ModelConfig& config,
                                                   const WeightSource& src,
                                                   const RuntimeOptions& runtime) {
    return std::make_unique<GptNeoxFamily>(config, src, runtime);
}

}  // namespace sinkscope::model
