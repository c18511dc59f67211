// The Llama family: llama, mistral (sliding window), qwen2 (q/k/v bias), gemma (RMSNorm 1 + w,
// sqrt(d_model) embedding scale, GeGLU with tanh GELU); grouped-query attention. Eager attention
// with explicit scores and pattern so every hook of hooks.hpp is a real tensor.
//
// RoPE convention: sinkscope computes in the Hugging Face layout (rotate_half: dimension i pairs
// with i + d_head/2). llama.cpp's convert_hf_to_gguf.py permutes the rows of Q and K of each
// head for llama.cpp's interleaved RoPE (pairs 2i, 2i+1):
//     w.reshape(n_head, 2, d_head/2, d_in).swapaxes(1, 2).reshape(w.shape)
// so GGUF row 2i + t of a head is HF row t * d_head/2 + i. llama2.c checkpoints (run.c rotates
// pairs 2i, 2i+1) use the same interleaved layout. The loader undoes the permutation:
//     w.reshape(n_head, d_head/2, 2, d_in).swapaxes(1, 2)
// which makes hook_q/hook_k identical across formats and q.k unchanged (a permutation applied to
// both q and k leaves their dot product unchanged), so attention is the same either way.
#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/weights.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"
#include "tensor_load.hpp"

namespace sinkscope::model {

namespace {

struct LayerWeights {
    at::Tensor attn_norm, attn_norm_f32;  // [d_model] (compute dtype, f32)
    at::Tensor wq;                        // [n_heads * d_head, d_model]
    at::Tensor wk, wv;                    // [n_kv_heads * d_head, d_model]
    at::Tensor wo;                        // [d_model, n_heads * d_head]
    at::Tensor bq, bk, bv;                // [n_heads * d_head], [n_kv_heads * d_head]; qwen2 only
    at::Tensor ffn_norm, ffn_norm_f32;    // [d_model]
    at::Tensor w_gate, w_up;              // [d_mlp, d_model]
    at::Tensor w_down;                    // [d_model, d_mlp]
};

class LlamaFamily final : public Transformer {
public:
    LlamaFamily(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt);
    ForwardResult forward(const at::Tensor& ids, const CaptureSpec& capture,
                          const HeadMask* mask) const override;
    int64_t n_params() const override { return n_params_; }

private:
    at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& w_f32) const;

    ModelConfig c_;
    at::ScalarType dtype_;
    at::Device device_;
    at::Tensor embed_;                    // [d_vocab, d_model]
    at::Tensor out_norm_, out_norm_f32_;  // [d_model]
    at::Tensor w_out_;                    // [d_vocab, d_model] (aliases embed_ when tied)
    std::vector<LayerWeights> layers_;
    int64_t n_params_ = 0;
};

LlamaFamily::LlamaFamily(const ModelConfig& config, const WeightSource& src,
                         const RuntimeOptions& rt)
    : c_(config), dtype_(detail::scalar_type(rt.dtype)), device_(detail::device_of(rt)) {
    const ArchitectureInfo& arch = find_architecture(c_.architecture);
    const bool interleaved = src.format == WeightFormat::Llama2c ||
                             (src.format == WeightFormat::Gguf && arch.gguf_qk_interleaved);
    const int64_t D = c_.d_model, dh = c_.d_head, H = c_.n_heads, Hkv = c_.n_kv_heads;
    auto name = [&](TensorRole role, int64_t layer = -1) {
        return tensor_name(arch, src.format, role, layer);
    };
    auto to_device = [&](const at::Tensor& host_f32) {
        n_params_ += host_f32.numel();
        return host_f32.to(device_, dtype_).contiguous();
    };
    auto read = [&](TensorRole role, int64_t layer, std::vector<int64_t> shape) {
        return detail::read_f32(src, name(role, layer), shape);
    };
    // Interleaved (llama.cpp / llama2.c) rows -> HF rotate_half rows, per head (see top).
    auto deinterleave = [&](const at::Tensor& w, int64_t n_head) {
        return w.reshape({n_head, dh / 2, 2, D}).transpose(1, 2).reshape({n_head * dh, D});
    };
    // Norm weights: the compute-dtype copy (Llama multiplies in the compute dtype) and an f32
    // copy holding the effective scale (Gemma multiplies by 1 + w in f32).
    auto norm = [&](TensorRole role, int64_t layer, at::Tensor& w, at::Tensor& w_f32) {
        at::Tensor host = read(role, layer, {D});
        n_params_ += host.numel();
        if (c_.norm_add_one) host = host + 1.0f;
        w_f32 = host.to(device_).contiguous();
        w = host.to(device_, dtype_).contiguous();
    };

    // Tied HF checkpoints may store only lm_head.weight (transformers then fills both).
    const std::string embed_name = name(TensorRole::TokenEmbed);
    const bool embed_from_output = c_.tied_embeddings && !src.store->has(embed_name) &&
                                   !name(TensorRole::Output).empty() &&
                                   src.store->has(name(TensorRole::Output));
    embed_ = to_device(read(embed_from_output ? TensorRole::Output : TensorRole::TokenEmbed, -1,
                            {c_.d_vocab, D}));
    norm(TensorRole::OutputNorm, -1, out_norm_, out_norm_f32_);
    // HF: config.json decides; GGUF omits output.weight and llama2.c omits wcls when tied.
    const std::string out_name = name(TensorRole::Output);
    const bool tied = c_.tied_embeddings || (src.format != WeightFormat::HuggingFace &&
                                             (out_name.empty() || !src.store->has(out_name)));
    w_out_ = tied ? embed_ : to_device(read(TensorRole::Output, -1, {c_.d_vocab, D}));

    for (int64_t l = 0; l < c_.n_layers; ++l) {
        LayerWeights w;
        norm(TensorRole::AttnNorm, l, w.attn_norm, w.attn_norm_f32);
        at::Tensor wq = read(TensorRole::AttnQ, l, {H * dh, D});
        at::Tensor wk = read(TensorRole::AttnK, l, {Hkv * dh, D});
        if (interleaved) {
            wq = deinterleave(wq, H);
            wk = deinterleave(wk, Hkv);
        }
        w.wq = to_device(wq);
        w.wk = to_device(wk);
        w.wv = to_device(read(TensorRole::AttnV, l, {Hkv * dh, D}));
        w.wo = to_device(read(TensorRole::AttnO, l, {D, H * dh}));
        if (c_.qkv_bias) {
            w.bq = to_device(read(TensorRole::AttnQBias, l, {H * dh}));
            w.bk = to_device(read(TensorRole::AttnKBias, l, {Hkv * dh}));
            w.bv = to_device(read(TensorRole::AttnVBias, l, {Hkv * dh}));
        }
        norm(TensorRole::FfnNorm, l, w.ffn_norm, w.ffn_norm_f32);
        w.w_gate = to_device(read(TensorRole::FfnGate, l, {c_.d_mlp, D}));
        w.w_up = to_device(read(TensorRole::FfnUp, l, {c_.d_mlp, D}));
        w.w_down = to_device(read(TensorRole::FfnDown, l, {D, c_.d_mlp}));
        layers_.push_back(std::move(w));
    }
}

at::Tensor LlamaFamily::rms_norm(const at::Tensor& x, const at::Tensor& w,
                                 const at::Tensor& w_f32) const {
    // [batch, pos, d_model]; normalised in f32 as HF LlamaRMSNorm / GemmaRMSNorm do.
    at::Tensor xf = x.to(at::kFloat);
    xf = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + c_.norm_eps);
    if (c_.norm_add_one) return (xf * w_f32).to(dtype_);
    return w * xf.to(dtype_);
}

