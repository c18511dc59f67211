// The ViT family: ViTForImageClassification (Hugging Face modeling_vit.py semantics). Images are
// cut into P x P patches by a stride-P convolution, a learned CLS token is prepended and learned
// position embeddings added (tokens: CLS first, then patches row-major); pre-LN encoder blocks with
// bidirectional eager attention; the final vit.layernorm, then a classifier on the CLS token.
#include <cmath>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <nlohmann/json.hpp>

#include "config_json.hpp"
#include "family_common.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"
#include "tensor_load.hpp"

namespace sinkscope::model {

namespace {

struct VitLayer {
    at::Tensor ln1_w, ln1_b;    // layernorm_before [d_model]
    at::Tensor wq, wk, wv;      // [n_heads * d_head, d_model]
    at::Tensor bq, bk, bv;      // [n_heads * d_head] (undefined without qkv_bias)
    at::Tensor wo, bo;          // attention.output.dense [d_model, n_heads * d_head], [d_model]
    at::Tensor ln2_w, ln2_b;    // layernorm_after [d_model]
    at::Tensor w_up, b_up;      // intermediate.dense [d_mlp, d_model], [d_mlp]
    at::Tensor w_down, b_down;  // output.dense [d_model, d_mlp], [d_model]
};

class VitFamily final : public Transformer {
public:
    VitFamily(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt);
    ForwardResult forward(const ModelInput& input, const CaptureSpec& capture,
                          const HeadMask* mask) const override;
    int64_t n_params() const override { return n_params_; }

private:
    // HF nn.LayerNorm over the last dim in the compute dtype.
    at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const {
        return at::layer_norm(x, {c_.d_model}, w, b, c_.norm_eps);
    }
    at::Tensor activation(const at::Tensor& x) const;

