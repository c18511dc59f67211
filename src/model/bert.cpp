// The BERT family of post-LN encoders with a masked-LM head: BertForMaskedLM and
// RobertaForMaskedLM / XLMRobertaForMaskedLM (same computation; RoBERTa's positions start at
// padding_idx + 1 and its LM head always uses exact GELU). Bidirectional eager attention with
// padding masks, so every hook of hooks.hpp (except ln_final: post-LN encoders have no final norm)
// is a real tensor.
//
// Hooks (HF BertLayer): hook_embed = word + token_type + position embeddings BEFORE the embedding
// LayerNorm; blocks.0.hook_resid_pre = after it (= HF hidden_states[0]). Per block:
//     resid_mid  = LayerNorm(resid_pre + attention.output.dense(z))   (attention.output.LayerNorm)
//     resid_post = LayerNorm(resid_mid + output.dense(act(intermediate.dense(resid_mid))))
// hook_rot_q / hook_rot_k = hook_q / hook_k (no RoPE). Zero-ablating a head zeroes its z before
// attention.output.dense, so the dense bias stays (as HF head_mask = 0 does).
#include <cmath>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "config_json.hpp"
#include "family_common.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/io/weights.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"
#include "tensor_load.hpp"

namespace sinkscope::model {

namespace {

// What distinguishes RoBERTa / XLM-R from BERT (same weights layout otherwise).
struct EncoderVariant {
    // Position ids from the input ids as HF create_position_ids_from_input_ids: padding_idx + 1 +
    // the running count of non-pad tokens, pad tokens get padding_idx (padding_idx =
    // ModelConfig::pos_offset - 1). BERT: 0..T-1.
    bool positions_from_ids = false;
    // RobertaLMHead applies exact GELU whatever hidden_act says; BERT's head uses hidden_act.
    bool head_exact_gelu = false;
};

struct LayerNormWeights {
    at::Tensor w, b;  // [d_model] (compute dtype)
};

struct LayerWeights {
    at::Tensor wq, wk, wv;       // [n_heads * d_head, d_model]
    at::Tensor bq, bk, bv;       // [n_heads * d_head]
    at::Tensor wo;               // [d_model, n_heads * d_head] attention.output.dense
    at::Tensor bo;               // [d_model]
    LayerNormWeights attn_norm;  // attention.output.LayerNorm
    at::Tensor w_up, b_up;       // [d_mlp, d_model], [d_mlp] intermediate.dense
    at::Tensor w_down, b_down;   // [d_model, d_mlp], [d_model] output.dense
    LayerNormWeights ffn_norm;   // output.LayerNorm
};

class BertFamily final : public Transformer {
public:
    BertFamily(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt,
               EncoderVariant variant);
    ForwardResult forward(const ModelInput& input, const CaptureSpec& capture,
                          const HeadMask* mask) const override;
    int64_t n_params() const override { return n_params_; }

private:
    at::Tensor layer_norm(const at::Tensor& x, const LayerNormWeights& n) const {
        return at::layer_norm(x, {c_.d_model}, n.w, n.b, c_.norm_eps);
    }
    at::Tensor activation(const at::Tensor& x, Activation a) const {
        if (a == Activation::Gelu) return at::gelu(x);
        if (a == Activation::GeluTanh) return at::gelu(x, "tanh");
        return at::silu(x);
    }
    // [batch, pos] int64 position ids (see EncoderVariant).
    at::Tensor position_ids(const at::Tensor& ids) const;

