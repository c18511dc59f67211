// The architecture registry table and the tensor-name tables it points to (STYLE.md: every
// architecture and tensor-role name lives here and nowhere else).
#include "sinkscope/model/registry.hpp"

#include <string>

#include "sinkscope/core/error.hpp"

namespace sinkscope::model {

namespace {

using R = TensorRole;

const TensorNames kHfLlamaNames = make_tensor_names({
    {R::TokenEmbed, "model.embed_tokens.weight"},
    {R::OutputNorm, "model.norm.weight"},
    {R::Output, "lm_head.weight"},
    {R::AttnNorm, "model.layers.{L}.input_layernorm.weight"},
    {R::AttnQ, "model.layers.{L}.self_attn.q_proj.weight"},
    {R::AttnK, "model.layers.{L}.self_attn.k_proj.weight"},
    {R::AttnV, "model.layers.{L}.self_attn.v_proj.weight"},
    {R::AttnO, "model.layers.{L}.self_attn.o_proj.weight"},
    {R::AttnQBias, "model.layers.{L}.self_attn.q_proj.bias"},
    {R::AttnKBias, "model.layers.{L}.self_attn.k_proj.bias"},
    {R::AttnVBias, "model.layers.{L}.self_attn.v_proj.bias"},
    {R::FfnNorm, "model.layers.{L}.post_attention_layernorm.weight"},
    {R::FfnGate, "model.layers.{L}.mlp.gate_proj.weight"},
    {R::FfnUp, "model.layers.{L}.mlp.up_proj.weight"},
    {R::FfnDown, "model.layers.{L}.mlp.down_proj.weight"},
});

// llama.cpp names (src/llama-arch.cpp LLM_TENSOR_NAMES).
const TensorNames kGgufLlamaNames = make_tensor_names({
    {R::TokenEmbed, "token_embd.weight"},
    {R::OutputNorm, "output_norm.weight"},
    {R::Output, "output.weight"},
    {R::AttnNorm, "blk.{L}.attn_norm.weight"},
    {R::AttnQ, "blk.{L}.attn_q.weight"},
    {R::AttnK, "blk.{L}.attn_k.weight"},
    {R::AttnV, "blk.{L}.attn_v.weight"},
    {R::AttnO, "blk.{L}.attn_output.weight"},
    {R::AttnQBias, "blk.{L}.attn_q.bias"},
    {R::AttnKBias, "blk.{L}.attn_k.bias"},
    {R::AttnVBias, "blk.{L}.attn_v.bias"},
    {R::FfnNorm, "blk.{L}.ffn_norm.weight"},
    {R::FfnGate, "blk.{L}.ffn_gate.weight"},
    {R::FfnUp, "blk.{L}.ffn_up.weight"},
    {R::FfnDown, "blk.{L}.ffn_down.weight"},
});

// Names given by io::open_llama2c to the run.c checkpoint layout.
const TensorNames kLlama2cNames = make_tensor_names({
    {R::TokenEmbed, "token_embedding_table"},
    {R::OutputNorm, "rms_final_weight"},
    {R::Output, "wcls"},
    {R::AttnNorm, "rms_att_weight.{L}"},
    {R::AttnQ, "wq.{L}"},
    {R::AttnK, "wk.{L}"},
    {R::AttnV, "wv.{L}"},
    {R::AttnO, "wo.{L}"},
    {R::FfnNorm, "rms_ffn_weight.{L}"},
    {R::FfnGate, "w1.{L}"},
    {R::FfnUp, "w3.{L}"},
    {R::FfnDown, "w2.{L}"},
});

// HF ViTForImageClassification (modeling_vit.py module names).
const TensorNames kHfVitNames = make_tensor_names({
    {R::PatchEmbed, "vit.embeddings.patch_embeddings.projection.weight"},
    {R::PatchEmbedBias, "vit.embeddings.patch_embeddings.projection.bias"},
    {R::ClsToken, "vit.embeddings.cls_token"},
    {R::PosEmbed, "vit.embeddings.position_embeddings"},
    {R::AttnNorm, "vit.encoder.layer.{L}.layernorm_before.weight"},
    {R::AttnNormBias, "vit.encoder.layer.{L}.layernorm_before.bias"},
    {R::AttnQ, "vit.encoder.layer.{L}.attention.attention.query.weight"},
    {R::AttnK, "vit.encoder.layer.{L}.attention.attention.key.weight"},
    {R::AttnV, "vit.encoder.layer.{L}.attention.attention.value.weight"},
    {R::AttnQBias, "vit.encoder.layer.{L}.attention.attention.query.bias"},
    {R::AttnKBias, "vit.encoder.layer.{L}.attention.attention.key.bias"},
    {R::AttnVBias, "vit.encoder.layer.{L}.attention.attention.value.bias"},
    {R::AttnO, "vit.encoder.layer.{L}.attention.output.dense.weight"},
    {R::AttnOBias, "vit.encoder.layer.{L}.attention.output.dense.bias"},
    {R::FfnNorm, "vit.encoder.layer.{L}.layernorm_after.weight"},
    {R::FfnNormBias, "vit.encoder.layer.{L}.layernorm_after.bias"},
    {R::FfnUp, "vit.encoder.layer.{L}.intermediate.dense.weight"},
    {R::FfnUpBias, "vit.encoder.layer.{L}.intermediate.dense.bias"},
    {R::FfnDown, "vit.encoder.layer.{L}.output.dense.weight"},
    {R::FfnDownBias, "vit.encoder.layer.{L}.output.dense.bias"},
    {R::OutputNorm, "vit.layernorm.weight"},
    {R::OutputNormBias, "vit.layernorm.bias"},
    {R::Output, "classifier.weight"},
    {R::OutputBias, "classifier.bias"},
});

const std::vector<ArchitectureInfo>& table() {
    // name, HF model_type, GGUF arch, builder, config.json reader, names (HF, GGUF, llama2.c),
    // GGUF Q/K interleaved, activation, qkv bias, HF norm (1 + w), embedding scale, sliding window.
    static const std::vector<ArchitectureInfo> rows{
        {"llama", {"llama"}, "llama", build_llama_family, read_llama_hf_config,
         &kHfLlamaNames, &kGgufLlamaNames,
         &kLlama2cNames, true, Activation::Silu, false, false, false, false},
        {"mistral", {"mistral"}, nullptr, build_llama_family, read_llama_hf_config,
         &kHfLlamaNames, &kGgufLlamaNames,
         nullptr, true, Activation::Silu, false, false, false, true},
        {"qwen2", {"qwen2"}, "qwen2", build_llama_family, read_llama_hf_config,
         &kHfLlamaNames, &kGgufLlamaNames,
         nullptr, false, Activation::Silu, true, false, false, true},
        {"gemma", {"gemma"}, "gemma", build_llama_family, read_llama_hf_config,
         &kHfLlamaNames, &kGgufLlamaNames,
         nullptr, false, Activation::GeluTanh, false, true, true, false},
        {"vit", {"vit"}, nullptr, build_vit_family, read_vit_hf_config, &kHfVitNames, nullptr,
         nullptr, false, Activation::Gelu, true, false, false, false},
    };
    return rows;
}

}  // namespace

TensorNames make_tensor_names(std::initializer_list<std::pair<TensorRole, const char*>> entries) {
    TensorNames names;
    for (const auto& [role, pattern] : entries) names.by_role[static_cast<size_t>(role)] = pattern;
    return names;
}

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
