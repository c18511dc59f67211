// The ViT family: ViTForImageClassification (Hugging Face modeling_vit.py semantics). Images are
// cut into P x P patches by a stride-P convolution, a learned CLS token is prepended and learned
// position embeddings added (tokens: CLS first, then patches row-major); pre-LN encoder blocks with
// bidirectional eager attention; the final vit.layernorm, then a classifier on the CLS token.
#include <cmath>
#include <optional>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "family_common.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"
#include "tensor_load.hpp"

namespace sinkscope::model {

namespace {

using detail::LayerNorm;
using detail::Linear;

struct VitLayer {
    LayerNorm ln1;                  // layernorm_before [d_model]
    detail::AttentionWeights attn;  // q/k/v [H * d_head, d_model] (bias unless !qkv_bias), output
    LayerNorm ln2;                  // layernorm_after [d_model]
    detail::Mlp mlp;                // intermediate.dense [d_mlp, d_model], output.dense
};

class VitFamily final : public Transformer {
public:
    VitFamily(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt);
    ForwardResult forward(const ModelInput& input, const CaptureSpec& capture,
                          const HeadMask* mask) const override;
    int64_t n_params() const override { return n_params_; }
    std::vector<Parameter> parameters() const override { return tensors_.parameters(); }

private:
    ModelConfig c_;
    at::ScalarType dtype_;
    at::Device device_;
    at::Tensor patch_w_, patch_b_;  // [d_model, n_channels, patch, patch], [d_model]
    at::Tensor cls_;                // [1, 1, d_model]
    at::Tensor pos_;                // [1, 1 + n_patches, d_model]
    std::vector<VitLayer> layers_;
    LayerNorm out_norm_;           // vit.layernorm [d_model]
    Linear classifier_;            // [n_labels, d_model], [n_labels]
    detail::TensorTable tensors_;  // parameters(), in load order
    int64_t n_params_ = 0;
};

VitFamily::VitFamily(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt)
    : c_(config), dtype_(detail::scalar_type(rt.dtype)), device_(detail::device_of(rt)) {
    if (src.format != WeightFormat::HuggingFace)
        throw UnsupportedError(src.origin, std::string("ViT weights in ") +
                                               weight_format_name(src.format) + " format");
    using R = TensorRole;
    detail::WeightLoader ld(c_, src, rt);
    const int64_t D = c_.d_model, HD = c_.n_heads * c_.d_head, F = c_.d_mlp, P = c_.patch_size;
    patch_w_ = ld.get(R::PatchEmbed, -1, {D, c_.n_channels, P, P});
    patch_b_ = ld.get(R::PatchEmbedBias, -1, {D});
    cls_ = ld.get(R::ClsToken, -1, {1, 1, D});
    pos_ = ld.get(R::PosEmbed, -1, {1, 1 + c_.n_patches(), D});
    auto norm = [&](R w, R b, int64_t layer) {
        return detail::load_layer_norm(ld, w, b, layer, D, c_.norm_eps);
    };
    // q/k/v biases unless config.json says qkv_bias=false
    auto qkv_bias = [&](R b) { return c_.qkv_bias ? std::optional<R>(b) : std::nullopt; };
    for (int64_t l = 0; l < c_.n_layers; ++l) {
        VitLayer w;
        w.ln1 = norm(R::AttnNorm, R::AttnNormBias, l);
        w.attn.q = detail::load_linear(ld, R::AttnQ, qkv_bias(R::AttnQBias), l, HD, D);
        w.attn.k = detail::load_linear(ld, R::AttnK, qkv_bias(R::AttnKBias), l, HD, D);
        w.attn.v = detail::load_linear(ld, R::AttnV, qkv_bias(R::AttnVBias), l, HD, D);
        w.attn.o = detail::load_linear(ld, R::AttnO, R::AttnOBias, l, D, HD);
        w.ln2 = norm(R::FfnNorm, R::FfnNormBias, l);
        w.mlp.up = detail::load_linear(ld, R::FfnUp, R::FfnUpBias, l, F, D);
        w.mlp.down = detail::load_linear(ld, R::FfnDown, R::FfnDownBias, l, D, F);
        w.mlp.act = c_.act;
        layers_.push_back(std::move(w));
    }
    out_norm_ = norm(R::OutputNorm, R::OutputNormBias, -1);
    classifier_ = detail::load_linear(ld, R::Output, R::OutputBias, -1, c_.d_vocab, D);
    n_params_ = ld.n_params();
    tensors_ = ld.take_tensors();
}

ForwardResult VitFamily::forward(const ModelInput& input, const CaptureSpec& capture,
                                 const HeadMask* mask) const {
    c10::InferenceMode guard{!detail::gradients_recorded()};
    const at::Tensor& px_in = input.pixel_values;
    if (!px_in.defined())
        throw UsageError("a vision model (ViT) reads pixel_values, not token ids");
    if (px_in.dim() != 4 || px_in.size(1) != c_.n_channels || px_in.size(2) != c_.image_size ||
        px_in.size(3) != c_.image_size) {
        std::string got;
        for (int64_t d : px_in.sizes()) got += (got.empty() ? "" : ", ") + std::to_string(d);
        throw UsageError("pixel_values must be [batch, " + std::to_string(c_.n_channels) + ", " +
                         std::to_string(c_.image_size) + ", " + std::to_string(c_.image_size) +
                         "], got [" + got + "]");
    }
    SS_CHECK(!input.attention_mask.defined(), "ViT takes no attention mask (no padding)");
    detail::check_head_mask(mask, c_);
    const at::Tensor px = px_in.to(device_, dtype_);  // [batch, C, H, W]
    const int64_t B = px.size(0);

    const detail::Stage stage(input, c_, B, 1 + c_.n_patches(), dtype_, device_);

    ForwardResult result;
    detail::HookRecorder hooks(capture, result);
    // A later pipeline stage starts from the stream handed in (model.hpp LayerRange).
    at::Tensor x = stage.residual;  // [batch, pos, d_model]
    if (stage.embeds()) {
        // Pass 1: patch embedding (Conv2d, stride P) -> [batch, n_patches, d_model] row-major,
        // CLS first, plus learned positions (HF ViTEmbeddings; = hidden_states[0]).
        const at::Tensor patches =  // [batch, n_patches, d_model]
            at::conv2d(px, patch_w_, patch_b_, {c_.patch_size, c_.patch_size})
                .flatten(2)
                .transpose(1, 2);
        x = at::cat({cls_.expand({B, 1, c_.d_model}), patches}, 1) + pos_;  // [b, T, D]
        x = hooks.keep(HookPoint::Embed, -1, x);
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(c_.d_head));

    for (int64_t l = stage.begin; l < stage.end; ++l) {
        const VitLayer& w = layers_[static_cast<size_t>(l)];
        x = hooks.keep(HookPoint::ResidPre, l, x);
        // Pass 2: pre-LN bidirectional attention (no mask: every key visible, spec section 0; no
        // rotary positions: rot_q = q, rot_k = k).
        x = x + detail::self_attention(w.ln1(x), w.attn, c_, nullptr, at::Tensor(), scale, l, mask,
                                       dtype_, hooks);
        x = hooks.keep(HookPoint::ResidMid, l, x);
        // Pass 3: pre-LN MLP, output.dense(act(intermediate.dense(ln(x)))) + x.
        x = x + w.mlp(w.ln2(x));
        x = hooks.keep(HookPoint::ResidPost, l, x);
    }
    if (!stage.ends_model()) return detail::Stage::hand_over(std::move(result), x);
    // Pass 4: vit.layernorm, classifier on the CLS token -> logits [batch, n_labels] f32.
    at::Tensor x_final = out_norm_(x);  // [batch, pos, d_model]
    x_final = hooks.keep(HookPoint::FinalNorm, -1, x_final);
    result.logits = classifier_(x_final.select(1, 0)).to(detail::accum_type(dtype_));
    return result;
}

}  // namespace

std::unique_ptr<Transformer> build_vit_family(const ModelConfig& config, const WeightSource& src,
                                              const RuntimeOptions& runtime) {
    return std::make_unique<VitFamily>(config, src, runtime);
}

}  // namespace sinkscope::model
