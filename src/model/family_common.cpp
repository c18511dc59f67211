// The shared pieces of the family files (family_common.hpp).
#include "family_common.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>
#include <string>

#include <ATen/ATen.h>

#include "rope.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/io/weights.hpp"
#include "tensor_load.hpp"

namespace sinkscope::model::detail {

void HookRecorder::keep(HookPoint point, int64_t layer, const at::Tensor& t) {
    if (capture_.empty()) return;
    std::string n = hook_name(point, layer);
    if (capture_.wants(n)) result_.captured.emplace(std::move(n), t);
}

bool HookRecorder::wants(HookPoint point, int64_t layer) const {
    return !capture_.empty() && capture_.wants(hook_name(point, layer));
}

at::Tensor checked_ids(const ModelInput& input, int64_t d_vocab, const at::Device& device) {
    SS_CHECK(input.ids.defined(), "a text model needs token ids");
    SS_CHECK(input.ids.dim() == 2, "token ids must be [batch, pos], got rank ", input.ids.dim());
    const at::Tensor ids = input.ids.to(device, at::kLong);  // [batch, pos]
    if (ids.size(1) == 0) throw UsageError("empty token sequence");
    const int64_t id_min = ids.min().item<int64_t>(), id_max = ids.max().item<int64_t>();
    if (id_min < 0 || id_max >= d_vocab)
        throw UsageError("token id " + std::to_string(id_min < 0 ? id_min : id_max) +
                         " is outside the vocabulary [0, " + std::to_string(d_vocab) + ")");
    return ids;
}

void check_head_mask(const HeadMask* mask, const ModelConfig& c) {
    if (!mask) return;
    SS_CHECK(mask->n_layers == c.n_layers && mask->n_heads == c.n_heads, "head mask shape");
    if (mask->kind == HeadMask::Kind::Mean)
        SS_CHECK(mask->z_mean.defined() &&
                     mask->z_mean.sizes() == at::IntArrayRef({c.n_layers, c.n_heads, c.d_head}),
                 "mean ablation needs z_mean [n_layers, n_heads, d_head]");
}

at::Tensor causal_mask(int64_t n_tokens, int64_t window, const at::Device& device) {
    const auto opt = at::TensorOptions().dtype(at::kLong).device(device);
    const at::Tensor qpos = at::arange(n_tokens, opt).unsqueeze(1);
    const at::Tensor kpos = at::arange(n_tokens, opt).unsqueeze(0);
    at::Tensor hidden = kpos > qpos;  // [query, key]
    if (window > 0) hidden = hidden.logical_or(kpos <= qpos - window);
    return hidden;
}

at::Tensor padding_mask(const ModelInput& input, const at::Device& device) {
    if (!input.attention_mask.defined()) return {};
    SS_CHECK(input.attention_mask.dim() == 2, "attention_mask must be [batch, pos]");
    return input.attention_mask.to(device).eq(0).view(
        {input.attention_mask.size(0), 1, 1, input.attention_mask.size(1)});
}

RopeTables rope_tables(int64_t n_tokens, int64_t rot_dim, const ModelConfig& c,
                       at::ScalarType dtype, const at::Device& device) {
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
    const at::Tensor inv_freq = rope_inv_freq(c, rot_dim, n_tokens, device);  // [rot/2] f32
    const at::Tensor freqs = at::outer(at::arange(n_tokens, f32), inv_freq);  // [pos, rot/2]
    const at::Tensor emb = at::cat({freqs, freqs}, -1);                        // [pos, rot]
    at::Tensor cos = emb.cos(), sin = emb.sin();
    // YaRN's and LongRoPE's attention factor scales cos and sin in f32 (transformers'
    // attention_scaling).
    if (c.rope_scaling.kind == RopeScalingKind::Yarn ||
        c.rope_scaling.kind == RopeScalingKind::LongRope) {
        cos = cos * c.rope_scaling.attention_factor;
        sin = sin * c.rope_scaling.attention_factor;
    }
    RopeTables r;
    r.rot_dim = rot_dim;
    r.cos = cos.to(dtype).view({1, n_tokens, 1, rot_dim});
    r.sin = sin.to(dtype).view({1, n_tokens, 1, rot_dim});
    return r;
}

DecoderFrame::DecoderFrame(const ModelInput& input, const CaptureSpec& capture,
                           const HeadMask* mask, const ModelConfig& c, int64_t rot_dim,
                           at::ScalarType dtype, const at::Device& device)
    : ids(checked_ids(input, c.d_vocab, device)), n_tokens(ids.size(1)), hooks(capture, result) {
    check_head_mask(mask, c);
    SS_CHECK(!input.attention_mask.defined(), "padding masks are not supported by causal models");
    if (rot_dim > 0) rope = rope_tables(n_tokens, rot_dim, c, dtype, device);
    hidden = causal_mask(n_tokens, c.window, device);
    if (c.window > 0 && !c.window_layers.empty()) {
        hidden_full = causal_mask(n_tokens, 0, device);
        window_layers = c.window_layers;
    }
    scale = c.score_scale();
}

const at::Tensor& DecoderFrame::mask_of(int64_t layer) const {
    if (!hidden_full.defined() ||
        std::binary_search(window_layers.begin(), window_layers.end(), layer))
        return hidden;
    return hidden_full;
}

ForwardResult DecoderFrame::finish(const at::Tensor& x_final, const at::Tensor& logits) {
    hooks.keep(HookPoint::FinalNorm, -1, x_final);
    result.logits = logits.to(accum_type(logits.scalar_type()));
    return std::move(result);
}

at::Tensor RopeTables::apply(const at::Tensor& t) const {
    const int64_t d_head = t.size(-1), half = rot_dim / 2;
    const at::Tensor x = rot_dim == d_head ? t : t.narrow(-1, 0, rot_dim);
    const at::Tensor rot = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
    const at::Tensor out = x * cos + rot * sin;
    if (rot_dim == d_head) return out;
    return at::cat({out, t.narrow(-1, rot_dim, d_head - rot_dim)}, -1);
}

at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const at::Tensor& hidden, double scale, int64_t layer, const HeadMask* mask,
                  at::ScalarType dtype, HookRecorder& hooks, double softcap) {
    // Gemma-2 (transformers Gemma2Attention): scores / cap, tanh, * cap, then the mask.
    const auto cap = [softcap](at::Tensor s) {
        return softcap > 0 ? at::tanh(s / softcap) * softcap : s;
    };
    const int64_t H = q.size(2), Hkv = k.size(2), dh = q.size(3);
    at::Tensor kh = k.transpose(1, 2);  // [batch, n_kv_heads, key, d_head]
    at::Tensor vh = v.transpose(1, 2);
    if (H != Hkv) {  // query head i reads kv head i / group (HF repeat_kv)
        kh = kh.repeat_interleave(H / Hkv, 1);
        vh = vh.repeat_interleave(H / Hkv, 1);
    }
    at::Tensor z;  // [batch, pos, n_heads, d_head]
    const int64_t T = q.size(1);
    if (!hooks.wants(HookPoint::AttnScores, layer) && !hooks.wants(HookPoint::Pattern, layer) &&
        T > kQueryBlock) {
        // Nothing to keep: query blocks bound the [batch, H, block, key] temporaries, so a long
        // input needs O(T) memory per layer instead of O(T^2).
        std::vector<at::Tensor> parts;
        for (int64_t i0 = 0; i0 < T; i0 += kQueryBlock) {
            const int64_t n = std::min(kQueryBlock, T - i0);
            at::Tensor scores =  // [batch, n_heads, n, key]
                cap(at::matmul(q.narrow(1, i0, n).transpose(1, 2), kh.transpose(-2, -1)) * scale);
            if (hidden.defined())
                scores.masked_fill_(hidden.dim() >= 2 && hidden.size(-2) == T
                                        ? hidden.narrow(-2, i0, n)
                                        : hidden,
                                    -std::numeric_limits<double>::infinity());
            parts.push_back(at::matmul(at::softmax(scores, -1, accum_type(dtype)).to(dtype), vh));
        }
        z = at::cat(parts, 2).transpose(1, 2).contiguous();
    } else {
        // [batch, n_heads, query, key] after scale and mask; masked = -inf
        at::Tensor scores = cap(at::matmul(q.transpose(1, 2), kh.transpose(-2, -1)) * scale);
        if (hidden.defined()) scores.masked_fill_(hidden, -std::numeric_limits<double>::infinity());
        hooks.keep(HookPoint::AttnScores, layer, scores);
        // [batch, n_heads, query, key]; softmax in f32, masked entries exactly 0
        const at::Tensor pattern = at::softmax(scores, -1, accum_type(dtype)).to(dtype);
        hooks.keep(HookPoint::Pattern, layer, pattern);
        z = at::matmul(pattern, vh).transpose(1, 2).contiguous();
    }
    if (mask && mask->any_in_layer(layer)) {
        for (int64_t head = 0; head < H; ++head) {
            if (!mask->is_ablated(layer, head)) continue;
            at::Tensor zh = z.select(2, head);  // [batch, pos, d_head] view
            if (mask->kind == HeadMask::Kind::Zero) zh.zero_();
            else zh.copy_(mask->z_mean[layer][head].to(z.device(), dtype).view({1, 1, dh}).expand_as(zh));
        }
    }
    hooks.keep(HookPoint::Z, layer, z);
    return z;
}