ForwardResult LlamaFamily::forward(const at::Tensor& ids_in, const CaptureSpec& capture,
                                   const HeadMask* mask) const {
    c10::InferenceMode guard;
    SS_CHECK(ids_in.dim() == 2, "token ids must be [batch, pos], got rank ", ids_in.dim());
    const at::Tensor ids = ids_in.to(device_, at::kLong);  // [batch, pos]
    const int64_t B = ids.size(0), T = ids.size(1);
    const int64_t H = c_.n_heads, Hkv = c_.n_kv_heads, dh = c_.d_head;
    SS_CHECK(T > 0, "empty input");
    const int64_t id_min = ids.min().item<int64_t>(), id_max = ids.max().item<int64_t>();
    if (id_min < 0 || id_max >= c_.d_vocab)
        throw UsageError("token id " + std::to_string(id_min < 0 ? id_min : id_max) +
                         " is outside the vocabulary [0, " + std::to_string(c_.d_vocab) + ")");
    if (mask) {
        SS_CHECK(mask->n_layers == c_.n_layers && mask->n_heads == H, "head mask shape");
        if (mask->kind == HeadMask::Kind::Mean)
            SS_CHECK(mask->z_mean.defined() &&
                         mask->z_mean.sizes() == at::IntArrayRef({c_.n_layers, H, dh}),
                     "mean ablation needs z_mean [n_layers, n_heads, d_head]");
    }

    ForwardResult result;
    auto keep = [&](HookPoint p, int64_t layer, const at::Tensor& t) {
        if (capture.empty()) return;
        std::string n = hook_name(p, layer);
        if (capture.wants(n)) result.captured.emplace(std::move(n), t);
    };

    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device_);
    // Pass 1: embedding (Gemma scales by sqrt(d_model) rounded to the compute dtype, as HF).
    at::Tensor x = at::embedding(embed_, ids);  // [batch, pos, d_model]
    if (c_.embed_scale)
        x = x * at::scalar_tensor(std::sqrt(static_cast<double>(c_.d_model)),
                                  at::TensorOptions().dtype(dtype_).device(device_));
    keep(HookPoint::Embed, -1, x);

    // Pass 2: RoPE tables, HF LlamaRotaryEmbedding: inv_freq_i = theta^(-2i/d_head) in f32.
    const at::Tensor inv_freq =
        1.0 / at::pow(c_.rope_theta, at::arange(0, dh, 2, f32.dtype(at::kLong)).to(at::kFloat) / dh);
    const at::Tensor freqs = at::outer(at::arange(T, f32), inv_freq);  // [pos, d_head/2]
    const at::Tensor emb = at::cat({freqs, freqs}, -1);                 // [pos, d_head]
    const at::Tensor cos = emb.cos().to(dtype_).view({1, T, 1, dh});
    const at::Tensor sin = emb.sin().to(dtype_).view({1, T, 1, dh});
    auto rope = [&](const at::Tensor& t) {  // [batch, pos, heads, d_head]
        const at::Tensor rot = at::cat({-t.narrow(-1, dh / 2, dh / 2), t.narrow(-1, 0, dh / 2)}, -1);
        return t * cos + rot * sin;
    };

    // Causal (and sliding-window) mask, spec section 0: row i sees j <= i and j > i - window.
    const at::Tensor qpos = at::arange(T, f32.dtype(at::kLong)).unsqueeze(1);
    const at::Tensor kpos = at::arange(T, f32.dtype(at::kLong)).unsqueeze(0);
    at::Tensor hidden = kpos > qpos;  // [query, key] bool, true = masked
    if (c_.window > 0) hidden = hidden.logical_or(kpos <= qpos - c_.window);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
    const int64_t group = H / Hkv;

    for (int64_t l = 0; l < c_.n_layers; ++l) {
        const LayerWeights& w = layers_[static_cast<size_t>(l)];
        keep(HookPoint::ResidPre, l, x);
        // Pass 3: attention.
        const at::Tensor h = rms_norm(x, w.attn_norm, w.attn_norm_f32);  // [batch, pos, d_model]
        const at::Tensor q = at::linear(h, w.wq, w.bq).view({B, T, H, dh});
        const at::Tensor k = at::linear(h, w.wk, w.bk).view({B, T, Hkv, dh});
        const at::Tensor v = at::linear(h, w.wv, w.bv).view({B, T, Hkv, dh});
        keep(HookPoint::Q, l, q);
        keep(HookPoint::K, l, k);
        keep(HookPoint::V, l, v);
        const at::Tensor rq = rope(q), rk = rope(k);
        keep(HookPoint::RotQ, l, rq);
        keep(HookPoint::RotK, l, rk);
        at::Tensor kh = rk.transpose(1, 2);  // [batch, n_kv_heads, key, d_head]
        at::Tensor vh = v.transpose(1, 2);
        if (group > 1) {  // query head i reads kv head i / group (HF repeat_kv)
            kh = kh.repeat_interleave(group, 1);
            vh = vh.repeat_interleave(group, 1);
        }
        // [batch, n_heads, query, key] after scale and mask; masked = -inf
        at::Tensor scores = at::matmul(rq.transpose(1, 2), kh.transpose(-2, -1)) * scale;
        scores.masked_fill_(hidden, -std::numeric_limits<double>::infinity());
        keep(HookPoint::AttnScores, l, scores);
        // [batch, n_heads, query, key]; softmax in f32, masked entries exactly 0
        const at::Tensor pattern = at::softmax(scores, -1, at::kFloat).to(dtype_);
        keep(HookPoint::Pattern, l, pattern);
        at::Tensor z = at::matmul(pattern, vh).transpose(1, 2).contiguous();  // [b, pos, H, d_head]
        if (mask && mask->any_in_layer(l)) {
            for (int64_t head = 0; head < H; ++head) {
                if (!mask->is_ablated(l, head)) continue;
                at::Tensor zh = z.select(2, head);  // [batch, pos, d_head] view
                if (mask->kind == HeadMask::Kind::Zero) zh.zero_();
                else zh.copy_(mask->z_mean[l][head].to(device_, dtype_).view({1, 1, dh}).expand_as(zh));
            }
        }
        keep(HookPoint::Z, l, z);
        x = x + at::linear(z.view({B, T, H * dh}), w.wo);
        keep(HookPoint::ResidMid, l, x);
        // Pass 4: gated MLP, down(act(gate(x)) * up(x)).
        const at::Tensor h2 = rms_norm(x, w.ffn_norm, w.ffn_norm_f32);
        at::Tensor gate = at::linear(h2, w.w_gate);  // [batch, pos, d_mlp]
        gate = c_.act == Activation::Silu ? at::silu(gate) : at::gelu(gate, "tanh");
        x = x + at::linear(gate * at::linear(h2, w.w_up), w.w_down);
        keep(HookPoint::ResidPost, l, x);
    }
    // Pass 5: final norm and unembedding; logits handed out in f32.
    result.logits = at::linear(rms_norm(x, out_norm_, out_norm_f32_), w_out_).to(at::kFloat);
    return result;
}

}  // namespace

std::unique_ptr<Transformer> build_llama_family(const ModelConfig& config, const WeightSource& src,
                                                const RuntimeOptions& runtime) {
    return std::make_unique<LlamaFamily>(config, src, runtime);
}

}  // namespace sinkscope::model
