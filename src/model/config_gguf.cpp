// ModelConfig from GGUF metadata ("<arch>.*" keys of llama.cpp's gguf-py constants).
#include "rope.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/io/gguf.hpp"
#include "sinkscope/model/config.hpp"
#include "sinkscope/model/registry.hpp"

namespace sinkscope::model {

ModelConfig config_from_gguf(const io::GgufFile& f) {
    const std::string origin = f.path().string();
    const std::string gguf_arch = f.get_string("general.architecture");
    const ArchitectureInfo& arch = find_by_gguf_arch(gguf_arch, origin);
    const std::string p = gguf_arch + ".";
    ModelConfig c;
    c.architecture = arch.name;
    c.n_layers = f.get_int(p + "block_count");
    c.d_model = f.get_int(p + "embedding_length");
    c.d_mlp = f.get_int(p + "feed_forward_length");
    c.n_heads = f.get_int(p + "attention.head_count");
    c.n_kv_heads = f.get_int_or(p + "attention.head_count_kv", c.n_heads);
    c.d_head = f.get_int_or(p + "attention.key_length", c.n_heads > 0 ? c.d_model / c.n_heads : 0);
    c.n_ctx = f.get_int_or(p + "context_length", 0);
    c.rope_theta = f.get_float_or(p + "rope.freq_base", 10000.0);
    c.norm_eps = f.get_float_or(p + "attention.layer_norm_rms_epsilon", 1e-5);
    c.window = arch.has_sliding_window ? f.get_int_or(p + "attention.sliding_window", 0) : 0;
    c.act = arch.default_act;
    c.qkv_bias = arch.qkv_bias;
    c.norm_add_one = false;  // llama.cpp's converter stores Gemma's 1 + w
    c.embed_scale = arch.embed_scale;
    const std::string embd_name = tensor_name(arch, WeightFormat::Gguf, TensorRole::TokenEmbed);
    const auto* embd = f.find_tensor(embd_name);
    SS_CHECK_INPUT(embd && embd->dims.size() == 2, origin, "tensor ", embd_name, " is missing");
    c.d_vocab = f.get_int_or(p + "vocab_size", embd->dims[1]);
    c.tied_embeddings = f.find_tensor(tensor_name(arch, WeightFormat::Gguf, TensorRole::Output)) == nullptr;
    c.bos_token_id = f.get_int_or("tokenizer.ggml.bos_token_id", -1);
    c.eos_token_id = f.get_int_or("tokenizer.ggml.eos_token_id", -1);
    if (arch.read_gguf_config) arch.read_gguf_config(f, p, c);
    const int64_t n_rot = f.get_int_or(p + "rope.dimension_count", c.d_head);
    if (n_rot != c.d_head && n_rot != c.rotary_dim)
        throw UnsupportedError(origin, "partial RoPE (rope.dimension_count " +
                                           std::to_string(n_rot) + " != d_head " +
                                           std::to_string(c.d_head) + ")");
    if (c.rope_scaling.kind == RopeScalingKind::None)  // a family reader may have set it
        c.rope_scaling = read_gguf_rope_scaling(
            f, p, tensor_name(arch, WeightFormat::Gguf, TensorRole::RopeFreqs), n_rot, c.n_ctx);
    validate_config(c, origin);
    return c;
}

}  // namespace sinkscope::model