// ---- Weights ----

namespace {

// TF-era name of a LayerNorm parameter role (gamma = weight, beta = bias); nullptr for others.
const char* legacy_norm_suffix(TensorRole role) {
    switch (role) {
        case TensorRole::OutputNorm:
        case TensorRole::AttnNorm:
        case TensorRole::FfnNorm:
        case TensorRole::EmbedNorm:
        case TensorRole::HeadNorm:
            return "gamma";
        case TensorRole::OutputNormBias:
        case TensorRole::AttnNormBias:
        case TensorRole::FfnNormBias:
        case TensorRole::EmbedNormBias:
        case TensorRole::HeadNormBias:
            return "beta";
        default:
            return nullptr;
    }
}

// Names an HF checkpoint may use for registry name `n` of `role` when `n` itself is absent, in
// the order tried:
// * checkpoints saved from the base model (GPT2Model, e.g. openai-community/gpt2: "wte.weight"
//   instead of "transformer.wte.weight") lack the head model's prefix; transformers loads them
//   by stripping base_model_prefix, and so does this: the name without its first component;
// * checkpoints converted from the original TF BERT (bert-base-uncased among them) name the
//   LayerNorm parameters gamma / beta; transformers renames them on load, so does this.
std::vector<std::string> name_candidates(const std::string& n, TensorRole role) {
    std::vector<std::string> out;
    const auto dot = n.find('.');
    if (dot != std::string::npos) out.push_back(n.substr(dot + 1));
    if (const char* suffix = legacy_norm_suffix(role)) {
        auto legacy = [&](const std::string& s) { return s.substr(0, s.rfind('.') + 1) + suffix; };
        out.push_back(legacy(n));
        if (dot != std::string::npos) out.push_back(legacy(n.substr(dot + 1)));
    }
    return out;
}

}  // namespace

