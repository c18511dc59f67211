// ModelConfig from Hugging Face config.json and llama2.c headers (GGUF: config_gguf.cpp).
#include "sinkscope/model/config.hpp"

#include <nlohmann/json.hpp>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/model/registry.hpp"

namespace sinkscope::model {

const char* activation_name(Activation a) {
    return a == Activation::Silu ? "silu" : "gelu_pytorch_tanh";
}

const char* weight_format_name(WeightFormat f) {
    switch (f) {
        case WeightFormat::HuggingFace: return "huggingface";
        case WeightFormat::Gguf: return "gguf";
        case WeightFormat::Llama2c: return "llama2c";
    }
    return "?";
}

int64_t ModelConfig::n_params() const {
    const int64_t attn = d_model * d_head * (2 * n_heads + 2 * n_kv_heads) +
                         (qkv_bias ? d_head * (n_heads + 2 * n_kv_heads) : 0);
    const int64_t mlp = 3 * d_model * d_mlp;
    const int64_t per_layer = attn + mlp + 2 * d_model;
    return n_layers * per_layer + d_model + d_vocab * d_model * (tied_embeddings ? 1 : 2);
}

void validate_config(const ModelConfig& c, const std::string& origin) {
    auto positive = [&](int64_t v, const char* what) {
        SS_CHECK_INPUT(v > 0, origin, what, " must be positive, found ", v);
    };
    positive(c.n_layers, "n_layers");
    positive(c.n_heads, "n_heads");
    positive(c.n_kv_heads, "n_kv_heads");
    positive(c.d_model, "d_model");
    positive(c.d_head, "d_head");
    positive(c.d_mlp, "d_mlp");
    positive(c.d_vocab, "d_vocab");
    SS_CHECK_INPUT(c.n_heads % c.n_kv_heads == 0, origin, "n_heads (", c.n_heads,
                   ") is not a multiple of n_kv_heads (", c.n_kv_heads, ")");
    SS_CHECK_INPUT(c.d_head % 2 == 0, origin, "d_head must be even for RoPE, found ", c.d_head);
    SS_CHECK_INPUT(c.norm_eps > 0 && c.rope_theta > 0, origin,
                   "norm eps and rope theta must be positive");
    SS_CHECK_INPUT(c.window >= 0, origin, "sliding window must be >= 0, found ", c.window);
}

namespace {

int64_t get_int(const nlohmann::json& j, const char* key, const std::string& origin) {
    SS_CHECK_INPUT(j.contains(key), origin, "missing key '", key, "'");
    SS_CHECK_INPUT(j[key].is_number_integer(), origin, "key '", key, "' is not an integer");
    return j[key].get<int64_t>();
}

int64_t get_int_or(const nlohmann::json& j, const char* key, int64_t fallback,
                   const std::string& origin) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    return get_int(j, key, origin);
}

double get_float_or(const nlohmann::json& j, const char* key, double fallback,
                    const std::string& origin) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    SS_CHECK_INPUT(j[key].is_number(), origin, "key '", key, "' is not a number");
    return j[key].get<double>();
}

}  // namespace

ModelConfig config_from_hf_json(const nlohmann::json& j, const std::string& origin) {
    SS_CHECK_INPUT(j.is_object(), origin, "not a JSON object");
    SS_CHECK_INPUT(j.contains("model_type") && j["model_type"].is_string(), origin,
                   "missing string key 'model_type'");
    const ArchitectureInfo& arch = find_by_hf_model_type(j["model_type"].get<std::string>(), origin);
    ModelConfig c;
    c.architecture = arch.name;
    c.d_model = get_int(j, "hidden_size", origin);
    c.n_layers = get_int(j, "num_hidden_layers", origin);
    c.n_heads = get_int(j, "num_attention_heads", origin);
    c.n_kv_heads = get_int_or(j, "num_key_value_heads", c.n_heads, origin);
    c.d_head = get_int_or(j, "head_dim", c.n_heads > 0 ? c.d_model / c.n_heads : 0, origin);
    c.d_mlp = get_int(j, "intermediate_size", origin);
    c.d_vocab = get_int(j, "vocab_size", origin);
    c.n_ctx = get_int_or(j, "max_position_embeddings", 0, origin);
    c.rope_theta = get_float_or(j, "rope_theta", 10000.0, origin);
    c.norm_eps = get_float_or(j, "rms_norm_eps", 1e-6, origin);
    c.bos_token_id = get_int_or(j, "bos_token_id", -1, origin);
    c.eos_token_id = j.contains("eos_token_id") && j["eos_token_id"].is_array()
                         ? (j["eos_token_id"].empty() ? -1 : j["eos_token_id"][0].get<int64_t>())
                         : get_int_or(j, "eos_token_id", -1, origin);
    // Gemma ties embeddings by default; the others do not (transformers' config defaults).
    const bool tie_default = arch.embed_scale;
    c.tied_embeddings = j.contains("tie_word_embeddings") && j["tie_word_embeddings"].is_boolean()
                            ? j["tie_word_embeddings"].get<bool>()
                            : tie_default;
    c.qkv_bias = arch.qkv_bias;
    c.norm_add_one = arch.norm_add_one_hf;
    c.embed_scale = arch.embed_scale;
    c.act = arch.default_act;
    if (arch.default_act == Activation::Silu) {
        const std::string act = j.value("hidden_act", std::string("silu"));
        if (act != "silu") throw UnsupportedError(origin, "hidden_act '" + act + "'");
    }
    if (arch.has_sliding_window) {
        const bool use = j.value("use_sliding_window", std::string(arch.name) != "qwen2");
        c.window = use ? get_int_or(j, "sliding_window", 0, origin) : 0;
    }
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
        throw UnsupportedError(origin, "rope_scaling (only plain RoPE is implemented)");
    if (j.value("attention_bias", false) && !arch.qkv_bias)
        throw UnsupportedError(origin, "attention_bias=true (output projection bias)");
    if (j.value("mlp_bias", false)) throw UnsupportedError(origin, "mlp_bias=true");
    validate_config(c, origin);
    return c;
}

ModelConfig config_from_hf_dir(const std::filesystem::path& dir) {
    const auto file = dir / "config.json";
    const std::string text = read_file(file);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw InputError(file.string(), std::string("invalid JSON: ") + e.what());
    }
    return config_from_hf_json(j, file.string());
}

ModelConfig config_from_llama2c(const io::Llama2cHeader& h) {
    ModelConfig c;
    c.architecture = llama2c_architecture().name;
    c.d_model = h.dim;
    c.d_mlp = h.hidden_dim;
    c.n_layers = h.n_layers;
    c.n_heads = h.n_heads;
    c.n_kv_heads = h.n_kv_heads;
    c.d_head = h.n_heads > 0 ? h.dim / h.n_heads : 0;
    c.d_vocab = h.vocab_size < 0 ? -static_cast<int64_t>(h.vocab_size) : h.vocab_size;
    c.n_ctx = h.seq_len;
    c.rope_theta = 10000.0;  // run.c hard-codes 10000 and eps 1e-5
    c.norm_eps = 1e-5;
    c.tied_embeddings = h.shared_classifier;
    c.bos_token_id = 1;  // llama2.c: BOS 1, EOS 2 (run.c stops on BOS)
    c.eos_token_id = 2;
    return c;
}

}  // namespace sinkscope::model
