// The architecture registry: ONE table of every supported architecture (name, HF model_type
// strings, GGUF arch, family builder, tensor names per role and weight format). Adding an
// architecture = one table row (+ one family file when the computation differs).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sinkscope/model/config.hpp"

namespace sinkscope::io {
class WeightStore;
class GgufFile;
}  // namespace sinkscope::io

namespace sinkscope::model {

class Transformer;
struct RuntimeOptions;

// Tensor roles of every family (a family uses the subset it needs; absent roles map to nullptr).
// Weight and bias of one layer are separate roles. One line per group (not clang-formatted):
// clang-format off
enum class TensorRole {
    // Model ends (decoders: TokenEmbed .. OutputBias; encoders and ViT add the rest).
    TokenEmbed, OutputNorm, Output,
    // Llama-family block.
    AttnNorm, AttnQ, AttnK, AttnV, AttnO, AttnQBias, AttnKBias, AttnVBias,
    FfnNorm, FfnGate, FfnUp, FfnDown,
    // Learned positions, token types, embedding LayerNorm (GPT-2, BERT, RoBERTa, ViT).
    PosEmbed, TypeEmbed, EmbedNorm, EmbedNormBias,
    // LayerNorm biases and linear biases (GPT-2, NeoX, Phi, BERT, ViT).
    OutputNormBias, OutputBias, AttnNormBias, AttnOBias, FfnNormBias, FfnUpBias, FfnDownBias,
    // Fused q/k/v projection (GPT-2 c_attn, NeoX query_key_value).
    AttnQKV, AttnQKVBias,
    // Post-LN encoders: LayerNorm after attention / after the MLP (BERT attention.output.LayerNorm,
    // output.LayerNorm) are AttnNorm / FfnNorm; the MLM head transform is below.
    HeadDense, HeadDenseBias, HeadNorm, HeadNormBias,
    // ViT: patch projection (Conv2d weight [d_model, channels, patch, patch]) and the CLS token.
    PatchEmbed, PatchEmbedBias, ClsToken,
    // GGUF: per-pair RoPE frequency divisors (llama.cpp rope_freqs; read into the config).
    RopeFreqs,
    // Gemma-2 sandwich norms: on the attention output and on the MLP output, before each
    // residual add (FfnNorm is the pre-feedforward norm there).
    AttnPostNorm, FfnPostNorm,
    // Fused MLP input projection [gate; up] (Phi-3 gate_up_proj).
    FfnGateUp,
    // GGUF phi3 longrope divisors (llama.cpp rope_factors_short / _long; read into the config).
    RopeFactorsShort, RopeFactorsLong,
    // The learnable key/value slot (ModelConfig::kv_slot, `train --kv-bias`): k* and v*, each
    // [n_kv_heads * d_head], head-major like the k / v biases.
    AttnSlotK, AttnSlotV,
    Count_,
};
// clang-format on
constexpr int kNumTensorRoles = static_cast<int>(TensorRole::Count_);

// What a role is, whatever the architecture (spec section 8, Fisher: tensors are grouped by the
// component their role belongs to, never by name substrings).
enum class Component {
    Embedding,
    AttentionQ,
    AttentionK,
    AttentionV,
    AttentionO,
    Mlp,
    Norm,
    Output
};
struct RoleInfo {
    const char* name;     // sinkscope's name of the role ("attn_q", "ffn_up_bias", ...)
    Component component;  // Output: the LM / MLM / classifier head (not a tied embedding)
    // Per-head layout of an attention tensor: the axis that holds the heads' d_head blocks (0:
    // rows of q/k/v weights and biases, 1: columns of the output projection), -1: none.
    int head_axis = -1;
    bool kv_heads = false;  // blocks are key/value heads (n_kv_heads), else query heads
};
const RoleInfo& role_info(TensorRole role);
const char* component_name(Component c);  // "embedding", "attention_q", ..., "output"
// Components of the attention sub-block (q, k, v, o).
inline bool is_attention(Component c) {
    return c == Component::AttentionQ || c == Component::AttentionK || c == Component::AttentionV ||
           c == Component::AttentionO;
}

// Tensor names of one naming scheme; "{L}" stands for the layer index. nullptr: role absent.
struct TensorNames {
    std::array<const char*, kNumTensorRoles> by_role{};
};
// Builds a TensorNames from (role, pattern) pairs; every other role is absent.
TensorNames make_tensor_names(std::initializer_list<std::pair<TensorRole, const char*>> entries);

// Weights as read from disk, with what the family needs to interpret them.
struct WeightFootprint;
struct WeightSource {
    const io::WeightStore* store = nullptr;
    WeightFormat format = WeightFormat::HuggingFace;
    std::string origin;  // file or directory, for error messages
    // Non-null: a metadata-only build. Every tensor is checked as a real load checks it (name,
    // shape, dtype, byte count) but no data is read: the model holds tensors without storage
    // (libtorch's meta device) and cannot run; what the load would take is tallied here.
    WeightFootprint* metadata_only = nullptr;
};

// The config.json keys every family has, under the names and with the defaults of its
// transformers configuration class: read once, before the family's own reader
// (config_from_hf_json, read_hf_common_keys). nullptr: the family has no such key or derives the
// value itself.
struct HfKeys {
    const char* d_model = "hidden_size";
    const char* n_layers = "num_hidden_layers";
    const char* n_heads = "num_attention_heads";
    const char* n_kv_heads = nullptr;  // nullptr: as many key/value heads as query heads
    bool d_head_divides = true;        // d_head = d_model / n_heads (checked); false: the family's
    const char* d_mlp = "intermediate_size";
    const char* d_vocab = "vocab_size";
    const char* n_ctx = "max_position_embeddings";
    int64_t n_ctx_default = 0;  // -1: the key is required
    const char* norm_eps = "layer_norm_eps";
    double norm_eps_default = 1e-5;
    const char* act = "hidden_act";  // nullptr: the family's (ArchitectureInfo::default_act)
    const char* act_default = "gelu";
    bool tie_word_embeddings = true;  // read tie_word_embeddings (default tied_by_default)
    bool token_ids = true;            // read bos_token_id and eos_token_id
};
// The keys of the families' configuration classes (config_hf.cpp).
extern const HfKeys kHfLlamaKeys;    // LlamaConfig and its kin (Mistral, Qwen2, Gemma, Phi-3)
extern const HfKeys kHfGpt2Keys;     // GPT2Config: n_embd, n_layer, n_head, n_positions
extern const HfKeys kHfGptNeoxKeys;  // GPTNeoXConfig
extern const HfKeys kHfPhiKeys;      // PhiConfig
extern const HfKeys kHfEncoderKeys;  // BertConfig, RobertaConfig
extern const HfKeys kHfVitKeys;      // ViTConfig (no vocabulary: its labels)
struct ArchitectureInfo;
// Reads the keys `keys` names into c; throws InputError naming `origin`.
void read_hf_common_keys(const nlohmann::json& j, const std::string& origin,
                         const ArchitectureInfo& arch, ModelConfig& c);

// Reads the family's own config.json keys (beyond its HfKeys) into c (c.architecture is already
// set); throws InputError / UnsupportedError naming `origin`. Defined in config_hf.cpp.
using HfConfigReader = void (*)(const nlohmann::json& j, const std::string& origin, ModelConfig& c);

// Reads the family's "<gguf_arch>.*" keys beyond those every GGUF decoder has (norm kind and
// epsilon, positions, rotary dims, residual layout) into c; `p` is "<gguf_arch>.". Throws
// InputError naming the file and the key when a key the family needs is missing.
// Defined in config_gguf.cpp.
using GgufConfigReader = void (*)(const io::GgufFile& f, const std::string& p, ModelConfig& c);

// The forward implementation that runs an architecture (one file each: src/model/<family>.cpp).
// A name rather than a function pointer, so that the registry and the config readers build
// without libtorch (library sinkscope_model_config); build_family() in src/model/model.cpp maps
// it to the family's builder.
enum class ForwardFamily { None, Llama, Gemma2, Phi3, Gpt2, GptNeox, Phi, Bert, Roberta, Vit };

// One registry row. Rows are written with designated initializers; a field left out takes the
// default below, so a row names only what its architecture has.
struct ArchitectureInfo {
    const char* name = nullptr;               // sinkscope's name (ModelConfig::architecture)
    std::vector<std::string> hf_model_types;  // config.json "model_type" values
    const char* gguf_arch = nullptr;          // general.architecture (nullptr: not from GGUF)
    ForwardFamily forward = ForwardFamily::None;
    HfConfigReader read_hf_config = nullptr;
    const HfKeys* hf_keys = nullptr;  // the config.json keys every family has, by its names
    GgufConfigReader read_gguf_config = nullptr;  // set with gguf_arch
    const TensorNames* hf_names = nullptr;
    const TensorNames* gguf_names = nullptr;     // nullptr: no GGUF layout
    const TensorNames* llama2c_names = nullptr;  // nullptr: no llama2.c export
    // llama.cpp's converter permutes Q/K rows of this architecture for interleaved RoPE
    // (convert_hf_to_gguf.py LlamaModel.permute); the loader undoes it (detail::WeightLoader).
    bool gguf_qk_interleaved = false;
    // HF stores the projection weights [in, out] (GPT-2's Conv1D); llama.cpp's converter writes
    // them [out, in] like every linear (detail::WeightLoader::host_linear undoes the difference).
    bool hf_conv1d = false;
    // HF's fused q/k/v rows are grouped per head, [head][q|k|v][d_head] (GPT-NeoX
    // query_key_value); llama.cpp's converter re-orders them to [all q; all k; all v]
    // (detail::WeightLoader::host_qkv returns that order from every format).
    bool hf_qkv_per_head = false;
    // HF-config facts that are properties of the architecture rather than of config.json.
    Activation default_act = Activation::Gelu;
    bool qkv_bias = false;
    bool norm_add_one_hf = false;  // RMSNorm (1 + w) in HF weights; GGUF stores 1 + w already
    bool embed_scale = false;      // embeddings scaled by sqrt(d_model)
    // tie_word_embeddings when config.json does not say (transformers' config default).
    bool tied_by_default = false;
    // The architecture may use a sliding attention window (config.json "sliding_window", GGUF
    // attention.sliding_window) ...
    bool has_sliding_window = false;
    // ... and uses it when config.json has no "use_sliding_window" (Qwen2's default is false).
    bool sliding_window_by_default = false;
};

const std::vector<ArchitectureInfo>& architectures();
// Lookups throw UnsupportedError naming `origin` and the unknown name.
const ArchitectureInfo& find_architecture(const std::string& name);
const ArchitectureInfo& find_by_hf_model_type(const std::string& model_type,
                                              const std::string& origin);
const ArchitectureInfo& find_by_gguf_arch(const std::string& arch, const std::string& origin);
// The llama2.c checkpoint format is one architecture (llama).
const ArchitectureInfo& llama2c_architecture();

// Tensor name for a role in a format ("" when the role is absent in that format).
std::string tensor_name(const ArchitectureInfo& arch, WeightFormat format, TensorRole role,
                        int64_t layer = -1);

// GGUF metadata readers per family (src/model/config_gguf.cpp).
void read_llama_gguf_config(const io::GgufFile& f, const std::string& p, ModelConfig& c);
void read_gpt2_gguf_config(const io::GgufFile& f, const std::string& p, ModelConfig& c);
void read_gpt_neox_gguf_config(const io::GgufFile& f, const std::string& p, ModelConfig& c);
void read_phi_gguf_config(const io::GgufFile& f, const std::string& p, ModelConfig& c);
void read_bert_gguf_config(const io::GgufFile& f, const std::string& p, ModelConfig& c);

// Family builders (one file each: src/model/<family>.cpp; libtorch) and config.json readers
// (src/model/config_hf.cpp; torch-free).
std::unique_ptr<Transformer> build_llama_family(const ModelConfig&, const WeightSource&,
                                                const RuntimeOptions&);
void read_llama_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c);
std::unique_ptr<Transformer> build_gpt2_family(const ModelConfig&, const WeightSource&,
                                               const RuntimeOptions&);
