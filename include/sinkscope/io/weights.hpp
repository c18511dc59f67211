// Weight files on disk, memory-mapped where the format allows: Hugging Face safetensors
// (single or sharded), GGUF, llama2.c checkpoints. The io module stays torch-free: a tensor is a
// view of bytes plus dtype and shape; the model module turns views into torch tensors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace sinkscope::io {

// Plain element types, then GGML block-quantized types (layouts and dequantization in
// ggml_quant.hpp, whose table gives each one's ggml id, name, block size and bytes).
enum class WeightDType {
    F32,
    F16,
    BF16,
    F64,
    I32,
    I64,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ4_NL,
};
const char* weight_dtype_name(WeightDType t);

// Bytes of one tensor inside a mapping owned by the WeightStore that returned it.
struct TensorView {
    std::string name;
    WeightDType dtype = WeightDType::F32;
    std::vector<int64_t> shape;  // row-major, PyTorch order (outermost first)
    const uint8_t* data = nullptr;
    size_t n_bytes = 0;
    std::filesystem::path file;  // for error messages
    // The mapping behind `data`, shared: a view holding it stays valid after its store is gone
    // (the model uses float32 weights in place, without a copy). Null for stores whose bytes
    // live only as long as the store (views of those are copied).
    std::shared_ptr<const void> owner;
    int64_t numel() const;
};

// Converts any float or quantized dtype to float32; `out` holds numel() floats. I32/I64 throw
// UnsupportedError (integer tensors are not weights); a view whose n_bytes does not match its
// dtype and shape, or a quantized view whose rows (last dimension) are not whole blocks, throws
// InputError naming the file and tensor.
void convert_to_f32(const TensorView& t, float* out);
// The checks of convert_to_f32 without reading a byte of data (metadata-only loads): throws the
// same errors for the same views.
void check_convertible(const TensorView& t);
// Same, into a new vector.
std::vector<float> to_f32(const TensorView& t);
// True for the dtypes convert_to_f32 turns into weights (everything but I32/I64).
bool weight_dtype_is_float(WeightDType t);

// Bytes that `numel` values of `t` occupy; -1 when numel is not representable (a quantized type
// needs whole blocks) or the product overflows.
int64_t weight_dtype_n_bytes(WeightDType t, int64_t numel);

class WeightStore {
public:
    virtual ~WeightStore() = default;
    virtual std::vector<std::string> names() const = 0;
    virtual bool has(const std::string& name) const = 0;
    // Throws InputError naming the file and tensor when missing.
    virtual TensorView get(const std::string& name) const = 0;
    // Weight files backing this store (for sha256 in run.json).
    virtual std::vector<std::filesystem::path> files() const = 0;
};

// Layout facts for the model runtime (pinned by tests/io/golden_loaders.cpp):
// * stories260K.gguf (llama.cpp convert-llama2c-to-ggml) and stories260K.bin hold bit-identical
//   tensors; wq/wk rows are NOT permuted between them. Both use RoPE on adjacent pairs
//   (x[2i], x[2i+1]): run.c, and GGML's "norm" rope mode for arch llama.
// * HF Llama safetensors keep q_proj/k_proj rows in rotate_half order (pairs (i, i + d_head/2));
//   llama.cpp's HF->GGUF converter permutes them to adjacent pairs with
//   w.reshape(n_heads, 2, d_head / 2, d_model).swapaxes(1, 2) (n_kv_heads for k_proj).
//   So: GGUF llama and llama2.c -> adjacent-pair RoPE; HF directory -> rotate_half.
// * stories260K.gguf also stores output.weight (a copy of token_embd.weight), and its
//   llama.context_length is 128 whereas the .bin header says seq_len 512.
// * tinystories656K (tie_word_embeddings true) stores only lm_head.weight, no
//   model.embed_tokens.weight: tie in whichever direction the file needs.

// model.safetensors, or model.safetensors.index.json with its shards; `path` may be the
// directory, the .safetensors file or the index file.
std::unique_ptr<WeightStore> open_safetensors(const std::filesystem::path& path);
// Tensors of a GGUF file; names as stored in the file ("blk.0.attn_q.weight"); shapes are
// reversed from GGUF's ne[] order into PyTorch order.
std::unique_ptr<WeightStore> open_gguf_weights(const std::filesystem::path& path);
// Same, over an already opened file (shares its mapping with the caller's metadata reads).
class GgufFile;
std::unique_ptr<WeightStore> open_gguf_weights(std::shared_ptr<const GgufFile> file);

// llama2.c checkpoint (karpathy/llama2.c run.c layout): 7 int32 header then fp32 weights.
struct Llama2cHeader {
    int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    bool shared_classifier;  // vocab_size > 0 in the file
};
// Tensor names: token_embedding_table, rms_att_weight.{l}, wq.{l}, wk.{l}, wv.{l}, wo.{l},
// rms_ffn_weight.{l}, w1.{l}, w2.{l}, w3.{l}, rms_final_weight, wcls (absent when shared);
// shapes in PyTorch Linear order [out, in].
std::unique_ptr<WeightStore> open_llama2c(const std::filesystem::path& path, Llama2cHeader* header);

}  // namespace sinkscope::io