    ModelConfig c_;
    EncoderVariant variant_;
    at::ScalarType dtype_;
    at::Device device_;
    int64_t n_positions_ = 0;  // rows of the position table (n_ctx + pos_offset)
    at::Tensor word_;          // [d_vocab, d_model]
    at::Tensor pos_;           // [n_positions, d_model]
    at::Tensor type_;          // [n_token_types, d_model]
    LayerNormWeights embed_norm_;
    std::vector<LayerWeights> layers_;
    at::Tensor head_dense_, head_dense_b_;  // [d_model, d_model], [d_model] MLM transform
    LayerNormWeights head_norm_;
    at::Tensor w_out_;  // [d_vocab, d_model] (aliases word_ when tied)
    at::Tensor b_out_;  // [d_vocab]
    int64_t n_params_ = 0;
};

BertFamily::BertFamily(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt,
                       EncoderVariant variant)
    : c_(config),
      variant_(variant),
      dtype_(detail::scalar_type(rt.dtype)),
      device_(detail::device_of(rt)) {
    const ArchitectureInfo& arch = find_architecture(c_.architecture);
    const int64_t D = c_.d_model, HD = c_.n_heads * c_.d_head, F = c_.d_mlp;
    SS_CHECK_INPUT(c_.n_kv_heads == c_.n_heads, src.origin,
                   "encoders have one key/value head per query head");
    n_positions_ = c_.n_ctx + c_.pos_offset;
    auto name = [&](TensorRole role, int64_t layer = -1) {
        return tensor_name(arch, src.format, role, layer);
    };
    auto load = [&](TensorRole role, int64_t layer, std::vector<int64_t> shape) {
        const at::Tensor host = detail::read_f32(src, name(role, layer), shape);  // f32 host
        n_params_ += host.numel();
        return host.to(device_, dtype_).contiguous();
    };
    // Checkpoints converted from the original TF BERT (bert-base-uncased among them) name the
    // LayerNorm parameters gamma / beta; transformers renames them on load, so does this.
    auto load_norm = [&](TensorRole role, int64_t layer, const char* legacy_suffix) {
        const std::string n = name(role, layer);
        const std::string legacy = n.substr(0, n.rfind('.') + 1) + legacy_suffix;
        const bool use_legacy = !src.store->has(n) && src.store->has(legacy);
        const at::Tensor host = detail::read_f32(src, use_legacy ? legacy : n, {D});
        n_params_ += host.numel();
        return host.to(device_, dtype_).contiguous();
    };
    auto norm = [&](TensorRole w, TensorRole b, int64_t layer) {
        return LayerNormWeights{load_norm(w, layer, "gamma"), load_norm(b, layer, "beta")};
    };

    word_ = load(TensorRole::TokenEmbed, -1, {c_.d_vocab, D});
    pos_ = load(TensorRole::PosEmbed, -1, {n_positions_, D});
    type_ = load(TensorRole::TypeEmbed, -1, {c_.n_token_types, D});
    embed_norm_ = norm(TensorRole::EmbedNorm, TensorRole::EmbedNormBias, -1);
    for (int64_t l = 0; l < c_.n_layers; ++l) {
        LayerWeights w;
        w.wq = load(TensorRole::AttnQ, l, {HD, D});
        w.bq = load(TensorRole::AttnQBias, l, {HD});
        w.wk = load(TensorRole::AttnK, l, {HD, D});
        w.bk = load(TensorRole::AttnKBias, l, {HD});
        w.wv = load(TensorRole::AttnV, l, {HD, D});
        w.bv = load(TensorRole::AttnVBias, l, {HD});
        w.wo = load(TensorRole::AttnO, l, {D, HD});
        w.bo = load(TensorRole::AttnOBias, l, {D});
        w.attn_norm = norm(TensorRole::AttnNorm, TensorRole::AttnNormBias, l);
        w.w_up = load(TensorRole::FfnUp, l, {F, D});
        w.b_up = load(TensorRole::FfnUpBias, l, {F});
        w.w_down = load(TensorRole::FfnDown, l, {D, F});
        w.b_down = load(TensorRole::FfnDownBias, l, {D});
        w.ffn_norm = norm(TensorRole::FfnNorm, TensorRole::FfnNormBias, l);
        layers_.push_back(std::move(w));
    }
    head_dense_ = load(TensorRole::HeadDense, -1, {D, D});
    head_dense_b_ = load(TensorRole::HeadDenseBias, -1, {D});
    head_norm_ = norm(TensorRole::HeadNorm, TensorRole::HeadNormBias, -1);
    // save_pretrained drops the tied decoder weight; an untied checkpoint stores it.
    w_out_ = c_.tied_embeddings ? word_ : load(TensorRole::Output, -1, {c_.d_vocab, D});
    b_out_ = load(TensorRole::OutputBias, -1, {c_.d_vocab});
}

at::Tensor BertFamily::position_ids(const at::Tensor& ids) const {
    const int64_t B = ids.size(0), T = ids.size(1);
    if (!variant_.positions_from_ids)
        return at::arange(T, ids.options()).unsqueeze(0).expand({B, T});
    const int64_t padding_idx = c_.pos_offset - 1;
    const at::Tensor real = ids.ne(padding_idx).to(at::kLong);  // [batch, pos] 1 = not a pad id
    return at::cumsum(real, 1) * real + padding_idx;
}

ForwardResult BertFamily::forward(const ModelInput& input, const CaptureSpec& capture,
                                  const HeadMask* mask) const {
    c10::InferenceMode guard;
    const at::Tensor ids = detail::checked_ids(input, c_.d_vocab, device_);  // [batch, pos]
    const int64_t B = ids.size(0), T = ids.size(1);
    const int64_t H = c_.n_heads, dh = c_.d_head;
    detail::check_head_mask(mask, c_);
    if (T + c_.pos_offset > n_positions_)
        throw UsageError("a sequence of " + std::to_string(T) + " tokens is longer than the " +
                         std::to_string(c_.n_ctx) + " positions of this " + c_.architecture +
                         " model");
    // [batch, pos] int64 segment ids (BERT sentence A = 0, B = 1); undefined = all 0.
    at::Tensor types = at::zeros_like(ids);
    if (input.token_type_ids.defined()) {
        SS_CHECK(input.token_type_ids.sizes() == ids.sizes(),
                 "token_type_ids must have the shape of ids [batch, pos]");
        types = input.token_type_ids.to(device_, at::kLong);
        const int64_t lo = types.min().item<int64_t>(), hi = types.max().item<int64_t>();
        if (lo < 0 || hi >= c_.n_token_types)
            throw UsageError("token type id " + std::to_string(lo < 0 ? lo : hi) +
                             " is outside [0, " + std::to_string(c_.n_token_types) + ")");
    }
    if (input.attention_mask.defined()) {
        SS_CHECK(input.attention_mask.sizes() == ids.sizes(),
                 "attention_mask must have the shape of ids [batch, pos]");
        // A row without a real token would softmax over nothing (NaN).
        if (input.attention_mask.ne(0).sum(1).min().item<int64_t>() == 0)
            throw UsageError("attention_mask: a sequence has no real token");
    }
    // [batch, 1, 1, key] true = padding key: scores -inf, pattern exactly 0 (spec section 0).
    const at::Tensor hidden = detail::padding_mask(input, device_);

    ForwardResult result;
    detail::HookRecorder hooks(capture, result);
    // Pass 1: embeddings in HF's order, (word + token_type) + position, then LayerNorm.
    at::Tensor x = at::embedding(word_, ids) + at::embedding(type_, types);  // [b, pos, d_model]
    x = x + at::embedding(pos_, position_ids(ids));
    hooks.keep(HookPoint::Embed, -1, x);
    x = layer_norm(x, embed_norm_);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dh));

