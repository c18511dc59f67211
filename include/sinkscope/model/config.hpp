// Model hyper-parameters with TransformerLens names, read from HF config.json, GGUF metadata or
// a llama2.c header. One struct, in-class defaults are the only defaults.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sinkscope/io/weights.hpp"

namespace sinkscope::io {
class GgufFile;
}

namespace sinkscope::model {

// GeluTanh is HF's gelu_new / gelu_pytorch_tanh (the same function); Gelu is the exact erf form.
enum class Activation { Silu, GeluTanh, Gelu };
const char* activation_name(Activation a);
// HF hidden_act strings -> Activation; UnsupportedError naming `origin` otherwise.
Activation parse_hf_activation(const std::string& hidden_act, const std::string& origin);

// RoPE frequency scaling as Hugging Face's ROPE_INIT_FUNCTIONS define it (config.json
// rope_scaling; GGUF rope.scaling.* keys and rope_freqs.weight map onto the same fields).
enum class RopeScalingKind { None, Linear, Dynamic, Llama3, Yarn, LongRope };
const char* rope_scaling_kind_name(RopeScalingKind k);

struct RopeScaling {
    RopeScalingKind kind = RopeScalingKind::None;
    double factor = 1.0;
    double low_freq_factor = 1.0;   // llama3
    double high_freq_factor = 4.0;  // llama3
    int64_t original_n_ctx = 0;     // llama3, yarn: original_max_position_embeddings
    double beta_fast = 32.0;        // yarn correction range (rotations)
    double beta_slow = 1.0;
    bool truncate = true;           // yarn: floor / ceil of the correction range
    double attention_factor = 1.0;  // yarn, longrope: cos and sin times it (HF attention_scaling)
    // longrope (Phi-3; "su" in older configs): per-pair divisors of the frequencies, [rotary dims
    // / 2]; the long ones when the sequence is longer than original_n_ctx.
    std::vector<float> short_factor, long_factor;
    // GGUF rope_freqs.weight: divisor of the frequency of each rotated pair, [rotary dims / 2]
    // (llama.cpp freq_factors; empty: none). Applied after `kind`.
    std::vector<float> freq_factors;

    bool active() const { return kind != RopeScalingKind::None || !freq_factors.empty(); }
};
// One line for `inspect`: "none", "llama3 (factor 8, ...)", "rope_freqs [1, ...]".
std::string describe_rope_scaling(const RopeScaling& s);

// The function of a row of scores s (over the keys a query sees) that gives the attention
// weights (spec section 0; Gu et al. 2025, section 7): Softmax (every checkpoint format's),
// SoftmaxOne ("softmax off by one": an extra zero logit, exp(s_j) / (1 + sum_k exp(s_k)), so a
// row sums to less than 1) and Sigmoid (sigmoid(s_j) per key, no normalisation and no bias term,
// as Gu et al.'s code: a row sums to anything in (0, T)). Only config.json's sinkscope-specific
// key "sinkscope_attention" (written by `sinkscope train`) selects the other two; GGUF and
// llama2.c checkpoints have no such key and are softmax.
enum class AttentionFunction { Softmax, SoftmaxOne, Sigmoid };
const char* attention_function_name(AttentionFunction f);  // "softmax", "softmax_one", "sigmoid"
// The names above -> AttentionFunction; nullopt for any other name.
std::optional<AttentionFunction> attention_function_from_name(const std::string& name);
inline constexpr const char* kAttentionFunctionNames = "softmax, softmax_one, sigmoid";
// The config.json key of the attention function ("sinkscope_attention").
inline constexpr const char* kHfAttentionKey = "sinkscope_attention";
// The config.json key of the key/value slot ("sinkscope_kv_bias": true; ModelConfig::kv_slot),
// with the tensor names of the slot (registry.cpp: self_attn.sink_key / sink_value).
inline constexpr const char* kHfKvSlotKey = "sinkscope_kv_bias";

enum class NormKind { RmsNorm, LayerNorm };
enum class PositionKind { Rotary, Learned };

// Where the weights come from: decides tensor names and the Q/K row layout (spec of RoPE
// conventions in registry.hpp).
enum class WeightFormat { HuggingFace, Gguf, Llama2c };
const char* weight_format_name(WeightFormat f);

struct ModelConfig {
    std::string architecture;  // registry name (src/model/registry.cpp)
    int64_t n_layers = 0;
    int64_t n_heads = 0;
    int64_t n_kv_heads = 0;  // GQA: n_heads is a multiple of n_kv_heads
    int64_t d_model = 0;
    int64_t d_head = 0;
    int64_t d_mlp = 0;
    int64_t d_vocab = 0;
    int64_t n_ctx = 0;  // trained context (informational: RoPE is not limited by it)
    double rope_theta = 10000.0;
    RopeScaling rope_scaling;  // none unless the checkpoint asks for it
    double norm_eps = 1e-5;
    Activation act = Activation::Silu;
    int64_t window = 0;  // sliding-window attention (0 = full causal)
    // Layers that use `window`, ascending; empty: every layer does (Mistral). Gemma-2 alternates
    // local (windowed) and global layers; config.json layer_types may list them.
    std::vector<int64_t> window_layers;
    // Attention scores: q.k * attn_scale (0: 1/sqrt(d_head); Gemma-2: query_pre_attn_scalar^-0.5),
    // then, when attn_softcap > 0, softcap * tanh(score / softcap) before the mask (Gemma-2).
    double attn_scale = 0.0;
    double attn_softcap = 0.0;
    // How a row of scores becomes weights (after the soft-cap and the mask); not Softmax: the
    // pattern's rows do not sum to 1 (causal decoders only).
    AttentionFunction attention = AttentionFunction::Softmax;
    // A learnable key/value slot per layer (Gu et al. 2025, section 7, "KV biases"; `train
    // --kv-bias`): one more key k* and value v* per key/value head, [n_kv_heads, d_head] each,
    // that every query sees besides the tokens. k* carries no position (RoPE does not rotate
    // it); with softmax a row then sums over the tokens to 1 less the slot's weight, and z adds
    // that weight times v*. Llama-family and GPT-2 decoders with softmax only.
    bool kv_slot = false;
    double final_softcap = 0.0;  // logits = cap * tanh(logits / cap) when > 0 (Gemma-2)
    bool tied_embeddings = false;
    bool qkv_bias = false;
    bool norm_add_one = false;  // Gemma RMSNorm scale (1 + w) as stored by HF
    bool embed_scale = false;   // Gemma: embeddings times sqrt(d_model)
    // Family shape (defaults: a Llama decoder). Encoders set causal = false; their attention is
    // bidirectional and the sink policy default is argmax (spec section 0).
    bool causal = true;
    NormKind norm = NormKind::RmsNorm;
    PositionKind positions = PositionKind::Rotary;
    int64_t rotary_dim = 0;          // dims of each head that RoPE rotates (0 = d_head); NeoX, Phi
    bool parallel_residual = false;  // x + attn(ln1(x)) + mlp(ln2(x)) (NeoX, Phi)
    int64_t pos_offset = 0;          // RoBERTa: position ids start at padding_idx + 1
    int64_t n_token_types = 0;       // BERT token_type_ids vocabulary (0 = none)
    // Vision (ViT): d_vocab is the number of labels; tokens are CLS + patches.
    int64_t image_size = 0;
    int64_t patch_size = 0;
    int64_t n_channels = 0;
    std::vector<std::string> labels;  // id2label, index = class id
    int64_t bos_token_id = -1;
    int64_t eos_token_id = -1;

