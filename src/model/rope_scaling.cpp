// RoPE scaling, as the checkpoint states it: the config readers (config.json rope_scaling, GGUF
// rope.scaling.* and rope_freqs.weight), following transformers' modeling_rope_utils.py
// (_compute_{linear_scaling,dynamic_ntk,llama3,yarn,longrope}_parameters) and llama.cpp
// (rope_freqs: theta_i = p * base^(-2i/n_rot) / rope_freqs[i]). Torch-free; the scaled inverse
// frequencies are computed in rope.cpp.
#include "rope_scaling.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "config_json.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/io/gguf.hpp"

namespace sinkscope::model {

namespace {

constexpr uint32_t kGgmlTypeF32 = 0;

// transformers' get_mscale: the YaRN attention temperature for a context scale factor.
double yarn_mscale(double scale, double mscale = 1.0) {
    if (scale <= 1.0) return 1.0;
    return 0.1 * mscale * std::log(scale) + 1.0;
}

double required_float(const nlohmann::json& s, const char* key, const std::string& origin) {
    SS_CHECK_INPUT(s.contains(key) && !s[key].is_null(), origin, "rope_scaling lacks '", key, "'");
    return json_float_or(s, key, 0.0, origin);
}

std::vector<float> required_factor_list(const nlohmann::json& s, const char* key,
                                        const std::string& origin) {
    SS_CHECK_INPUT(s.contains(key) && s[key].is_array() && !s[key].empty(), origin,
                   "rope_scaling lacks a list '", key, "'");
    std::vector<float> out;
    for (const auto& v : s[key]) {
        SS_CHECK_INPUT(v.is_number() && v.get<double>() > 0, origin, "rope_scaling '", key,
                       "' must hold positive numbers");
        out.push_back(v.get<float>());
    }
    return out;
}

void print_list(std::ostream& o, const char* name, const std::vector<float>& v) {
    o << name << " [";
    for (size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
    o << "]";
}

// transformers' _compute_longrope_parameters (Phi-3; "su" is its older name): the divisor lists,
// the original context (config.json top-level original_max_position_embeddings, which then also
// sets factor = max_position_embeddings / original; newer configs put it in rope_scaling) and the
// attention factor sqrt(1 + ln(factor) / ln(original)) unless given (1 when factor <= 1).
RopeScaling read_longrope(const nlohmann::json& j, const nlohmann::json& s, int64_t n_ctx,
                          const std::string& origin) {
    RopeScaling r;
    r.kind = RopeScalingKind::LongRope;
    r.short_factor = required_factor_list(s, "short_factor", origin);
    r.long_factor = required_factor_list(s, "long_factor", origin);
    SS_CHECK_INPUT(r.short_factor.size() == r.long_factor.size(), origin,
                   "rope_scaling short_factor and long_factor differ in length");
    const int64_t top = json_int_or(j, "original_max_position_embeddings", 0, origin);
    const int64_t inner = json_int_or(s, "original_max_position_embeddings", 0, origin);
    if (top > 0 || inner > 0) {
        r.original_n_ctx = top > 0 ? top : inner;
        SS_CHECK_INPUT(n_ctx > 0, origin, "rope_scaling longrope needs max_position_embeddings");
        const double ratio = static_cast<double>(n_ctx) / static_cast<double>(r.original_n_ctx);
        r.factor = top > 0 ? ratio : json_float_or(s, "factor", ratio, origin);
    } else {
        r.original_n_ctx = n_ctx;
        SS_CHECK_INPUT(n_ctx > 0, origin, "rope_scaling longrope needs max_position_embeddings");
        r.factor = required_float(s, "factor", origin);
    }
    SS_CHECK_INPUT(r.original_n_ctx > 0 && r.factor > 0, origin,
                   "rope_scaling longrope: original context and factor must be positive");
    if (s.contains("attention_factor") && !s["attention_factor"].is_null())
        r.attention_factor = json_float_or(s, "attention_factor", 1.0, origin);
    else
        r.attention_factor =
            r.factor <= 1.0 ? 1.0
                            : std::sqrt(1.0 + std::log(r.factor) /
                                                  std::log(static_cast<double>(r.original_n_ctx)));
    return r;
}

}  // namespace

const char* rope_scaling_kind_name(RopeScalingKind k) {
    switch (k) {
        case RopeScalingKind::None:
            return "none";
        case RopeScalingKind::Linear:
            return "linear";
        case RopeScalingKind::Dynamic:
            return "dynamic";
        case RopeScalingKind::Llama3:
            return "llama3";
        case RopeScalingKind::Yarn:
            return "yarn";
        case RopeScalingKind::LongRope:
            return "longrope";
    }
    return "?";
}

std::string describe_rope_scaling(const RopeScaling& s) {
    std::ostringstream o;
    if (s.kind != RopeScalingKind::None || s.freq_factors.empty())
        o << rope_scaling_kind_name(s.kind);
    switch (s.kind) {
        case RopeScalingKind::None:
            break;
        case RopeScalingKind::Linear:
        case RopeScalingKind::Dynamic:
            o << " (factor " << s.factor << ")";
            break;
        case RopeScalingKind::Llama3:
            o << " (factor " << s.factor << ", low_freq_factor " << s.low_freq_factor
              << ", high_freq_factor " << s.high_freq_factor << ", original context "
              << s.original_n_ctx << ")";
            break;
        case RopeScalingKind::Yarn:
            o << " (factor " << s.factor << ", original context " << s.original_n_ctx
              << ", beta_fast " << s.beta_fast << ", beta_slow " << s.beta_slow
              << ", attention factor " << s.attention_factor << ")";
            break;
        case RopeScalingKind::LongRope:
            o << " (factor " << s.factor << ", original context " << s.original_n_ctx
              << ", attention factor " << s.attention_factor << ", ";
            print_list(o, "short_factor", s.short_factor);
            o << ", ";
            print_list(o, "long_factor", s.long_factor);
            o << "; long factors above " << s.original_n_ctx << " tokens)";
            break;
    }
    if (!s.freq_factors.empty()) {
        o << (s.kind == RopeScalingKind::None ? "" : ", ") << "rope_freqs [";
        for (size_t i = 0; i < s.freq_factors.size(); ++i)
            o << (i ? ", " : "") << s.freq_factors[i];
        o << "]";
    }
    return o.str();
}

RopeScaling read_hf_rope_scaling(const nlohmann::json& j, int64_t n_ctx,
                                 const std::string& origin) {
    RopeScaling r;
    if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return r;
    const nlohmann::json& s = j["rope_scaling"];
    SS_CHECK_INPUT(s.is_object(), origin, "rope_scaling is not a JSON object");
    // transformers reads rope_type, falling back to the older key "type".
    const char* type_key = s.contains("rope_type") ? "rope_type" : "type";
    SS_CHECK_INPUT(s.contains(type_key) && s[type_key].is_string(), origin,
                   "rope_scaling lacks a string 'rope_type'");
    const std::string type = s[type_key].get<std::string>();
    if (type == "default") return r;
    if (type == "longrope" || type == "su") return read_longrope(j, s, n_ctx, origin);
    if (type == "linear") {
        r.kind = RopeScalingKind::Linear;
    } else if (type == "dynamic") {
        r.kind = RopeScalingKind::Dynamic;
        SS_CHECK_INPUT(n_ctx > 0, origin, "rope_scaling dynamic needs max_position_embeddings");
    } else if (type == "llama3") {
        r.kind = RopeScalingKind::Llama3;
    } else if (type == "yarn") {
        r.kind = RopeScalingKind::Yarn;
    } else {
        throw UnsupportedError(origin, "rope_scaling type '" + type + "'");
    }
    r.factor = required_float(s, "factor", origin);
    SS_CHECK_INPUT(r.factor > 0, origin, "rope_scaling factor must be positive, found ", r.factor);
    if (r.kind == RopeScalingKind::Llama3) {
        r.low_freq_factor = required_float(s, "low_freq_factor", origin);
        r.high_freq_factor = required_float(s, "high_freq_factor", origin);
        SS_CHECK_INPUT(s.contains("original_max_position_embeddings"), origin,
                       "rope_scaling lacks 'original_max_position_embeddings'");
        r.original_n_ctx = json_int(s, "original_max_position_embeddings", origin);
        SS_CHECK_INPUT(r.high_freq_factor > r.low_freq_factor, origin,
                       "rope_scaling high_freq_factor must exceed low_freq_factor");
        SS_CHECK_INPUT(r.original_n_ctx > 0, origin,
                       "rope_scaling original_max_position_embeddings must be positive");
    }
    if (r.kind == RopeScalingKind::Yarn) {
        // transformers (since the DeepSeek-V3 change): with original_max_position_embeddings the
        // correction range uses it and the factor is max_position_embeddings / original.
        r.original_n_ctx = json_int_or(s, "original_max_position_embeddings", 0, origin);
        if (r.original_n_ctx > 0) {
            SS_CHECK_INPUT(n_ctx > 0, origin, "rope_scaling yarn needs max_position_embeddings");
            r.factor = static_cast<double>(n_ctx) / static_cast<double>(r.original_n_ctx);
        } else {
            r.original_n_ctx = n_ctx;
            SS_CHECK_INPUT(n_ctx > 0, origin, "rope_scaling yarn needs max_position_embeddings");
        }
        // `x or default` in transformers: absent, null and 0 take the default.
        r.beta_fast = json_float_or(s, "beta_fast", 0.0, origin);
        if (r.beta_fast == 0.0) r.beta_fast = 32.0;
        r.beta_slow = json_float_or(s, "beta_slow", 0.0, origin);
        if (r.beta_slow == 0.0) r.beta_slow = 1.0;
        r.truncate = json_bool_or(s, "truncate", true, origin);
        const double mscale = json_float_or(s, "mscale", 0.0, origin);
        const double mscale_all_dim = json_float_or(s, "mscale_all_dim", 0.0, origin);
        if (s.contains("attention_factor") && !s["attention_factor"].is_null())
            r.attention_factor = json_float_or(s, "attention_factor", 1.0, origin);
        else if (mscale != 0.0 && mscale_all_dim != 0.0)
            r.attention_factor =
                yarn_mscale(r.factor, mscale) / yarn_mscale(r.factor, mscale_all_dim);
        else
            r.attention_factor = yarn_mscale(r.factor);
    }
    return r;
}

std::vector<float> read_gguf_divisors(const io::GgufFile& f, const std::string& name,
                                      int64_t rot_dim) {
    const std::string origin = f.path().string();
    const io::GgufTensorInfo* t = f.find_tensor(name);
    SS_CHECK_INPUT(t, origin, "tensor ", name, " is missing");
    const int64_t n_pairs = rot_dim / 2;
    SS_CHECK_INPUT(t->type == kGgmlTypeF32, origin, "tensor ", name, ": type ",
                   io::ggml_type_name(t->type), ", expected F32");
    SS_CHECK_INPUT(t->dims.size() == 1 && t->dims[0] == n_pairs, origin, "tensor ", name,
                   ": expected ", n_pairs, " values (rotary dims ", rot_dim, " / 2), found ",
                   t->numel());
    std::vector<float> out(static_cast<size_t>(n_pairs));
    std::memcpy(out.data(), f.tensor_data(*t), sizeof(float) * out.size());
    for (float v : out)
        SS_CHECK_INPUT(std::isfinite(v) && v > 0, origin, "tensor ", name,
                       ": frequency divisors must be finite and positive, found ", v);
    return out;
}

RopeScaling read_gguf_rope_scaling(const io::GgufFile& f, const std::string& p,
                                   const std::string& freq_name, int64_t rot_dim, int64_t n_ctx) {
    const std::string origin = f.path().string();
    RopeScaling r;
    const std::string type_key = p + "rope.scaling.type";
    const std::string type = f.has(type_key) ? f.get_string(type_key) : "";
    const double factor =
        f.get_float_or(p + "rope.scaling.factor", f.get_float_or(p + "rope.scale_linear", 0.0));
    if (type == "linear" || (type.empty() && factor != 0.0 && factor != 1.0)) {
        // llama.cpp: freq_scale = 1 / factor multiplies every angle.
        r.kind = RopeScalingKind::Linear;
    } else if (type == "yarn") {
        r.kind = RopeScalingKind::Yarn;
        r.original_n_ctx = f.get_int_or(p + "rope.scaling.original_context_length", n_ctx);
        SS_CHECK_INPUT(r.original_n_ctx > 0, origin, "key ", p,
                       "rope.scaling.original_context_length is missing (yarn)");
        // llama.cpp: mscale = attn_factor * (1 + 0.1 ln(1 / freq_scale)), beta 32 / 1.
        r.attention_factor = f.get_float_or(p + "rope.scaling.attn_factor", 1.0);
    } else if (!type.empty() && type != "none") {
        throw UnsupportedError(origin, "key " + type_key + " = '" + type + "' (RoPE scaling type)");
    }
    if (r.kind != RopeScalingKind::None) {
        SS_CHECK_INPUT(factor > 0, origin, "key ", p, "rope.scaling.factor must be positive");
        r.factor = factor;
        if (r.kind == RopeScalingKind::Yarn) r.attention_factor *= yarn_mscale(factor);
    }
    if (f.find_tensor(freq_name)) r.freq_factors = read_gguf_divisors(f, freq_name, rot_dim);
    return r;
}

}  // namespace sinkscope::model