WeightLoader::WeightLoader(const ModelConfig& c, const WeightSource& src, const RuntimeOptions& rt)
    : arch_(find_architecture(c.architecture)),
      src_(src),
      dtype_(scalar_type(rt.dtype)),
      device_(device_of(rt)) {}

std::string WeightLoader::name(TensorRole role, int64_t layer) const {
    const std::string n = tensor_name(arch_, src_.format, role, layer);
    if (n.empty() || src_.format != WeightFormat::HuggingFace || src_.store->has(n)) return n;
    for (const std::string& alt : name_candidates(n, role))
        if (src_.store->has(alt)) return alt;
    return n;  // absent: reading it reports the registry name
}

bool WeightLoader::has(TensorRole role, int64_t layer) const {
    const std::string n = name(role, layer);
    return !n.empty() && src_.store->has(n);
}

at::Tensor WeightLoader::host(TensorRole role, int64_t layer,
                              const std::vector<int64_t>& shape) const {
    const std::string n = name(role, layer);
    SS_CHECK(!n.empty(), "architecture ", arch_.name, " names no tensor for role ",
             static_cast<int>(role), " in ", weight_format_name(src_.format));
    return read_f32(src_, n, shape);
}

bool WeightLoader::qk_interleaved() const {
    return src_.format == WeightFormat::Llama2c ||
           (src_.format == WeightFormat::Gguf && arch_.gguf_qk_interleaved);
}

at::Tensor WeightLoader::host_rope_rows(TensorRole role, int64_t layer, int64_t n_head,
                                        int64_t d_head, int64_t d_in) const {
    const at::Tensor w = host(role, layer, {n_head * d_head, d_in});  // [n_head * d_head, d_in]
    if (!qk_interleaved()) return w;
    // interleaved rows (pairs 2i, 2i+1) -> rotate_half rows (i, i + d_head/2), per head
    return w.reshape({n_head, d_head / 2, 2, d_in})
        .transpose(1, 2)
        .reshape({n_head * d_head, d_in});
}

