// The GPT-2 family (HF GPT2LMHeadModel): learned positions, pre-LN LayerNorm with bias, fused
// c_attn, gelu_new MLP, final ln_f, lm_head tied to wte. Eager attention as in llama.cpp.
//
// Weight layout: HF GPT-2's Conv1D stores weights [in, out] (y = x W + b); the WeightLoader hands
// out every projection in the [out, in] layout of at::linear (GGUF stores that already). c_attn's
// output rows are [q; k; v], each d_model wide (head h = rows h*d_head .. (h+1)*d_head - 1 of its
// part).
// No RoPE: hook_rot_q / hook_rot_k are hook_q / hook_k.

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

struct Gpt2Layer {
    LayerNorm ln_1, ln_2;       // [d_model]
    AttentionWeights attn;      // split from c_attn, transposed
    Mlp mlp;                    // c_fc [d_mlp, d_model], c_proj [d_model, d_mlp] after transposing
    at::Tensor slot_k, slot_v;  // [n_heads * d_head]: the kv slot (config kv_slot)
};

class Gpt2Family final : public Transformer {
public:
    Gpt2Family(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt);
    ForwardResult forward(const ModelInput& input, const CaptureSpec& capture,
                          const HeadMask* mask) const override;
    int64_t n_params() const override { return n_params_; }
    std::vector<Parameter> parameters() const override { return tensors_.parameters(); }

private:
    ModelConfig c_;
    at::ScalarType dtype_;
    at::Device device_;
    detail::Weight wte_;  // [d_vocab, d_model]
    at::Tensor wpe_;      // [n_ctx, d_model]
    LayerNorm ln_f_;
    Linear out_;  // [d_vocab, d_model]; wte_ when tied
    std::vector<Gpt2Layer> layers_;
    detail::TensorTable tensors_;  // parameters(), in load order
    int64_t n_params_ = 0;
};

Gpt2Family::Gpt2Family(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt)
    : c_(config), dtype_(detail::scalar_type(rt.dtype)), device_(detail::device_of(rt)) {
    using R = TensorRole;
    WeightLoader ld(c_, src, rt);
    const int64_t D = c_.d_model, F = c_.d_mlp;
    wte_ = ld.weight(R::TokenEmbed, -1, {c_.d_vocab, D});
    wpe_ = ld.get(R::PosEmbed, -1, {c_.n_ctx, D});
    ln_f_ = detail::load_layer_norm(ld, R::OutputNorm, R::OutputNormBias, -1, D, c_.norm_eps);
    out_.w = c_.tied_embeddings ? wte_ : ld.weight(R::Output, -1, {c_.d_vocab, D});
    if (c_.tied_embeddings) ld.record(R::Output, -1, out_.w);
    for (int64_t l = 0; l < c_.n_layers; ++l) {
        Gpt2Layer w;
        w.ln_1 = detail::load_layer_norm(ld, R::AttnNorm, R::AttnNormBias, l, D, c_.norm_eps);
        // c_attn [3D, D] (transposed from Conv1D by the loader); rows [q; k; v]
        const std::vector<detail::Weight> qkv_w =
            ld.qkv_parts(R::AttnQKV, l, c_.n_heads, c_.d_head, D);
        const at::Tensor qkv_b = ld.host_qkv(R::AttnQKVBias, l, c_.n_heads, c_.d_head, 0);
        Linear* parts[] = {&w.attn.q, &w.attn.k, &w.attn.v};
        for (int64_t p = 0; p < 3; ++p) {
            parts[p]->w = qkv_w[static_cast<size_t>(p)];
            parts[p]->b = ld.to_device(qkv_b.narrow(0, p * D, D));
            detail::record_qkv_part(ld, p, l, *parts[p]);
        }
        if (c_.kv_slot) {
            w.slot_k = ld.get(R::AttnSlotK, l, {D});
            w.slot_v = ld.get(R::AttnSlotV, l, {D});
        }
        w.attn.o = detail::load_linear(ld, R::AttnO, R::AttnOBias, l, D, D);
        w.ln_2 = detail::load_layer_norm(ld, R::FfnNorm, R::FfnNormBias, l, D, c_.norm_eps);
        w.mlp.up = detail::load_linear(ld, R::FfnUp, R::FfnUpBias, l, F, D);
        w.mlp.down = detail::load_linear(ld, R::FfnDown, R::FfnDownBias, l, D, F);
        w.mlp.act = c_.act;
        layers_.push_back(std::move(w));
    }
    n_params_ = ld.n_params();
    tensors_ = ld.take_tensors();
}

ForwardResult Gpt2Family::forward(const ModelInput& input, const CaptureSpec& capture,
                                  const HeadMask* mask) const {
    detail::DecoderFrame f(input, capture, mask, c_, /*rot_dim=*/0, dtype_, device_);
    const int64_t T = f.n_tokens;
    if (T > c_.n_ctx)
        throw UsageError("GPT-2 has " + std::to_string(c_.n_ctx) +
                         " learned positions; the input has " + std::to_string(T) + " tokens");
    // Pass 1: token + learned position embeddings (positions 0..T-1).
    // A later pipeline stage starts from the stream handed in (model.hpp LayerRange).
    at::Tensor x = f.stage.residual;  // [batch, pos, d_model]
    if (f.stage.embeds()) {
        x = wte_.rows(f.ids) + wpe_.narrow(0, 0, T);
        x = f.hooks.keep(HookPoint::Embed, -1, x);
    }

    for (int64_t l = f.stage.begin; l < f.stage.end; ++l) {
        const Gpt2Layer& w = layers_[static_cast<size_t>(l)];
        x = f.hooks.keep(HookPoint::ResidPre, l, x);
        // Pass 2: x + attn(ln_1(x)), then x + mlp(ln_2(x)) (sequential pre-LN residual).
        x = x + detail::self_attention(w.ln_1(x), w.attn, c_, nullptr,
                                       f.slot_mask(l, w.slot_k, w.slot_v), f.scale, l, mask, dtype_,
                                       f.hooks);
        x = f.hooks.keep(HookPoint::ResidMid, l, x);
        x = x + w.mlp(w.ln_2(x));
        x = f.hooks.keep(HookPoint::ResidPost, l, x);
    }
    if (!f.stage.ends_model()) return f.hand_over(x);
    // Pass 3: ln_f and the (tied) unembedding; logits in f32.
    const at::Tensor x_final = f.final_norm(ln_f_(x));  // [batch, pos, d_model]
    return f.finish(f.want_logits ? out_(x_final) : at::Tensor());
}

}  // namespace

std::unique_ptr<Transformer> build_gpt2_family(const ModelConfig& config, const WeightSource& src,
                                               const RuntimeOptions& runtime) {
    return std::make_unique<Gpt2Family>(config, src, runtime);
}

}  // namespace sinkscope::model
