// The architecture registry table and the tensor-name tables it points to (STYLE.md: every
// architecture and tensor-role name lives here and nowhere else).
#include "sinkscope/model/registry.hpp"

#include <string>

#include "sinkscope/core/error.hpp"

namespace sinkscope::model {

namespace {

// Order of TensorRole: TokenEmbed, OutputNorm, Output, AttnNorm, AttnQ, AttnK, AttnV, AttnO,
// AttnQBias, AttnKBias, AttnVBias, FfnNorm, FfnGate, FfnUp, FfnDown.
const TensorNames kHfLlamaNames{{
    "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
    "model.layers.{L}.input_layernorm.weight", "model.layers.{L}.self_attn.q_proj.weight",
    "model.layers.{L}.self_attn.k_proj.weight", "model.layers.{L}.self_attn.v_proj.weight",
    "model.layers.{L}.self_attn.o_proj.weight", "model.layers.{L}.self_attn.q_proj.bias",
    "model.layers.{L}.self_attn.k_proj.bias", "model.layers.{L}.self_attn.v_proj.bias",
    "model.layers.{L}.post_attention_layernorm.weight", "model.layers.{L}.mlp.gate_proj.weight",
    "model.layers.{L}.mlp.up_proj.weight", "model.layers.{L}.mlp.down_proj.weight",
}};

// llama.cpp names (src/llama-arch.cpp LLM_TENSOR_NAMES).
const TensorNames kGgufLlamaNames{{
    "token_embd.weight", "output_norm.weight", "output.weight",
    "blk.{L}.attn_norm.weight", "blk.{L}.attn_q.weight", "blk.{L}.attn_k.weight",
    "blk.{L}.attn_v.weight", "blk.{L}.attn_output.weight", "blk.{L}.attn_q.bias",
    "blk.{L}.attn_k.bias", "blk.{L}.attn_v.bias", "blk.{L}.ffn_norm.weight",
    "blk.{L}.ffn_gate.weight", "blk.{L}.ffn_up.weight", "blk.{L}.ffn_down.weight",
}};

// Names given by io::open_llama2c to the run.c checkpoint layout.
const TensorNames kLlama2cNames{{
    "token_embedding_table", "rms_final_weight", "wcls",
    "rms_att_weight.{L}", "wq.{L}", "wk.{L}", "wv.{L}", "wo.{L}", nullptr, nullptr, nullptr,
    "rms_ffn_weight.{L}", "w1.{L}", "w3.{L}", "w2.{L}",
}};

const std::vector<ArchitectureInfo>& table() {
    // name, HF model_type, GGUF arch, builder, names (HF, GGUF, llama2.c), GGUF Q/K interleaved,
    // activation, qkv bias, HF norm (1 + w), embedding scale, sliding window.
    static const std::vector<ArchitectureInfo> rows{
        {"llama", {"llama"}, "llama", build_llama_family, &kHfLlamaNames, &kGgufLlamaNames,
         &kLlama2cNames, true, Activation::Silu, false, false, false, false},
        {"mistral", {"mistral"}, nullptr, build_llama_family, &kHfLlamaNames, &kGgufLlamaNames,
         nullptr, true, Activation::Silu, false, false, false, true},
        {"qwen2", {"qwen2"}, "qwen2", build_llama_family, &kHfLlamaNames, &kGgufLlamaNames,
         nullptr, false, Activation::Silu, true, false, false, true},
        {"gemma", {"gemma"}, "gemma", build_llama_family, &kHfLlamaNames, &kGgufLlamaNames,
         nullptr, false, Activation::GeluTanh, false, true, true, false},
    };
    return rows;
}

}  // namespace

const std::vector<ArchitectureInfo>& architectures() { return table(); }

const ArchitectureInfo& find_architecture(const std::string& name) {
    for (const auto& a : table())
        if (name == a.name) return a;
    throw UnsupportedError("architecture '" + name + "' is not in the registry");
}

const ArchitectureInfo& find_by_hf_model_type(const std::string& model_type,
                                              const std::string& origin) {
    for (const auto& a : table())
        for (const auto& t : a.hf_model_types)
            if (t == model_type) return a;
    throw UnsupportedError(origin, "model_type '" + model_type + "'");
}

const ArchitectureInfo& find_by_gguf_arch(const std::string& arch, const std::string& origin) {
    for (const auto& a : table())
        if (a.gguf_arch && arch == a.gguf_arch) return a;
    throw UnsupportedError(origin, "GGUF architecture '" + arch + "'");
}

const ArchitectureInfo& llama2c_architecture() { return table().front(); }

std::string tensor_name(const ArchitectureInfo& arch, WeightFormat format, TensorRole role,
                        int64_t layer) {
    const TensorNames* names = format == WeightFormat::HuggingFace ? arch.hf_names
                               : format == WeightFormat::Gguf      ? arch.gguf_names
                                                                   : arch.llama2c_names;
    if (!names) throw UnsupportedError(std::string("architecture '") + arch.name +
                                       "' has no " + weight_format_name(format) + " layout");
    const char* pattern = names->by_role[static_cast<size_t>(role)];
    if (!pattern) return {};
    std::string s = pattern;
    auto at = s.find("{L}");
    if (at != std::string::npos) s.replace(at, 3, std::to_string(layer));
    return s;
}

}  // namespace sinkscope::model
