// The model runtime's public API: load a checkpoint (HF directory, GGUF, llama2.c), run a forward
// pass that keeps only the hooks a CaptureSpec selects, ablate heads, and hand attention to the
// metrics as fp64 host arrays.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "sinkscope/io/image.hpp"
#include "sinkscope/model/config.hpp"
#include "sinkscope/model/footprint.hpp"
#include "sinkscope/model/hooks.hpp"
#include "sinkscope/model/registry.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"

namespace sinkscope::io {
struct ModelFiles;
}

namespace sinkscope::io {
class WeightStore;
}

namespace sinkscope::model {

enum class DeviceKind { Cpu, Cuda };
// Float64: every step in double precision (gradient checks, exact comparisons; slow).
enum class ComputeDType { Float32, BFloat16, Float16, Float64 };
const char* device_name(DeviceKind d);
const char* compute_dtype_name(ComputeDType t);
int compute_dtype_bytes(ComputeDType t);        // bytes of one value: 4, 2, 2, 8
DeviceKind parse_device(const std::string& s);  // "cpu" | "cuda"; UsageError otherwise
ComputeDType parse_compute_dtype(
    const std::string& s);  // "float32" | "bfloat16" | "float16" | "float64"

// Where and in which precision the model runs.
struct RuntimeOptions {
    DeviceKind device = DeviceKind::Cpu;
    ComputeDType dtype = ComputeDType::Float32;
    int n_threads = 0;  // compute threads (process-wide, set_compute_threads); 0 = all cores
    // Set by load_model for a metadata-only build (LoadOptions::metadata_only): every tensor of
    // the model, weights and tables alike, lives on libtorch's meta device (shapes, no data).
    bool meta = false;
    // Widen every weight to the compute dtype at load (as before issue 47) instead of keeping
    // bf16 / f16 / quantized file tensors in the file's pages and widening them at each use.
    // The results are the same bit for bit either way; widening once costs memory (a 3B bf16
    // model: 12 GiB more at float32) and saves the per-forward conversion.
    bool widen_at_load = false;
};

// Threads of the model runtime, process-wide. n > 0: n threads; 0: every core of the machine.
// Each forward runs on one libtorch and one BLAS thread (their results follow their own thread
// count), and the n threads run whole inputs, samples or windows side by side
// (core/parallel.hpp), so a result is the same bit for bit for any n. Returns n resolved.
// UsageError when n < 0.
int set_compute_threads(int n);
// The count set_compute_threads last resolved (1 before it is called).
int compute_threads();
// Threads one forward on the calling thread may split its larger matrix products over: the
// weight's output rows go in blocks of a fixed size (kLinearBlockRows, whatever the thread
// count), each block one single-threaded product, so the result is the same bit for bit for
// any count. The innermost ForwardWorkers of this thread, else compute_threads().
int forward_workers();
// Sets forward_workers() on this thread while it lives: forwards run side by side give each
// its share of the compute threads (at least 1).
class ForwardWorkers {
public:
    explicit ForwardWorkers(int n);
    ~ForwardWorkers();
    ForwardWorkers(const ForwardWorkers&) = delete;
    ForwardWorkers& operator=(const ForwardWorkers&) = delete;

private:
    int previous_;
};
// The share of the compute threads each of `side_by_side` forwards run at once gets.
int forward_share(int64_t side_by_side);
// libtorch's intra-op pool and OpenBLAS's pool (the BLAS of Debian's libtorch, which keeps a
// pool of its own that libtorch does not size) at n threads. Training alone widens them
// (model/train.hpp): its results then follow the thread count, which run.json records.
void set_intra_op_threads(int n);

struct LoadOptions {
    RuntimeOptions runtime;
    // Tokenizer file to use instead of the one found beside the weights (llama2.c tok*.bin).
    std::filesystem::path tokenizer;
    bool load_tokenizer = true;
    // Read the checkpoint's metadata only: config, tokenizer, and every tensor's name, shape and
    // dtype, checked as a real load checks them, but no weight data (a model of billions of
    // parameters in well under a second). The model's tensors have no storage: it cannot run.
    // Model::footprint tells what a real load would take.
    bool metadata_only = false;
    // Refuse, before reading any weight data, to load a model whose footprint
    // (WeightFootprint::load_bytes at the runtime's dtype, CPU only) exceeds memory_budget_bytes.
    bool check_memory = true;
};

// Ablation of attention heads at hook_z (before the output projection). Zero: the head's z is 0.
// Mean: the head's z is replaced by its mean over reference inputs (compute_mean_z).
struct HeadMask {
    enum class Kind { Zero, Mean };
    Kind kind = Kind::Zero;
    int64_t n_layers = 0;
    int64_t n_heads = 0;
    std::vector<uint8_t> ablated;  // [n_layers, n_heads], 1 = ablate
    at::Tensor z_mean;             // [n_layers, n_heads, d_head] on any device; Mean only