    ModelConfig c_;
    at::ScalarType dtype_;
    at::Device device_;
    at::Tensor patch_w_, patch_b_;  // [d_model, n_channels, patch, patch], [d_model]
    at::Tensor cls_;                // [1, 1, d_model]
    at::Tensor pos_;                // [1, 1 + n_patches, d_model]
    std::vector<VitLayer> layers_;
    at::Tensor out_norm_w_, out_norm_b_;  // vit.layernorm [d_model]
    at::Tensor w_cls_, b_cls_;            // classifier [n_labels, d_model], [n_labels]
    int64_t n_params_ = 0;
};

int64_t n_patches_of(const ModelConfig& c) {
    const int64_t side = c.image_size / c.patch_size;
    return side * side;
}

VitFamily::VitFamily(const ModelConfig& config, const WeightSource& src, const RuntimeOptions& rt)
    : c_(config), dtype_(detail::scalar_type(rt.dtype)), device_(detail::device_of(rt)) {
    if (src.format != WeightFormat::HuggingFace)
        throw UnsupportedError(src.origin, std::string("ViT weights in ") +
                                               weight_format_name(src.format) + " format");
    const ArchitectureInfo& arch = find_architecture(c_.architecture);
    const int64_t D = c_.d_model, HD = c_.n_heads * c_.d_head, F = c_.d_mlp, P = c_.patch_size;
    auto read = [&](TensorRole role, int64_t layer, std::vector<int64_t> shape) {
        at::Tensor host = detail::read_f32(src, tensor_name(arch, src.format, role, layer), shape);
        n_params_ += host.numel();
        return host.to(device_, dtype_).contiguous();
    };
    patch_w_ = read(TensorRole::PatchEmbed, -1, {D, c_.n_channels, P, P});
    patch_b_ = read(TensorRole::PatchEmbedBias, -1, {D});
    cls_ = read(TensorRole::ClsToken, -1, {1, 1, D});
    pos_ = read(TensorRole::PosEmbed, -1, {1, 1 + n_patches_of(c_), D});
    for (int64_t l = 0; l < c_.n_layers; ++l) {
        VitLayer w;
        w.ln1_w = read(TensorRole::AttnNorm, l, {D});
        w.ln1_b = read(TensorRole::AttnNormBias, l, {D});
        w.wq = read(TensorRole::AttnQ, l, {HD, D});
        w.wk = read(TensorRole::AttnK, l, {HD, D});
        w.wv = read(TensorRole::AttnV, l, {HD, D});
        if (c_.qkv_bias) {
            w.bq = read(TensorRole::AttnQBias, l, {HD});
            w.bk = read(TensorRole::AttnKBias, l, {HD});
            w.bv = read(TensorRole::AttnVBias, l, {HD});
        }
        w.wo = read(TensorRole::AttnO, l, {D, HD});
        w.bo = read(TensorRole::AttnOBias, l, {D});
        w.ln2_w = read(TensorRole::FfnNorm, l, {D});
        w.ln2_b = read(TensorRole::FfnNormBias, l, {D});
        w.w_up = read(TensorRole::FfnUp, l, {F, D});
        w.b_up = read(TensorRole::FfnUpBias, l, {F});
        w.w_down = read(TensorRole::FfnDown, l, {D, F});
        w.b_down = read(TensorRole::FfnDownBias, l, {D});
        layers_.push_back(std::move(w));
    }
    out_norm_w_ = read(TensorRole::OutputNorm, -1, {D});
    out_norm_b_ = read(TensorRole::OutputNormBias, -1, {D});
    w_cls_ = read(TensorRole::Output, -1, {c_.d_vocab, D});
    b_cls_ = read(TensorRole::OutputBias, -1, {c_.d_vocab});
}

at::Tensor VitFamily::activation(const at::Tensor& x) const {
    switch (c_.act) {
        case Activation::Gelu:
            return at::gelu(x);
        case Activation::GeluTanh:
            return at::gelu(x, "tanh");
        case Activation::Silu:
            return at::silu(x);
    }
    throw InternalError("unknown activation");
}

ForwardResult VitFamily::forward(const ModelInput& input, const CaptureSpec& capture,
                                 const HeadMask* mask) const {
    c10::InferenceMode guard;
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
    const int64_t B = px.size(0), H = c_.n_heads, dh = c_.d_head;

    ForwardResult result;
    detail::HookRecorder hooks(capture, result);
    // Pass 1: patch embedding (Conv2d, stride P) -> [batch, n_patches, d_model] row-major, CLS
    // first, plus learned positions (HF ViTEmbeddings; = hidden_states[0]).
    const at::Tensor patches =  // [batch, n_patches, d_model]
        at::conv2d(px, patch_w_, patch_b_, {c_.patch_size, c_.patch_size})
            .flatten(2)
            .transpose(1, 2);
    at::Tensor x = at::cat({cls_.expand({B, 1, c_.d_model}), patches}, 1) + pos_;  // [b, T, D]
    hooks.keep(HookPoint::Embed, -1, x);
    const int64_t T = x.size(1);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dh));

    for (int64_t l = 0; l < c_.n_layers; ++l) {
        const VitLayer& w = layers_[static_cast<size_t>(l)];
        hooks.keep(HookPoint::ResidPre, l, x);
        // Pass 2: pre-LN bidirectional attention (no mask: every key visible, spec section 0).
        const at::Tensor h = layer_norm(x, w.ln1_w, w.ln1_b);  // [batch, pos, d_model]
        const at::Tensor q = at::linear(h, w.wq, w.bq).view({B, T, H, dh});
        const at::Tensor k = at::linear(h, w.wk, w.bk).view({B, T, H, dh});
        const at::Tensor v = at::linear(h, w.wv, w.bv).view({B, T, H, dh});
        hooks.keep(HookPoint::Q, l, q);
        hooks.keep(HookPoint::K, l, k);
        hooks.keep(HookPoint::V, l, v);
        hooks.keep(HookPoint::RotQ, l, q);  // no rotary positions: rot_q = q, rot_k = k
        hooks.keep(HookPoint::RotK, l, k);
        const at::Tensor z = detail::attend(q, k, v, at::Tensor(), scale, l, mask, dtype_, hooks);
        x = x + at::linear(z.view({B, T, H * dh}), w.wo, w.bo);
        hooks.keep(HookPoint::ResidMid, l, x);
        // Pass 3: pre-LN MLP, output.dense(act(intermediate.dense(ln(x)))) + x.
        const at::Tensor h2 = layer_norm(x, w.ln2_w, w.ln2_b);
        x = x + at::linear(activation(at::linear(h2, w.w_up, w.b_up)), w.w_down, w.b_down);
        hooks.keep(HookPoint::ResidPost, l, x);
    }
    // Pass 4: vit.layernorm, classifier on the CLS token -> logits [batch, n_labels] f32.
    const at::Tensor x_final = layer_norm(x, out_norm_w_, out_norm_b_);  // [batch, pos, d_model]
    hooks.keep(HookPoint::FinalNorm, -1, x_final);
    result.logits = at::linear(x_final.select(1, 0), w_cls_, b_cls_).to(at::kFloat);
    return result;
}