    for (int64_t l = 0; l < c_.n_layers; ++l) {
        const LayerWeights& w = layers_[static_cast<size_t>(l)];
        hooks.keep(HookPoint::ResidPre, l, x);
        // Pass 2: bidirectional self-attention on the block input (post-LN: no norm before).
        const at::Tensor q = at::linear(x, w.wq, w.bq).view({B, T, H, dh});  // [b, pos, H, dh]
        const at::Tensor k = at::linear(x, w.wk, w.bk).view({B, T, H, dh});
        const at::Tensor v = at::linear(x, w.wv, w.bv).view({B, T, H, dh});
        hooks.keep(HookPoint::Q, l, q);
        hooks.keep(HookPoint::K, l, k);
        hooks.keep(HookPoint::V, l, v);
        hooks.keep(HookPoint::RotQ, l, q);
        hooks.keep(HookPoint::RotK, l, k);
        const at::Tensor z = detail::attend(q, k, v, hidden, scale, l, mask, dtype_, hooks);
        x = layer_norm(x + at::linear(z.view({B, T, H * dh}), w.wo, w.bo), w.attn_norm);
        hooks.keep(HookPoint::ResidMid, l, x);
        // Pass 3: MLP, then the output LayerNorm.
        const at::Tensor up = activation(at::linear(x, w.w_up, w.b_up), c_.act);  // [b,pos,d_mlp]
        x = layer_norm(x + at::linear(up, w.w_down, w.b_down), w.ffn_norm);
        hooks.keep(HookPoint::ResidPost, l, x);
    }
    // Pass 4: MLM head: dense -> activation -> LayerNorm -> tied decoder + bias.
    const Activation head_act = variant_.head_exact_gelu ? Activation::Gelu : c_.act;
    const at::Tensor h =  // [batch, pos, d_model]
        layer_norm(activation(at::linear(x, head_dense_, head_dense_b_), head_act), head_norm_);
    result.logits = at::linear(h, w_out_, b_out_).to(at::kFloat);  // [batch, pos, d_vocab]
    return result;
}