    HeadMask() = default;
    HeadMask(Kind kind, int64_t n_layers, int64_t n_heads);
    void ablate(int64_t layer, int64_t head);
    void ablate_layer(int64_t layer);
    bool is_ablated(int64_t layer, int64_t head) const;
    bool any_in_layer(int64_t layer) const;
};

// The blocks one forward runs: a pipeline stage (analyze --split layers, issue 47). With the
// defaults, every block. begin > 0: the residual stream entering block `begin` is `residual`
// ([batch, pos, d_model] in the compute dtype, as ForwardResult::residual of the stage before)
// instead of the embedding, whose hook is then not recorded; end < n_layers: the forward stops
// after block end - 1 and hands out the stream leaving it in ForwardResult::residual (no final
// norm, no logits). The stages of a split compute what one whole forward computes, bit for bit:
// the same operations on the same values. The input (ids or pixels) still gives the shape, the
// positions and the masks.
struct LayerRange {
    int64_t begin = 0;
    int64_t end = -1;  // -1: the model's n_layers
    at::Tensor residual;
};

// What one forward pass reads. Text models need ids; encoders may add token types and a padding
// mask; vision models read pixel_values instead of ids.
struct ModelInput {
    at::Tensor ids;             // [batch, pos] int64 on any device (text models)
    at::Tensor token_type_ids;  // [batch, pos] int64, or undefined = all 0 (BERT segment ids)
    // [batch, pos] 1 = real token, 0 = padding; undefined = all real. Causal decoders take right
    // padding only (the real tokens first): their real positions then equal the sequence run
    // alone; encoders mask the pads as keys.
    at::Tensor attention_mask;
    at::Tensor pixel_values;  // [batch, channels, height, width] f32, normalised (ViT)
    LayerRange stage;         // the blocks to run (default: all)

    int64_t batch_size() const;
};

struct ForwardResult {
    // [batch, pos, d_vocab] on the model's device (ViT: [batch, n_labels]); f32, or f64 when the
    // model computes in float64. Undefined when the CaptureSpec said without_logits() (text
    // models).
    at::Tensor logits;
    std::map<std::string, at::Tensor> captured;  // hook name -> tensor (shapes in hooks.hpp)
    // A stage ending before the last block (LayerRange): the residual stream leaving it,
    // [batch, pos, d_model] in the compute dtype; undefined otherwise.
    at::Tensor residual;
};

// Captured attention squares ([batch, n_heads, query, key] scores and pattern) of 32 MiB or more
// are kept in a pool of the process when the forward's result releases them, and the next
// forward writes its own into them instead of into fresh memory (fresh pages cost the kernel a
// zero-fill and a fault each: at T = 2048 on a 12-layer, 12-head model the squares are 4.8 GB).
// A buffer is reused only once nothing else holds it. The pool keeps the buffers the latest
// forward used, no others; this returns them to the system (for example before an analysis
// that needs the memory).
void release_capture_buffers();

// One trainable tensor of a built model, as its forward reads it: the model's own tensor (not a
// copy), so gradients with respect to it are gradients of the model (model/gradients.hpp). Fused
// checkpoint tensors (GPT-2 c_attn, Phi-3 qkv_proj / gate_up_proj) are split by role on load and
// listed per part; a tied output matrix is the embedding and is listed once.
struct Parameter {
    TensorRole role = TensorRole::TokenEmbed;
    int64_t layer = -1;  // -1: outside the blocks (embeddings, final norm, heads)
    at::Tensor tensor;
};

// One architecture family's computation (src/model/<family>.cpp).
class Transformer {
public:
    virtual ~Transformer() = default;
    // input.ids: [batch, pos] int64 on any device (or pixel_values for vision). mask may be null.
    virtual ForwardResult forward(const ModelInput& input, const CaptureSpec& capture,
                                  const HeadMask* mask) const = 0;
    virtual int64_t n_params() const = 0;
    // Every tensor the forward reads that comes from the weights (their sizes add up to
    // n_params()). Derived constants (RoPE tables, masks) are not parameters.
    virtual std::vector<Parameter> parameters() const = 0;
};

class Model {
public:
    Model(ModelConfig config, std::unique_ptr<Transformer> net, RuntimeOptions runtime);
    ~Model();
    Model(Model&&) noexcept;
    Model& operator=(Model&&) noexcept;

    const ModelConfig& config() const { return config_; }
    const RuntimeOptions& runtime() const { return runtime_; }
    const tokenizer::Tokenizer* tokenizer() const { return tokenizer_.get(); }
    void set_tokenizer(std::unique_ptr<tokenizer::Tokenizer> t);
    // Vision models: the image preprocessing (preprocessor_config.json beside the weights, else
    // io::ImageProcessor's defaults); null for text models.
    const io::ImageProcessor* image_processor() const {
        return config_.is_vision() ? &image_processor_ : nullptr;
    }
    void set_image_processor(io::ImageProcessor p) { image_processor_ = std::move(p); }
    // Weight files (for sha256 in run.json) and the path the model was loaded from.
    std::vector<std::filesystem::path> files;
    std::filesystem::path path;
    WeightFormat format = WeightFormat::HuggingFace;
    // What loading it takes at its runtime's dtype (load_model fills it from a metadata-only
    // build before the real one).
    WeightFootprint footprint;
    // WeightFootprint::load_bytes of a CPU build at float32, bfloat16 and float64.
    std::map<ComputeDType, int64_t> load_memory;

