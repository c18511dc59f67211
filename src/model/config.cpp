// ModelConfig from Hugging Face config.json and llama2.c headers (GGUF: config_gguf.cpp).
#include "sinkscope/model/config.hpp"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "config_json.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/limits.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/model/registry.hpp"

namespace sinkscope::model {

const char* activation_name(Activation a) {
    switch (a) {
        case Activation::Silu:
            return "silu";
        case Activation::GeluTanh:
            return "gelu_pytorch_tanh";
        case Activation::Gelu:
            return "gelu";
    }
    return "?";
}

Activation parse_hf_activation(const std::string& act, const std::string& origin) {
    if (act == "silu" || act == "swish") return Activation::Silu;
    if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast")
        return Activation::GeluTanh;
    if (act == "gelu") return Activation::Gelu;
    throw UnsupportedError(origin, "hidden_act " + quote(act));
}

const char* attention_function_name(AttentionFunction f) {
    switch (f) {
        case AttentionFunction::Softmax:
            return "softmax";
        case AttentionFunction::SoftmaxOne:
            return "softmax_one";
        case AttentionFunction::Sigmoid:
            return "sigmoid";
    }
    return "?";
}

std::optional<AttentionFunction> attention_function_from_name(const std::string& name) {
    for (AttentionFunction f :
         {AttentionFunction::Softmax, AttentionFunction::SoftmaxOne, AttentionFunction::Sigmoid})
        if (name == attention_function_name(f)) return f;
    return std::nullopt;
}

const char* weight_format_name(WeightFormat f) {
    switch (f) {
        case WeightFormat::HuggingFace:
            return "huggingface";
        case WeightFormat::Gguf:
            return "gguf";
        case WeightFormat::Llama2c:
            return "llama2c";
    }
    return "?";
}

int64_t ModelConfig::n_params() const {
    const int64_t attn = d_model * d_head * (2 * n_heads + 2 * n_kv_heads) +
                         (qkv_bias ? d_head * (n_heads + 2 * n_kv_heads) : 0);
    const int64_t mlp = 3 * d_model * d_mlp;
    const int64_t slot = kv_slot ? 2 * n_kv_heads * d_head : 0;
    const int64_t per_layer = attn + mlp + 2 * d_model + slot;
    return n_layers * per_layer + d_model + d_vocab * d_model * (tied_embeddings ? 1 : 2);
}

int64_t ModelConfig::context_limit() const {
    // Dynamic NTK scaling grows the RoPE base with the input (base * (factor * T / n_ctx -
    // (factor - 1))^(d / (d - 2)) once T > n_ctx, rope.cpp): it is made to run past n_ctx. Every
    // other scaling type states its extended context in max_position_embeddings.
    if (positions == PositionKind::Rotary && rope_scaling.kind == RopeScalingKind::Dynamic)
        return 0;
    return n_ctx;
}

int64_t ModelConfig::layer_window(int64_t layer) const {
    if (window <= 0) return 0;
    if (window_layers.empty()) return window;
    return std::binary_search(window_layers.begin(), window_layers.end(), layer) ? window : 0;
}

double ModelConfig::score_scale() const {
    return attn_scale > 0 ? attn_scale : 1.0 / std::sqrt(static_cast<double>(d_head));
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
    check_limit(origin, Limit::Layers, "n_layers", uint64_t(c.n_layers));
    SS_CHECK_INPUT(c.n_heads % c.n_kv_heads == 0, origin, "n_heads (", c.n_heads,
                   ") is not a multiple of n_kv_heads (", c.n_kv_heads, ")");
    if (c.positions == PositionKind::Rotary) {
        const int64_t rot = c.rotary_dim > 0 ? c.rotary_dim : c.d_head;
        SS_CHECK_INPUT(rot % 2 == 0 && rot <= c.d_head, origin,
                       "rotary dims must be even and <= d_head, found ", rot);
        SS_CHECK_INPUT(c.rope_theta > 0, origin, "rope theta must be positive");
        if (c.rope_scaling.kind == RopeScalingKind::LongRope)
            SS_CHECK_INPUT(static_cast<int64_t>(c.rope_scaling.short_factor.size()) == rot / 2,
                           origin, "rope_scaling longrope needs ", rot / 2,
                           " factors (rotary dims / 2), found ",
                           c.rope_scaling.short_factor.size());
    }
    SS_CHECK_INPUT(c.norm_eps > 0, origin, "norm eps must be positive");
    SS_CHECK_INPUT(c.window >= 0, origin, "sliding window must be >= 0, found ", c.window);
    for (size_t i = 0; i < c.window_layers.size(); ++i)
        SS_CHECK_INPUT(c.window_layers[i] >= 0 && c.window_layers[i] < c.n_layers &&
                           (i == 0 || c.window_layers[i] > c.window_layers[i - 1]),
                       origin, "sliding-window layers must be ascending layer indices");
    SS_CHECK_INPUT(c.attn_scale >= 0 && c.attn_softcap >= 0 && c.final_softcap >= 0, origin,
                   "attention scale and soft-caps must be >= 0");
    // The other attention functions run in the causal decoders' attention core only.
    SS_CHECK_INPUT(c.attention == AttentionFunction::Softmax || c.causal, origin, "attention ",
                   quote(attention_function_name(c.attention)),
                   ": only causal decoders take another attention function than softmax");
    if (c.kv_slot) {
        const ForwardFamily f = find_architecture(c.architecture).forward;
        SS_CHECK_INPUT(f == ForwardFamily::Llama || f == ForwardFamily::Gpt2, origin, "key '",
                       kHfKvSlotKey,
                       "': a key/value slot runs in the llama and gpt2 families only, not ",
                       quote(c.architecture));
        SS_CHECK_INPUT(c.attention == AttentionFunction::Softmax, origin, "key '", kHfKvSlotKey,
                       "' needs softmax attention, not ",
                       quote(attention_function_name(c.attention)));
    }
}

namespace {

enum class JsonKind { String, Bool, Object, StringArray, IdOrIds };

// The config.json keys the family readers take as they come (with a default when absent), and
// the JSON type each must have. Checked here, before any reader runs, so a wrong type is one
// line naming the file and the key instead of the JSON library's text.
struct TypedKey {
    const char* key;
    JsonKind kind;
};
constexpr TypedKey kTypedKeys[] = {
    {"model_type", JsonKind::String},
    {"hidden_act", JsonKind::String},
    {"hidden_activation", JsonKind::String},
    {"activation_function", JsonKind::String},
    {"position_embedding_type", JsonKind::String},
    {"attention_bias", JsonKind::Bool},
    {"mlp_bias", JsonKind::Bool},
    {"use_sliding_window", JsonKind::Bool},
    {"rope_scaling", JsonKind::Object},
    {"id2label", JsonKind::Object},
    {"layer_types", JsonKind::StringArray},
    {"bos_token_id", JsonKind::IdOrIds},
    {"eos_token_id", JsonKind::IdOrIds},
    {kHfAttentionKey, JsonKind::String},
    {kHfKvSlotKey, JsonKind::Bool},
};

void check_key_types(const nlohmann::json& j, const std::string& origin) {
    for (const TypedKey& t : kTypedKeys) {
        const auto it = j.find(t.key);
        if (it == j.end() || it->is_null()) continue;
        const nlohmann::json& v = *it;
        bool ok = false;
        const char* want = "";
        switch (t.kind) {
            case JsonKind::String:
                ok = v.is_string(), want = "a string";
                break;
            case JsonKind::Bool:
                ok = v.is_boolean(), want = "true or false";
                break;
            case JsonKind::Object:
                ok = v.is_object(), want = "an object";
                break;
            case JsonKind::StringArray:
                ok = v.is_array() &&
                     std::all_of(v.begin(), v.end(), [](const auto& e) { return e.is_string(); });
                want = "a list of strings";
                break;
            case JsonKind::IdOrIds:
                ok = v.is_number_integer() ||
                     (v.is_array() && std::all_of(v.begin(), v.end(), [](const auto& e) {
                          return e.is_number_integer();
                      }));
                want = "an integer or a list of integers";
                break;
        }
        SS_CHECK_INPUT(ok, origin, "key '", t.key, "' must be ", want, ", found ",
                       io::json_type_name(v), " ", io::brief(v));
    }
}

}  // namespace

ModelConfig config_from_hf_json(const nlohmann::json& j, const std::string& origin) {
    SS_CHECK_INPUT(j.is_object(), origin, "not a JSON object");
    SS_CHECK_INPUT(j.contains("model_type") && j["model_type"].is_string(), origin,
                   "missing string key 'model_type'");
    check_key_types(j, origin);
    const ArchitectureInfo& arch =
        find_by_hf_model_type(j["model_type"].get<std::string>(), origin);
    ModelConfig c;
    c.architecture = arch.name;
    try {
        read_hf_common_keys(j, origin, arch, c);  // the keys every family has, then its own
        arch.read_hf_config(j, origin, c);
        // sinkscope's own key (model/config.hpp), any family; validate_config refuses it on
        // the encoders.
        if (j.contains(kHfAttentionKey) && !j[kHfAttentionKey].is_null()) {
            const std::string name = j[kHfAttentionKey].get<std::string>();
            const std::optional<AttentionFunction> f = attention_function_from_name(name);
            SS_CHECK_INPUT(f.has_value(), origin, "key '", kHfAttentionKey, "' is ", quote(name),
                           ", not one of ", kAttentionFunctionNames);
            c.attention = *f;
        }
        if (j.contains(kHfKvSlotKey) && !j[kHfKvSlotKey].is_null())
            c.kv_slot = j[kHfKvSlotKey].get<bool>();
    } catch (const nlohmann::json::exception& e) {
        // A nested value of a type no check above covers: still one line naming the file.
        throw InputError(origin, "a key has an unexpected JSON type: " + printable(e.what()));
    }
    validate_config(c, origin);
    return c;
}

int64_t json_int(const nlohmann::json& j, const char* key, const std::string& origin) {
    SS_CHECK_INPUT(j.contains(key) && !j[key].is_null(), origin, "missing key '", key, "'");
    return io::json_int_or(j, key, 0, origin);
}

int64_t json_int_or(const nlohmann::json& j, const char* key, int64_t fallback,
                    const std::string& origin) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    return json_int(j, key, origin);
}

double json_float_or(const nlohmann::json& j, const char* key, double fallback,
                     const std::string& origin) {
    return io::json_number_or(j, key, fallback, origin);
}

bool json_bool_or(const nlohmann::json& j, const char* key, bool fallback,
                  const std::string& origin) {
    return io::json_bool_or(j, key, fallback, origin);
}

int64_t json_token_id_or(const nlohmann::json& j, const char* key, const std::string& origin) {
    if (j.contains(key) && j[key].is_array())  // several EOS ids: the first
        return j[key].empty() ? -1 : j[key][0].get<int64_t>();
    return json_int_or(j, key, -1, origin);
}

ModelConfig config_from_hf_dir(const std::filesystem::path& dir) {
    const auto file = dir / "config.json";
    return config_from_hf_json(io::read_json_file(file), file.string());
}

ModelConfig config_from_llama2c(const io::Llama2cHeader& h) {
    ModelConfig c;  // attention stays softmax: the header has no field for another function
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
