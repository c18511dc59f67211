// ModelConfig from GGUF metadata ("<arch>.*" keys of llama.cpp's gguf-py constants). The keys
// every decoder has are read here; what differs per family is read by the registry row's
// read_gguf_config (below), as llama.cpp's llama_model::load_hparams does per architecture.
// Facts the converter does not store (activation, q/k/v biases, embedding scale) are properties
// of the architecture and come from its registry row.
#include <cmath>
#include <variant>

#include "rope_scaling.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/io/gguf.hpp"
#include "sinkscope/model/config.hpp"
#include "sinkscope/model/registry.hpp"

namespace sinkscope::model {

namespace {

// A required bool key (GgufFile has typed getters for numbers and strings only).
bool get_bool(const io::GgufFile& f, const std::string& key) {
    const auto it = f.metadata().find(key);
    if (it == f.metadata().end() || !std::holds_alternative<bool>(it->second.v))
        throw InputError(f.path().string(), "GGUF metadata '" + key + "' is missing or not a bool");
    return std::get<bool>(it->second.v);
}

// The LayerNorm families (GPT-2, GPT-NeoX, Phi-2): llama.cpp reads their epsilon from
// attention.layer_norm_epsilon (required; the RMS key is the Llama family's).
void read_layer_norm(const io::GgufFile& f, const std::string& p, ModelConfig& c) {
    c.norm = NormKind::LayerNorm;
    c.norm_eps = f.get_float(p + "attention.layer_norm_epsilon");
}

// Partial rotary (GPT-NeoX rotary_pct, Phi partial_rotary_factor): llama.cpp's n_rot is
// rope.dimension_count. Required: the HF defaults (0.25, 0.5) differ per family, so a missing key
// would silently pick one of them.
void read_partial_rope(const io::GgufFile& f, const std::string& p, ModelConfig& c) {
    const std::string origin = f.path().string();
    c.positions = PositionKind::Rotary;
    c.rotary_dim = f.get_int(p + "rope.dimension_count");
    SS_CHECK_INPUT(c.rotary_dim > 0 && c.rotary_dim <= c.d_head && c.rotary_dim % 2 == 0, origin,
                   "key ", p, "rope.dimension_count = ", c.rotary_dim,
                   " must be even and in (0, d_head ", c.d_head, "]");
    c.rope_theta = f.get_float_or(p + "rope.freq_base", 10000.0);  // llama.cpp's default
    const std::string freq_name =
        tensor_name(find_architecture(c.architecture), WeightFormat::Gguf, TensorRole::RopeFreqs);
    c.rope_scaling = read_gguf_rope_scaling(f, p, freq_name, c.rotary_dim, c.n_ctx);
}

}  // namespace

void read_llama_gguf_config(const io::GgufFile& f, const std::string& p, ModelConfig& c) {
    const std::string origin = f.path().string();
    const ArchitectureInfo& arch = find_architecture(c.architecture);
    c.norm = NormKind::RmsNorm;
    c.norm_eps = f.get_float(p + "attention.layer_norm_rms_epsilon");
    c.positions = PositionKind::Rotary;
    c.rope_theta = f.get_float_or(p + "rope.freq_base", 10000.0);  // llama.cpp's default
    if (arch.has_sliding_window && c.window == 0)
        c.window = f.get_int_or(p + "attention.sliding_window", 0);
    // A family reader that runs first (Phi-3) may have set a partial rotary_dim and its own RoPE
    // scaling (longrope factor tensors); anything else rotates whole heads.
    const int64_t n_rot = f.get_int_or(p + "rope.dimension_count", c.d_head);
    if (n_rot != c.d_head && n_rot != c.rotary_dim)
        throw UnsupportedError(origin, "partial RoPE (rope.dimension_count " +
                                           std::to_string(n_rot) + " != d_head " +
                                           std::to_string(c.d_head) + ")");
    if (c.rope_scaling.kind == RopeScalingKind::None)
        c.rope_scaling = read_gguf_rope_scaling(
            f, p, tensor_name(arch, WeightFormat::Gguf, TensorRole::RopeFreqs), n_rot, c.n_ctx);
}

void read_gpt2_gguf_config(const io::GgufFile& f, const std::string& p, ModelConfig& c) {
    read_layer_norm(f, p, c);
    // Learned positions: context_length is the row count of position_embd.
    c.positions = PositionKind::Learned;
    c.n_ctx = f.get_int(p + "context_length");
    c.rotary_dim = 0;
    c.rope_theta = 0;  // no RoPE
}

void read_gpt_neox_gguf_config(const io::GgufFile& f, const std::string& p, ModelConfig& c) {
    read_layer_norm(f, p, c);
    read_partial_rope(f, p, c);
    // llama.cpp requires it for gptneox (HF use_parallel_residual; Pythia uses true).
    c.parallel_residual = get_bool(f, p + "use_parallel_residual");
}

void read_phi_gguf_config(const io::GgufFile& f, const std::string& p, ModelConfig& c) {
    read_layer_norm(f, p, c);
    read_partial_rope(f, p, c);
    c.parallel_residual = true;  // Phi-2: attention and MLP both read the one attn_norm
}

void read_bert_gguf_config(const io::GgufFile& f, const std::string& p, ModelConfig& c) {
    const std::string origin = f.path().string();
    read_layer_norm(f, p, c);
    // llama.cpp's bert: bidirectional unless attention.causal says otherwise.
    if (f.has(p + "attention.causal") && get_bool(f, p + "attention.causal"))
        throw UnsupportedError(origin, "key " + p + "attention.causal = true (causal BERT)");
    c.causal = false;
    c.positions = PositionKind::Learned;
    c.n_ctx = f.get_int(p + "context_length");  // rows of position_embd
    c.pos_offset = 0;                           // BERT positions are 0..T-1
    c.rotary_dim = 0;
    c.rope_theta = 0;
    // The segment vocabulary is the row count of token_types (llama.cpp sizes the tensor by
    // tokenizer.ggml.token_type_count, which a file without a vocabulary lacks).
    const std::string types_name =
        tensor_name(find_architecture(c.architecture), WeightFormat::Gguf, TensorRole::TypeEmbed);
    const io::GgufTensorInfo* types = f.find_tensor(types_name);
    SS_CHECK_INPUT(types && types->dims.size() == 2, origin, "tensor ", types_name,
                   " is missing or not a matrix");
    c.n_token_types = types->dims[1];
    // No MLM head in the converter's output (tied_embeddings describes the absent decoder).
    c.tied_embeddings = false;
}

ModelConfig config_from_gguf(const io::GgufFile& f) {
    const std::string origin = f.path().string();
    const std::string gguf_arch = f.get_string("general.architecture");
    const ArchitectureInfo& arch = find_by_gguf_arch(gguf_arch, origin);
    SS_CHECK(arch.read_gguf_config, "registry row ", arch.name, " has a gguf_arch but no reader");
    const std::string p = gguf_arch + ".";
    ModelConfig c;  // attention stays softmax: GGUF has no key for the other functions
    c.architecture = arch.name;
    c.n_layers = f.get_int(p + "block_count");
    c.d_model = f.get_int(p + "embedding_length");
    c.d_mlp = f.get_int(p + "feed_forward_length");
    c.n_heads = f.get_int(p + "attention.head_count");
    // Checked before anything divides by it (d_head below, partial-RoPE checks in the readers).
    SS_CHECK_INPUT(c.n_heads > 0, origin, "key ", p, "attention.head_count = ", c.n_heads,
                   " must be positive");
    c.n_kv_heads = f.get_int_or(p + "attention.head_count_kv", c.n_heads);
    c.d_head = f.get_int_or(p + "attention.key_length", c.n_heads > 0 ? c.d_model / c.n_heads : 0);
    c.n_ctx = f.get_int_or(p + "context_length", 0);
    c.act = arch.default_act;
    c.qkv_bias = arch.qkv_bias;
    c.norm_add_one = false;  // llama.cpp's converter stores Gemma's 1 + w
    c.embed_scale = arch.embed_scale;
    const std::string embd_name = tensor_name(arch, WeightFormat::Gguf, TensorRole::TokenEmbed);
    const auto* embd = f.find_tensor(embd_name);
    SS_CHECK_INPUT(embd && embd->dims.size() == 2, origin, "tensor ", embd_name, " is missing");
    c.d_vocab = f.get_int_or(p + "vocab_size", embd->dims[1]);
    c.tied_embeddings =
        f.find_tensor(tensor_name(arch, WeightFormat::Gguf, TensorRole::Output)) == nullptr;
    c.bos_token_id = f.get_int_or("tokenizer.ggml.bos_token_id", -1);
    c.eos_token_id = f.get_int_or("tokenizer.ggml.eos_token_id", -1);
    arch.read_gguf_config(f, p, c);
    validate_config(c, origin);
    return c;
}

// llama.cpp gemma2 keys (llama-model.cpp): attn_logit_softcapping (default 50),
// final_logit_softcapping (default 30), attention.sliding_window (default 4096) on the layers
// il % 2 == 0 (swa pattern 2). llama.cpp has no query_pre_attn_scalar key: it scales q by
// 1/sqrt(head dim), except for the 27B model (46 layers), 1/sqrt(n_embd / n_head) (HF's 144);
// an attention.scale key, where a converter writes one, wins.
void read_gemma2_gguf_config(const io::GgufFile& f, const std::string& p, ModelConfig& c) {
    read_llama_gguf_config(f, p, c);  // RMS norm, RoPE: as the Llama family
    c.attn_softcap = f.get_float_or(p + "attn_logit_softcapping", 50.0);
    c.final_softcap = f.get_float_or(p + "final_logit_softcapping", 30.0);
    c.window = f.get_int_or(p + "attention.sliding_window", 4096);
    c.window_layers.clear();
    for (int64_t l = 0; l < c.n_layers; l += 2) c.window_layers.push_back(l);
    const double head = c.n_layers == 46 ? static_cast<double>(c.d_model / c.n_heads)
                                         : static_cast<double>(c.d_head);
    c.attn_scale = f.get_float_or(p + "attention.scale", 1.0 / std::sqrt(head));
}

// llama.cpp phi3: rope.dimension_count rotary dims; longrope as the divisor tensors
// rope_factors_short / rope_factors_long ([rotary dims / 2] F32) with rope.scaling.
// original_context_length and rope.scaling.attn_factor (convert_hf_to_gguf.py Phi3MiniModel
// writes sqrt(1 + ln(factor) / ln(original)) there). The short / long choice follows transformers
// (sequence length above the original context), not llama.cpp's context size.
void read_phi3_gguf_config(const io::GgufFile& f, const std::string& p, ModelConfig& c) {
    const std::string origin = f.path().string();
    c.rotary_dim = f.get_int_or(p + "rope.dimension_count", c.d_head);
    const ArchitectureInfo& arch = find_architecture(c.architecture);
    const std::string short_name =
        tensor_name(arch, WeightFormat::Gguf, TensorRole::RopeFactorsShort);
    const std::string long_name =
        tensor_name(arch, WeightFormat::Gguf, TensorRole::RopeFactorsLong);
    const bool ts = f.find_tensor(short_name) != nullptr;
    const bool tl = f.find_tensor(long_name) != nullptr;
    if (ts || tl) {  // longrope: both factor tensors and the original context
        SS_CHECK_INPUT(ts && tl, origin, "tensor ", ts ? long_name : short_name,
                       " is missing (longrope needs both)");
        RopeScaling& r = c.rope_scaling;
        r.kind = RopeScalingKind::LongRope;
        r.short_factor = read_gguf_divisors(f, short_name, c.rotary_dim);
        r.long_factor = read_gguf_divisors(f, long_name, c.rotary_dim);
        r.original_n_ctx = f.get_int_or(p + "rope.scaling.original_context_length", c.n_ctx);
        SS_CHECK_INPUT(r.original_n_ctx > 0, origin, "key ", p,
                       "rope.scaling.original_context_length is missing (longrope)");
        r.factor = static_cast<double>(c.n_ctx) / static_cast<double>(r.original_n_ctx);
        r.attention_factor = f.get_float_or(
            p + "rope.scaling.attn_factor",
            r.factor <= 1.0
                ? 1.0
                : std::sqrt(1.0 + std::log(r.factor) / std::log(double(r.original_n_ctx))));
    }
    read_llama_gguf_config(f, p, c);  // RMS norm, theta, the RoPE check: as the Llama family
}

}  // namespace sinkscope::model