at::Tensor WeightLoader::host_linear(TensorRole role, int64_t layer, int64_t n_out,
                                     int64_t n_in) const {
    if (src_.format == WeightFormat::HuggingFace && arch_.hf_conv1d)
        return host(role, layer, {n_in, n_out}).t().contiguous();  // Conv1D: y = x W + b
    return host(role, layer, {n_out, n_in});
}

at::Tensor WeightLoader::host_qkv(TensorRole role, int64_t layer, int64_t n_heads, int64_t d_head,
                                  int64_t d_in) const {
    const int64_t n = 3 * n_heads * d_head;
    const bool bias = d_in == 0;
    // [n] or [n, d_in], rows in the stored order
    const at::Tensor w = bias ? host(role, layer, {n}) : host_linear(role, layer, n, d_in);
    if (src_.format != WeightFormat::HuggingFace || !arch_.hf_qkv_per_head) return w;
    // rows [head][part][d_head] -> [part][head][d_head] (convert_hf_to_gguf.py's GPT-NeoX order)
    const at::Tensor grouped =
        bias ? w.view({n_heads, 3, d_head}) : w.view({n_heads, 3, d_head, d_in});
    const at::Tensor parts = grouped.transpose(0, 1).contiguous();
    return bias ? parts.view({n}) : parts.view({n, d_in});
}

at::Tensor WeightLoader::to_device(const at::Tensor& host_f32) {
    n_params_ += host_f32.numel();
    return host_f32.to(device_, dtype_).contiguous();
}

// ---- Building blocks of the LayerNorm families ----

at::Tensor Linear::operator()(const at::Tensor& x) const { return at::linear(x, w, b); }

Linear load_linear(WeightLoader& ld, TensorRole w_role, std::optional<TensorRole> b_role,
                   int64_t layer, int64_t n_out, int64_t n_in) {
    Linear lin;
    lin.w = ld.to_device(ld.host_linear(w_role, layer, n_out, n_in));
    if (b_role) lin.b = ld.get(*b_role, layer, {n_out});
    return lin;
}

at::Tensor LayerNorm::operator()(const at::Tensor& x) const {
    return at::layer_norm(x, {w.size(0)}, w, b, eps);
}

LayerNorm load_layer_norm(WeightLoader& ld, TensorRole w_role, TensorRole b_role, int64_t layer,
                          int64_t d, double eps) {
    return LayerNorm{ld.get(w_role, layer, {d}), ld.get(b_role, layer, {d}), eps};
}

at::Tensor rms_normalized(const at::Tensor& x, double eps) {
    const at::Tensor xf = x.to(accum_type(x.scalar_type()));
    return xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
}

at::Tensor activate(const at::Tensor& x, Activation act) {
    switch (act) {
        case Activation::Silu: return at::silu(x);
        case Activation::GeluTanh: return at::gelu(x, "tanh");
        case Activation::Gelu: return at::gelu(x);
    }
    throw InternalError("unknown activation");
}

at::Tensor self_attention(const at::Tensor& h, const AttentionWeights& w, const ModelConfig& c,
                          const RopeTables* rope, const at::Tensor& hidden, double scale,
                          int64_t layer, const HeadMask* mask, at::ScalarType dtype,
                          HookRecorder& hooks) {
    const int64_t B = h.size(0), T = h.size(1), dh = c.d_head;
    const at::Tensor q = w.q(h).view({B, T, c.n_heads, dh});  // [batch, pos, n_heads, d_head]
    const at::Tensor k = w.k(h).view({B, T, c.n_kv_heads, dh});  // [batch, pos, n_kv, d_head]
    const at::Tensor v = w.v(h).view({B, T, c.n_kv_heads, dh});
    hooks.keep(HookPoint::Q, layer, q);
    hooks.keep(HookPoint::K, layer, k);
    hooks.keep(HookPoint::V, layer, v);
    const at::Tensor rq = rope ? rope->apply(q) : q;
    const at::Tensor rk = rope ? rope->apply(k) : k;
    hooks.keep(HookPoint::RotQ, layer, rq);
    hooks.keep(HookPoint::RotK, layer, rk);
    const at::Tensor z = attend(rq, rk, v, hidden, scale, layer, mask, dtype, hooks);
    return w.o(z.view({B, T, c.n_heads * dh}));  // [batch, pos, d_model]
}

}  // namespace sinkscope::model::detail