    // One sequence (batch of 1) or a batch [batch, pos] of equal-length sequences.
    ForwardResult forward(const std::vector<int32_t>& ids, const CaptureSpec& capture = {},
                          const HeadMask* mask = nullptr) const;
    ForwardResult forward(const at::Tensor& ids, const CaptureSpec& capture = {},
                          const HeadMask* mask = nullptr) const;
    ForwardResult forward(const ModelInput& input, const CaptureSpec& capture = {},
                          const HeadMask* mask = nullptr) const;
    int64_t n_params() const;
    // The family's parameters, each tensor once (Transformer::parameters).
    std::vector<Parameter> parameters() const;

    // Encodes text with the model's tokenizer and a BOS policy; UnsupportedError without one.
    std::vector<int32_t> encode(const std::string& text, tokenizer::BosPolicy bos) const;

private:
    ModelConfig config_;
    std::unique_ptr<Transformer> net_;
    RuntimeOptions runtime_;
    std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
    io::ImageProcessor image_processor_;
};

// The config of located model files, without opening the weights (GGUF: its metadata; llama2.c:
// its header); `format` (may be null) receives the weight naming the files use.
ModelConfig read_model_config(const io::ModelFiles& files, WeightFormat* format = nullptr);
// Loads an HF directory (config.json + safetensors), a .gguf file or a llama2.c .bin checkpoint
// (tokenizer: options.tokenizer, else tok<vocab>.bin or tokenizer.bin beside it).
Model load_model(const std::filesystem::path& path, const LoadOptions& options = {});
// Builds a model from weights already opened (tests, random weights, converters).
Model build_model(const ModelConfig& config, const WeightSource& weights,
                  const RuntimeOptions& runtime = {});

// RoPE inverse frequencies [rotary dims / 2] f32 (CPU) of a forward over `n_tokens` positions:
// theta^(-2i/d) with c.rope_scaling applied (dynamic NTK depends on n_tokens).
at::Tensor rope_inverse_frequencies(const ModelConfig& c, int64_t n_tokens);

// One image as a vision model's input: the model's image processor applied, pixel_values
// [1, channels, image_size, image_size] f32 on the model's device. UnsupportedError for a text
// model; InputError naming the image when its size or channels do not fit.
ModelInput image_input(const Model& model, const io::Image& image);

// Mean of hook_z over every position of every input: [n_layers, n_heads, d_head] f32.
at::Tensor compute_mean_z(const Model& model, const std::vector<std::vector<int32_t>>& inputs);

// Greedy decoding: appends up to n_new argmax tokens to `prompt`; stops early after
// `stop_token` when it is >= 0 (the stop token is not appended).
std::vector<int32_t> generate_greedy(const Model& model, std::vector<int32_t> prompt, int64_t n_new,
                                     int32_t stop_token = -1);

// Next-token perplexity exp(mean NLL) over every predicted token of every sample
// (token-weighted), optionally with heads ablated by `mask`. UnsupportedError for encoders and
// vision models, whose outputs are not next-token predictions.
struct PerplexityResult {
    double mean_nll = 0;
    double perplexity = 0;
    int64_t n_tokens = 0;            // predicted tokens (sum of length - 1)
    std::vector<double> sample_nll;  // mean NLL per sample
    std::vector<int64_t> sample_tokens;
};
PerplexityResult compute_perplexity(const Model& model,
                                    const std::vector<std::vector<int32_t>>& samples,
                                    const HeadMask* mask = nullptr);

// Masked-LM pseudo-perplexity of an encoder (BERT, RoBERTa): in each sample, round(rate x n)
// of its n maskable tokens (at least 1; special tokens of the model's template are never
// masked) are drawn with `seed` and the sample's index (core/random.hpp, the same on every
// platform), all replaced by the mask token at once, and the model predicts the originals in
// one forward: exp of the mean NLL over every masked token. The result's n_tokens counts masked
// tokens. UnsupportedError for decoders and vision models, or without a mask token ([MASK] or
// <mask> in the vocabulary).
struct MaskedLmOptions {
    double rate = 0.15;
    uint64_t seed = 0;
};
PerplexityResult compute_masked_perplexity(const Model& model,
                                           const std::vector<std::vector<int32_t>>& samples,
                                           const MaskedLmOptions& options,
                                           const HeadMask* mask = nullptr);

}  // namespace sinkscope::model