// id2label {"0": "airplane", ...} -> labels by class id; transformers' default without it is
// num_labels (default 2) labels "LABEL_k".
std::vector<std::string> read_labels(const nlohmann::json& j, const std::string& origin) {
    std::vector<std::string> labels;
    if (j.contains("id2label") && !j["id2label"].is_null()) {
        const auto& m = j["id2label"];
        SS_CHECK_INPUT(m.is_object() && !m.empty(), origin, "id2label is not a non-empty object");
        labels.resize(m.size());
        std::vector<bool> seen(m.size(), false);
        for (const auto& [key, value] : m.items()) {
            size_t used = 0;
            int64_t id = -1;
            try {
                id = std::stoll(key, &used);
            } catch (const std::exception&) {
            }
            SS_CHECK_INPUT(
                used == key.size() && id >= 0 && id < int64_t(m.size()) && !seen[size_t(id)],
                origin, "id2label keys must be the ids 0..", m.size() - 1, ", found '", key, "'");
            SS_CHECK_INPUT(value.is_string(), origin, "id2label['", key, "'] is not a string");
            seen[size_t(id)] = true;
            labels[size_t(id)] = value.get<std::string>();
        }
        return labels;
    }
    const int64_t n = json_int_or(j, "num_labels", 2, origin);
    SS_CHECK_INPUT(n > 0, origin, "num_labels must be positive, found ", n);
    for (int64_t k = 0; k < n; ++k) labels.push_back("LABEL_" + std::to_string(k));
    return labels;
}

}  // namespace

void read_vit_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c) {
    c.image_size = json_int(j, "image_size", origin);
    c.patch_size = json_int(j, "patch_size", origin);
    c.n_channels = json_int_or(j, "num_channels", 3, origin);
    c.d_model = json_int(j, "hidden_size", origin);
    c.n_layers = json_int(j, "num_hidden_layers", origin);
    c.n_heads = json_int(j, "num_attention_heads", origin);
    c.n_kv_heads = c.n_heads;
    SS_CHECK_INPUT(c.n_heads > 0 && c.d_model % c.n_heads == 0, origin, "hidden_size (", c.d_model,
                   ") is not a multiple of num_attention_heads (", c.n_heads, ")");
    c.d_head = c.d_model / c.n_heads;
    c.d_mlp = json_int(j, "intermediate_size", origin);
    c.norm_eps = json_float_or(j, "layer_norm_eps", 1e-12, origin);
    c.act = parse_hf_activation(j.value("hidden_act", std::string("gelu")), origin);
    c.qkv_bias = json_bool_or(j, "qkv_bias", true, origin);
    SS_CHECK_INPUT(c.image_size > 0 && c.patch_size > 0 && c.image_size % c.patch_size == 0, origin,
                   "image_size (", c.image_size, ") is not a multiple of patch_size (",
                   c.patch_size, ")");
    SS_CHECK_INPUT(c.n_channels > 0, origin, "num_channels must be positive");
    c.labels = read_labels(j, origin);
    c.d_vocab = static_cast<int64_t>(c.labels.size());
    c.n_ctx = 1 + n_patches_of(c);
    c.causal = false;
    c.norm = NormKind::LayerNorm;
    c.positions = PositionKind::Learned;
    c.tied_embeddings = false;
}

std::unique_ptr<Transformer> build_vit_family(const ModelConfig& config, const WeightSource& src,
                                              const RuntimeOptions& runtime) {
    return std::make_unique<VitFamily>(config, src, runtime);
}

}  // namespace sinkscope::model