void read_gpt2_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c);
std::unique_ptr<Transformer> build_gpt_neox_family(const ModelConfig&, const WeightSource&,
                                                   const RuntimeOptions&);
void read_gpt_neox_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c);
std::unique_ptr<Transformer> build_phi_family(const ModelConfig&, const WeightSource&,
                                              const RuntimeOptions&);
void read_phi_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c);
// BERT and RoBERTa / XLM-R (src/model/bert.cpp): one family, two variants.
std::unique_ptr<Transformer> build_bert_family(const ModelConfig&, const WeightSource&,
                                               const RuntimeOptions&);
std::unique_ptr<Transformer> build_roberta_family(const ModelConfig&, const WeightSource&,
                                                  const RuntimeOptions&);
void read_bert_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c);
void read_roberta_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c);
// Gemma-2 (src/model/gemma2.cpp) and Phi-3 (src/model/phi3.cpp).
std::unique_ptr<Transformer> build_gemma2_family(const ModelConfig&, const WeightSource&,
                                                 const RuntimeOptions&);
void read_gemma2_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c);
void read_gemma2_gguf_config(const io::GgufFile& f, const std::string& prefix, ModelConfig& c);
std::unique_ptr<Transformer> build_phi3_family(const ModelConfig&, const WeightSource&,
                                               const RuntimeOptions&);
void read_phi3_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c);
void read_phi3_gguf_config(const io::GgufFile& f, const std::string& prefix, ModelConfig& c);
std::unique_ptr<Transformer> build_vit_family(const ModelConfig&, const WeightSource&,
                                              const RuntimeOptions&);
void read_vit_hf_config(const nlohmann::json& j, const std::string& origin, ModelConfig& c);

}  // namespace sinkscope::model
