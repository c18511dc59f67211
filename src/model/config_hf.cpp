// config.json of every family in the registry: the keys each family's Hugging Face
// configuration class defines (transformers configuration_<family>.py, with its defaults), read
// into a ModelConfig: those every family has once (read_hf_common_keys, by each family's names,
// HfKeys), then the family's own. Torch-free (sinkscope_model_config), so the configuration of a
// checkpoint can be read and validated without the model runtime (`inspect`, the config fuzz
// target). The forward of each family is in its own file (src/model/<family>.cpp).
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config_json.hpp"
#include "rope_scaling.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/model/config.hpp"
#include "sinkscope/model/registry.hpp"

namespace sinkscope::model {

namespace {

// config.json keys shared by BERT and RoBERTa (transformers BertConfig / RobertaConfig).
void read_encoder_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c,
                            int64_t default_pad) {
    c.n_token_types = json_int_or(j, "type_vocab_size", 2, origin);
    SS_CHECK_INPUT(c.n_token_types > 0, origin, "type_vocab_size must be positive");
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
                origin, "id2label keys must be the ids 0..", m.size() - 1, ", found ", quote(key));
            SS_CHECK_INPUT(value.is_string(), origin, "id2label[", quote(key), "] is not a string");
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

// ---- The keys every family has (read before the family's reader, config.cpp) ----
const HfKeys kHfLlamaKeys{.n_kv_heads = "num_key_value_heads",
                          .d_head_divides = false,  // head_dim (read_llama_hf_config)
                          .norm_eps = "rms_norm_eps",
                          .norm_eps_default = 1e-6,
                          .act = nullptr};  // checked against the family's (silu, gelu tanh)
const HfKeys kHfGpt2Keys{.d_model = "n_embd",
                         .n_layers = "n_layer",
                         .n_heads = "n_head",
                         .d_mlp = nullptr,  // n_inner, default 4 n_embd (read_gpt2_hf_config)
                         .n_ctx = "n_positions",
                         .n_ctx_default = -1,
                         .norm_eps = "layer_norm_epsilon",
                         .act = "activation_function",
                         .act_default = "gelu_new"};
const HfKeys kHfGptNeoxKeys{};
const HfKeys kHfPhiKeys{
    .n_kv_heads = "num_key_value_heads", .n_ctx_default = 2048, .act_default = "gelu_new"};
const HfKeys kHfEncoderKeys{.n_ctx = nullptr,  // after the padding offset (read_encoder_hf_config)
                            .norm_eps_default = 1e-12};
const HfKeys kHfVitKeys{.d_vocab = nullptr,  // its labels (read_vit_hf_config)
                        .n_ctx = nullptr,    // 1 + patches
                        .norm_eps_default = 1e-12,
                        .tie_word_embeddings = false,
                        .token_ids = false};

void read_hf_common_keys(const nlohmann::json& j, const std::string& origin,
                         const ArchitectureInfo& arch, ModelConfig& c) {
    SS_CHECK(arch.hf_keys, "architecture ", arch.name, " has no config.json keys");
    const HfKeys& k = *arch.hf_keys;
    c.d_model = json_int(j, k.d_model, origin);
    c.n_layers = json_int(j, k.n_layers, origin);
    c.n_heads = json_int(j, k.n_heads, origin);
    c.n_kv_heads = k.n_kv_heads ? json_int_or(j, k.n_kv_heads, c.n_heads, origin) : c.n_heads;
    if (k.d_head_divides) {
        SS_CHECK_INPUT(c.n_heads > 0 && c.d_model % c.n_heads == 0, origin, k.d_model, " (",
                       c.d_model, ") is not a multiple of ", k.n_heads, " (", c.n_heads, ")");
        c.d_head = c.d_model / c.n_heads;
    }
    if (k.d_mlp) c.d_mlp = json_int(j, k.d_mlp, origin);
    if (k.d_vocab) c.d_vocab = json_int(j, k.d_vocab, origin);
    if (k.n_ctx)
        c.n_ctx = k.n_ctx_default < 0 ? json_int(j, k.n_ctx, origin)
                                      : json_int_or(j, k.n_ctx, k.n_ctx_default, origin);
    c.norm_eps = json_float_or(j, k.norm_eps, k.norm_eps_default, origin);
    c.act = k.act ? parse_hf_activation(j.value(k.act, std::string(k.act_default)), origin)
                  : arch.default_act;
    if (k.tie_word_embeddings)
        c.tied_embeddings = json_bool_or(j, "tie_word_embeddings", arch.tied_by_default, origin);
    if (k.token_ids) {
        c.bos_token_id = json_token_id_or(j, "bos_token_id", origin);
        c.eos_token_id = json_token_id_or(j, "eos_token_id", origin);
    }
}

// ---- Llama, Mistral, Qwen2, Gemma (forward: src/model/llama.cpp) ----
void read_llama_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c) {
    const ArchitectureInfo& arch = find_architecture(c.architecture);
    c.d_head = json_int_or(j, "head_dim", c.n_heads > 0 ? c.d_model / c.n_heads : 0, origin);
    c.rope_theta = json_float_or(j, "rope_theta", 10000.0, origin);
    c.qkv_bias = arch.qkv_bias;
    c.norm_add_one = arch.norm_add_one_hf;
    c.embed_scale = arch.embed_scale;
    if (arch.default_act == Activation::Silu) {
        const std::string act = j.value("hidden_act", std::string("silu"));
        if (act != "silu") throw UnsupportedError(origin, "hidden_act '" + act + "'");
    }
    if (arch.has_sliding_window) {
        const bool use = j.value("use_sliding_window", arch.sliding_window_by_default);
        c.window = use ? json_int_or(j, "sliding_window", 0, origin) : 0;
        // Which layers use it: config.json layer_types when present (newer transformers), else
        // Qwen2's max_window_layers (layers >= it slide), else every layer (Mistral).
        if (c.window > 0 && j.contains("layer_types") && j["layer_types"].is_array()) {
            for (size_t l = 0; l < j["layer_types"].size(); ++l)
                if (j["layer_types"][l] == "sliding_attention")
                    c.window_layers.push_back(static_cast<int64_t>(l));
            if (c.window_layers.empty()) c.window = 0;
        } else if (c.window > 0 && j.contains("max_window_layers")) {
            for (int64_t l = json_int(j, "max_window_layers", origin); l < c.n_layers; ++l)
                c.window_layers.push_back(l);
            if (c.window_layers.empty()) c.window = 0;
        }
    }
    c.rope_scaling = read_hf_rope_scaling(j, c.n_ctx, origin);
    if (j.value("attention_bias", false) && !arch.qkv_bias)
        throw UnsupportedError(origin, "attention_bias=true (output projection bias)");
    if (j.value("mlp_bias", false)) throw UnsupportedError(origin, "mlp_bias=true");
}