// config.json keys shared by BERT and RoBERTa (transformers BertConfig / RobertaConfig).
void read_encoder_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c,
                            int64_t default_pad) {
    c.d_model = json_int(j, "hidden_size", origin);
    c.n_layers = json_int(j, "num_hidden_layers", origin);
    c.n_heads = json_int(j, "num_attention_heads", origin);
    c.n_kv_heads = c.n_heads;
    SS_CHECK_INPUT(c.n_heads > 0 && c.d_model % c.n_heads == 0, origin, "hidden_size ", c.d_model,
                   " is not a multiple of num_attention_heads ", c.n_heads);
    c.d_head = c.d_model / c.n_heads;
    c.d_mlp = json_int(j, "intermediate_size", origin);
    c.d_vocab = json_int(j, "vocab_size", origin);
    c.n_token_types = json_int_or(j, "type_vocab_size", 2, origin);
    SS_CHECK_INPUT(c.n_token_types > 0, origin, "type_vocab_size must be positive");
    c.norm_eps = json_float_or(j, "layer_norm_eps", 1e-12, origin);
    c.act = parse_hf_activation(j.value("hidden_act", std::string("gelu")), origin);
    c.tied_embeddings = json_bool_or(j, "tie_word_embeddings", true, origin);
    c.bos_token_id = json_token_id_or(j, "bos_token_id", origin);
    c.eos_token_id = json_token_id_or(j, "eos_token_id", origin);
    c.causal = false;
    c.norm = NormKind::LayerNorm;
    c.positions = PositionKind::Learned;
    c.qkv_bias = true;
    const std::string pos_type = j.value("position_embedding_type", std::string("absolute"));
    if (pos_type != "absolute")
        throw UnsupportedError(origin, "position_embedding_type '" + pos_type + "'");
    if (json_bool_or(j, "is_decoder", false, origin))
        throw UnsupportedError(origin, "is_decoder=true (causal BERT)");
    const int64_t n_positions = json_int_or(j, "max_position_embeddings", 512, origin);
    c.pos_offset = default_pad < 0 ? 0 : json_int_or(j, "pad_token_id", default_pad, origin) + 1;
    SS_CHECK_INPUT(c.pos_offset >= 0 && n_positions > c.pos_offset, origin,
                   "max_position_embeddings ", n_positions, " leaves no position after ",
                   "padding_idx + 1 = ", c.pos_offset);
    c.n_ctx = n_positions - c.pos_offset;
}

}  // namespace

void read_bert_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c) {
    read_encoder_hf_config(j, origin, c, /*default_pad=*/-1);
}

// RobertaConfig: pad_token_id 1 by default; positions start at pad_token_id + 1.
void read_roberta_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c) {
    read_encoder_hf_config(j, origin, c, /*default_pad=*/1);
}

std::unique_ptr<Transformer> build_bert_family(const ModelConfig& config, const WeightSource& src,
                                               const RuntimeOptions& runtime) {
    return std::make_unique<BertFamily>(config, src, runtime, EncoderVariant{});
}

std::unique_ptr<Transformer> build_roberta_family(const ModelConfig& config,
                                                  const WeightSource& src,
                                                  const RuntimeOptions& runtime) {
    return std::make_unique<BertFamily>(config, src, runtime,
                                        EncoderVariant{/*positions_from_ids=*/true,
                                                       /*head_exact_gelu=*/true});
}

}  // namespace sinkscope::model