    // Llama-family estimate of the weights the forward uses (tied embedding counted once); other
    // families report the exact count through Model::n_params().
    int64_t n_params() const;
    bool is_vision() const { return image_size > 0; }
    // ViT: patches per image, (image_size / patch_size)^2 (the tokens after CLS).
    int64_t n_patches() const {
        const int64_t side = patch_size > 0 ? image_size / patch_size : 0;
        return side * side;
    }
    // The longest input the model's positions are meant for, the limit inputs are cut to (0: none
    // known). n_ctx for every model except dynamic NTK RoPE, which recomputes its base for longer
    // inputs and so has no limit beyond memory (transformers' _compute_dynamic_ntk_parameters).
    int64_t context_limit() const;
    // Sliding window of `layer` (0: full causal attention there).
    int64_t layer_window(int64_t layer) const;
    // The factor q.k is multiplied by (attn_scale, or 1/sqrt(d_head) when 0).
    double score_scale() const;
    // True when every row of the pattern over the tokens sums to 1 (softmax without a kv slot);
    // false: analyses read the rows closed (analysis/capture.hpp).
    bool rows_sum_to_one() const { return attention == AttentionFunction::Softmax && !kv_slot; }
    // True when a row's weights over the tokens leave mass elsewhere (softmax_one's zero logit,
    // the kv slot): 1 - the row's sum is that mass.
    bool has_outside_slot() const { return attention == AttentionFunction::SoftmaxOne || kv_slot; }
};

// Validates dims (positive, divisible, ...); throws InputError naming `origin`.
void validate_config(const ModelConfig& c, const std::string& origin);

// config.json of a Hugging Face directory (architecture from model_type via the registry).
ModelConfig config_from_hf_json(const nlohmann::json& j, const std::string& origin);
ModelConfig config_from_hf_dir(const std::filesystem::path& dir);
// GGUF metadata "<arch>.*" keys; d_vocab from token_embd when metadata lacks it.
ModelConfig config_from_gguf(const io::GgufFile& file);
// llama2.c run.c header (always llama, rope theta 1e4, eps 1e-5).
ModelConfig config_from_llama2c(const io::Llama2cHeader& h);

}  // namespace sinkscope::model