// ---- Gemma-2 (forward: src/model/gemma2.cpp) ----
// Gemma2Config keys beyond the Llama ones (transformers configuration_gemma2.py defaults:
// query_pre_attn_scalar 256, attn_logit_softcapping 50, final_logit_softcapping 30, sliding_window
// 4096; null soft-caps switch capping off).
void read_gemma2_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c) {
    read_llama_hf_config(j, origin, c);
    // Gemma2 reads hidden_activation (hidden_act is the legacy key).
    const char* act_key = j.contains("hidden_activation") ? "hidden_activation" : "hidden_act";
    if (j.contains(act_key) && j[act_key].is_string())
        c.act = parse_hf_activation(j[act_key].get<std::string>(), origin);
    if (c.act != Activation::GeluTanh)
        throw UnsupportedError(origin, std::string("gemma2 ") + act_key + " '" +
                                           activation_name(c.act) + "' (GeGLU uses gelu tanh)");
    const double scalar = json_float_or(j, "query_pre_attn_scalar", 256.0, origin);
    SS_CHECK_INPUT(scalar > 0, origin, "query_pre_attn_scalar must be positive");
    c.attn_scale = 1.0 / std::sqrt(scalar);
    auto cap = [&](const char* key, double fallback) {
        if (j.contains(key) && j[key].is_null()) return 0.0;
        return json_float_or(j, key, fallback, origin);
    };
    c.attn_softcap = cap("attn_logit_softcapping", 50.0);
    c.final_softcap = cap("final_logit_softcapping", 30.0);
    if (!j.contains("sliding_window")) c.window = 4096;
    c.window_layers.clear();
    if (c.window > 0) {
        if (j.contains("layer_types") && j["layer_types"].is_array()) {
            const auto& types = j["layer_types"];
            SS_CHECK_INPUT(static_cast<int64_t>(types.size()) == c.n_layers, origin,
                           "layer_types has ", types.size(), " entries for ", c.n_layers,
                           " layers");
            for (int64_t l = 0; l < c.n_layers; ++l) {
                const auto& t = types[static_cast<size_t>(l)];
                SS_CHECK_INPUT(t == "sliding_attention" || t == "full_attention", origin,
                               "layer_types[", l, "] must be sliding_attention or full_attention");
                if (t == "sliding_attention") c.window_layers.push_back(l);
            }
        } else {
            // transformers Gemma2: is_sliding = not bool(layer_idx % 2), the even layers.
            for (int64_t l = 0; l < c.n_layers; l += 2) c.window_layers.push_back(l);
        }
        if (c.window_layers.empty()) c.window = 0;
    }
}

// ---- Phi-3 (forward: src/model/phi3.cpp) ----
// Phi3Config: the Llama keys (hidden_act silu, rms_norm_eps, sliding_window, rope_scaling with
// longrope, attention_bias refused) plus partial_rotary_factor (default 1; Phi-4-mini 0.75).
void read_phi3_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c) {
    read_llama_hf_config(j, origin, c);
    const double factor = json_float_or(j, "partial_rotary_factor", 1.0, origin);
    c.rotary_dim = static_cast<int64_t>(factor * static_cast<double>(c.d_head));  // int() as HF
    SS_CHECK_INPUT(c.rotary_dim > 0, origin, "partial_rotary_factor ", factor,
                   " leaves no rotary dims");
}

