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

#include "family_common.hpp"
#include "sinkscope/core/error.hpp"
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

using detail::LayerNorm;
using detail::Linear;

struct LayerWeights {
    detail::AttentionWeights attn;  // query/key/value [H * d_head, d_model], output.dense
    LayerNorm attn_norm;            // attention.output.LayerNorm
    detail::Mlp mlp;                // intermediate.dense [d_mlp, d_model], output.dense
    LayerNorm ffn_norm;             // output.LayerNorm
};

class BertFamily final : public Transformer {
public:
    BertFamily(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt,
               EncoderVariant variant);
    ForwardResult forward(const ModelInput& input, const CaptureSpec& capture,
                          const HeadMask* mask) const override;
    int64_t n_params() const override { return n_params_; }
    std::vector<Parameter> parameters() const override { return tensors_.parameters(); }

private:
    // [batch, pos] int64 position ids (see EncoderVariant).
    at::Tensor position_ids(const at::Tensor& ids) const;

    ModelConfig c_;
    EncoderVariant variant_;
    at::ScalarType dtype_;
    at::Device device_;
    int64_t n_positions_ = 0;  // rows of the position table (n_ctx + pos_offset)
    detail::Weight word_;      // [d_vocab, d_model]
    at::Tensor pos_;           // [n_positions, d_model]
    at::Tensor type_;          // [n_token_types, d_model]
    LayerNorm embed_norm_;
    std::vector<LayerWeights> layers_;
    Linear head_dense_;  // [d_model, d_model] MLM transform
    LayerNorm head_norm_;
    Linear out_;            // [d_vocab, d_model] (weight aliases word_ when tied) + bias [d_vocab]
    bool has_head_ = true;  // false: no MLM head in the format (GGUF), no logits
    detail::TensorTable tensors_;  // parameters(), in load order
    int64_t n_params_ = 0;
};

BertFamily::BertFamily(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt,
                       EncoderVariant variant)
    : c_(config),
      variant_(variant),
      dtype_(detail::scalar_type(rt.dtype)),
      device_(detail::device_of(rt)) {
    using R = TensorRole;
    detail::WeightLoader ld(c_, src, rt);
    const int64_t D = c_.d_model, HD = c_.n_heads * c_.d_head, F = c_.d_mlp;
    SS_CHECK_INPUT(c_.n_kv_heads == c_.n_heads, src.origin,
                   "encoders have one key/value head per query head");
    n_positions_ = c_.n_ctx + c_.pos_offset;
    auto norm = [&](R w, R b, int64_t layer) {
        return detail::load_layer_norm(ld, w, b, layer, D, c_.norm_eps);
    };
    auto linear = [&](R w, R b, int64_t layer, int64_t n_out, int64_t n_in) {
        return detail::load_linear(ld, w, b, layer, n_out, n_in);
    };

    word_ = ld.weight(R::TokenEmbed, -1, {c_.d_vocab, D});
    pos_ = ld.get(R::PosEmbed, -1, {n_positions_, D});
    type_ = ld.get(R::TypeEmbed, -1, {c_.n_token_types, D});
    embed_norm_ = norm(R::EmbedNorm, R::EmbedNormBias, -1);
    for (int64_t l = 0; l < c_.n_layers; ++l) {
        LayerWeights w;
        w.attn.q = linear(R::AttnQ, R::AttnQBias, l, HD, D);
        w.attn.k = linear(R::AttnK, R::AttnKBias, l, HD, D);
        w.attn.v = linear(R::AttnV, R::AttnVBias, l, HD, D);
        w.attn.o = linear(R::AttnO, R::AttnOBias, l, D, HD);
        w.attn_norm = norm(R::AttnNorm, R::AttnNormBias, l);
        w.mlp.up = linear(R::FfnUp, R::FfnUpBias, l, F, D);
        w.mlp.down = linear(R::FfnDown, R::FfnDownBias, l, D, F);
        w.mlp.act = c_.act;
        w.ffn_norm = norm(R::FfnNorm, R::FfnNormBias, l);
        layers_.push_back(std::move(w));
    }
    // llama.cpp's bert GGUF is an embedding model: its layout names no MLM head, and the model
    // then gives no logits (the attention analyses do not need them).
    has_head_ = !ld.name(R::HeadDense).empty();
    if (has_head_) {
        head_dense_ = linear(R::HeadDense, R::HeadDenseBias, -1, D, D);
        head_norm_ = norm(R::HeadNorm, R::HeadNormBias, -1);
        // save_pretrained drops the tied decoder weight; an untied checkpoint stores it.
        out_.w = c_.tied_embeddings ? word_ : ld.weight(R::Output, -1, {c_.d_vocab, D});
        if (c_.tied_embeddings) ld.record(R::Output, -1, out_.w);
        out_.b = ld.get(R::OutputBias, -1, {c_.d_vocab});
    }
    n_params_ = ld.n_params();
    tensors_ = ld.take_tensors();
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
    c10::InferenceMode guard{!detail::gradients_recorded()};
    const at::Tensor ids = detail::checked_ids(input, c_.d_vocab, device_);  // [batch, pos]
    const int64_t T = ids.size(1);
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

    const detail::Stage stage(input, c_, ids.size(0), T, dtype_, device_);

    ForwardResult result;
    detail::HookRecorder hooks(capture, result);
    // A later pipeline stage starts from the stream handed in (model.hpp LayerRange).
    at::Tensor x = stage.residual;  // [batch, pos, d_model]
    if (stage.embeds()) {
        // Pass 1: embeddings in HF's order, (word + token_type) + position, then LayerNorm.
        x = word_.rows(ids) + at::embedding(type_, types);  // [b, pos, d_model]
        x = x + at::embedding(pos_, position_ids(ids));
        x = hooks.keep(HookPoint::Embed, -1, x);
        x = embed_norm_(x);
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(c_.d_head));

    for (int64_t l = stage.begin; l < stage.end; ++l) {
        const LayerWeights& w = layers_[static_cast<size_t>(l)];
        x = hooks.keep(HookPoint::ResidPre, l, x);
        // Pass 2: bidirectional self-attention on the block input (post-LN: no norm before).
        x = w.attn_norm(x + detail::self_attention(x, w.attn, c_, nullptr, hidden, scale, l, mask,
                                                   dtype_, hooks));
        x = hooks.keep(HookPoint::ResidMid, l, x);
        // Pass 3: MLP, then the output LayerNorm.
        x = w.ffn_norm(x + w.mlp(x));
        x = hooks.keep(HookPoint::ResidPost, l, x);
    }
    if (!stage.ends_model()) return detail::Stage::hand_over(std::move(result), x);
    // Pass 4: MLM head: dense -> activation -> LayerNorm -> tied decoder + bias. Without a head
    // the logits stay undefined.
    if (!has_head_ || !capture.wants_logits()) return result;
    const Activation head_act = variant_.head_exact_gelu ? Activation::Gelu : c_.act;
    const at::Tensor h = head_norm_(detail::activate(head_dense_(x), head_act));  // [b, pos, D]
    result.logits = out_(h).to(detail::accum_type(dtype_));  // [batch, pos, d_vocab]
    return result;
}

}  // namespace

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