// ---- GPT-2 (forward: src/model/gpt2.cpp) ----
void read_gpt2_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c) {
    c.d_mlp = json_int_or(j, "n_inner", 4 * c.d_model, origin);  // null -> 4 * n_embd
    c.qkv_bias = true;
    c.norm = NormKind::LayerNorm;
    c.positions = PositionKind::Learned;
    c.rotary_dim = 0;
    c.rope_theta = 0;  // no RoPE
    if (!json_bool_or(j, "scale_attn_weights", true, origin))
        throw UnsupportedError(origin, "scale_attn_weights=false (unscaled attention)");
    if (json_bool_or(j, "scale_attn_by_inverse_layer_idx", false, origin))
        throw UnsupportedError(origin, "scale_attn_by_inverse_layer_idx=true");
    if (json_bool_or(j, "reorder_and_upcast_attn", false, origin))
        throw UnsupportedError(origin, "reorder_and_upcast_attn=true");
}

// ---- GPT-NeoX / Pythia (forward: src/model/gpt_neox.cpp) ----
void read_gpt_neox_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c) {
    c.parallel_residual = json_bool_or(j, "use_parallel_residual", true, origin);
    // rotary_pct / rotary_emb_base are GPT-NeoX's names; newer configs repeat them as
    // partial_rotary_factor / rope_theta (transformers' GPTNeoXConfig maps one onto the other).
    const double pct = json_float_or(
        j, "rotary_pct", json_float_or(j, "partial_rotary_factor", 0.25, origin), origin);
    c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.d_head) * pct);  // int() as HF
    c.rope_theta = json_float_or(j, "rotary_emb_base",
                                 json_float_or(j, "rope_theta", 10000.0, origin), origin);
    SS_CHECK_INPUT(c.rotary_dim > 0, origin, "rotary_pct ", pct, " leaves no rotary dims");
    c.qkv_bias = true;
    c.norm = NormKind::LayerNorm;
    c.positions = PositionKind::Rotary;
    c.rope_scaling = read_hf_rope_scaling(j, c.n_ctx, origin);
    if (!json_bool_or(j, "attention_bias", true, origin))
        throw UnsupportedError(origin, "attention_bias=false (GPT-NeoX without q/k/v/dense bias)");
}

// ---- Phi-1/2 (forward: src/model/phi.cpp) ----
void read_phi_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c) {
    const double factor = json_float_or(j, "partial_rotary_factor", 0.5, origin);
    c.rotary_dim = static_cast<int64_t>(factor * static_cast<double>(c.d_head));  // int() as HF
    SS_CHECK_INPUT(c.rotary_dim > 0, origin, "partial_rotary_factor ", factor,
                   " leaves no rotary dims");
    c.rope_theta = json_float_or(j, "rope_theta", 10000.0, origin);
    c.qkv_bias = true;
    c.norm = NormKind::LayerNorm;
    c.positions = PositionKind::Rotary;
    c.parallel_residual = true;
    if (json_bool_or(j, "qk_layernorm", false, origin))
        throw UnsupportedError(origin, "qk_layernorm=true");
    c.rope_scaling = read_hf_rope_scaling(j, c.n_ctx, origin);
}

// ---- BERT, RoBERTa / XLM-R (forward: src/model/bert.cpp) ----
void read_bert_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c) {
    read_encoder_hf_config(j, origin, c, /*default_pad=*/-1);
}

// RobertaConfig: pad_token_id 1 by default; positions start at pad_token_id + 1.
void read_roberta_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c) {
    read_encoder_hf_config(j, origin, c, /*default_pad=*/1);
}

// ---- ViT (forward: src/model/vit.cpp) ----
void read_vit_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c) {
    c.image_size = json_int(j, "image_size", origin);
    c.patch_size = json_int(j, "patch_size", origin);
    c.n_channels = json_int_or(j, "num_channels", 3, origin);
    c.qkv_bias = json_bool_or(j, "qkv_bias", true, origin);
    SS_CHECK_INPUT(c.image_size > 0 && c.patch_size > 0 && c.image_size % c.patch_size == 0, origin,
                   "image_size (", c.image_size, ") is not a multiple of patch_size (",
                   c.patch_size, ")");
    SS_CHECK_INPUT(c.n_channels > 0, origin, "num_channels must be positive");
    c.labels = read_labels(j, origin);
    c.d_vocab = static_cast<int64_t>(c.labels.size());
    c.n_ctx = 1 + c.n_patches();
    c.causal = false;
    c.norm = NormKind::LayerNorm;
    c.positions = PositionKind::Learned;
}

}  // namespace sinkscope::model
