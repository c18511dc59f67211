// Internal: the pieces every family file shares: hook recording, input checks, masks and the
// eager attention core (spec section 0), so that each family file only says what differs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/InferenceMode.h>

#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"

namespace sinkscope::model::detail {

// The type in which a family computes what HF computes in f32 whatever the model's dtype
// (softmax, RMS normalisation, logits, the f32 norm scales): f32, or f64 for a float64 model.
inline at::ScalarType accum_type(at::ScalarType dtype) {
    return dtype == at::kDouble ? at::kDouble : at::kFloat;
}

// True inside a model::GradientScope on this thread: forwards then record the autograd graph
// instead of running under c10::InferenceMode (model/gradients.hpp).
bool gradients_recorded();

// Keeps the hooks a CaptureSpec selects in a ForwardResult.
// Also holds the scratch buffers attend() reuses across the query blocks and layers of the one
// forward the recorder belongs to, so a block's temporaries are not fresh pages every time.
class HookRecorder {
public:
    HookRecorder(const CaptureSpec& capture, ForwardResult& result)
        : capture_(capture), result_(result) {}
    ~HookRecorder();  // the pool keeps only the buffers this forward took (model.hpp)
    HookRecorder(const HookRecorder&) = delete;
    HookRecorder& operator=(const HookRecorder&) = delete;
    void keep(HookPoint point, int64_t layer, const at::Tensor& t);
    bool wants(HookPoint point, int64_t layer) const;
    // A contiguous tensor of `sizes` in scratch slot `slot` (< kScratchSlots): a view of a buffer
    // that grows on demand and lives as long as the recorder. Its contents are undefined; a
    // later call with the same slot reuses the memory.
    static constexpr int kScratchSlots = 3;
    at::Tensor scratch(int slot, at::IntArrayRef sizes, const at::TensorOptions& options);
    // A contiguous tensor of `sizes` for a captured square, contents undefined: from the pool of
    // release_capture_buffers (model.hpp) when it is 32 MiB or more and a free buffer of the pool
    // fits, else fresh (on huge pages where large).
    at::Tensor capture_buffer(at::IntArrayRef sizes, const at::TensorOptions& options);

private:
    const CaptureSpec& capture_;
    ForwardResult& result_;
    at::Tensor scratch_[kScratchSlots];  // flat buffers
    std::vector<const void*> taken_;     // pool buffers (data pointers) this forward took
};

// Token ids moved to `device` as int64 [batch, pos]; UsageError when an id is outside
// [0, d_vocab) or the input is empty.
at::Tensor checked_ids(const ModelInput& input, int64_t d_vocab, const at::Device& device);

// InternalError unless `mask` (may be null) matches [n_layers, n_heads] and, for mean ablation,
// carries z_mean [n_layers, n_heads, d_head].
void check_head_mask(const HeadMask* mask, const ModelConfig& c);

// [query, key] bool on `device`, true = masked: j > i, and j <= i - window when window > 0.
at::Tensor causal_mask(int64_t n_tokens, int64_t window, const at::Device& device);

// A layer's mask as attend() reads it. `hidden`: bool, broadcastable to [batch, n_heads, query,
// key], true = masked (undefined: nothing masked). `causal`: hidden is causal_mask(T, window)
// (spec section 0: query i sees keys j <= i, and j > i - window when window > 0), so attend()
// computes only the keys a block of queries can see; the others have weight exactly 0.
struct AttentionMask {
    AttentionMask() = default;
    AttentionMask(at::Tensor h) : hidden(std::move(h)) {}  // a general mask (padding, none)
    AttentionMask(at::Tensor h, bool is_causal, int64_t w)
        : hidden(std::move(h)), causal(is_causal), window(w) {}
    at::Tensor hidden;
    bool causal = false;
    int64_t window = 0;
};
// [batch, 1, 1, key] bool, true = padding key; undefined when attention_mask is undefined.
at::Tensor padding_mask(const ModelInput& input, const at::Device& device);

// The blocks a forward runs (ModelInput::stage, model.hpp) resolved and checked: [begin, end)
// within [0, n_layers), and the residual handed in of shape [batch, n_tokens, d_model] (moved to
// `device` and `dtype`, which it must already have: a converted stream would not be the one the
// stage before computed). UsageError otherwise. Every family runs its embedding only when
// embeds(), blocks [begin, end), and its final norm and head only when ends_model(); else it
// returns hand_over(result, x).
struct Stage {
    Stage(const ModelInput& input, const ModelConfig& c, int64_t batch, int64_t n_tokens,
          at::ScalarType dtype, const at::Device& device);
    bool embeds() const { return begin == 0; }
    bool ends_model() const { return end == n_layers; }
    // The result of a stage that stops early: its stream `x` leaving block end - 1.
    static ForwardResult hand_over(ForwardResult result, const at::Tensor& x);
    int64_t begin = 0, end = 0, n_layers = 0;
    at::Tensor residual;  // begin > 0: the stream entering block `begin`
};

// HF rotate_half RoPE tables for the first `rot_dim` dims of a head: cos, sin [1, pos, 1, rot_dim]
// in `dtype` (inv_freq_i = theta^(-2i/rot_dim) in f32, as HF's rotary embedding, scaled by
// c.rope_scaling: rope_inv_freq in rope.hpp; YaRN multiplies cos and sin by its attention factor).
struct RopeTables {
    at::Tensor cos, sin;
    int64_t rot_dim = 0;
    // Rotates the first rot_dim dims of t [batch, pos, heads, d_head]; the rest pass through.
    at::Tensor apply(const at::Tensor& t) const;
};
RopeTables rope_tables(int64_t n_tokens, int64_t rot_dim, const ModelConfig& c,
                       at::ScalarType dtype, const at::Device& device);

// Query rows per block of attend(): bounds the [batch, H, block, key] temporaries, so a long
// input needs O(T) memory per layer beyond what it captures, and lets a causal block skip keys.
constexpr int64_t kQueryBlock = 256;

// Eager attention of one layer (spec section 0). q: [batch, pos, n_heads, d_head] (after RoPE),
// k, v: [batch, pos, n_kv_heads, d_head] (query head h reads kv head h / (n_heads/n_kv_heads)).
// Records hook_attn_scores (scaled, masked = -inf), hook_pattern (softmax in f32,
// then `dtype`) and hook_z (after the head mask); returns z [batch, pos, n_heads, d_head].
// Queries are processed in blocks of kQueryBlock rows; with a causal mask a block computes scores
// only against the keys it can see and writes -inf / 0 into the captured scores / pattern for
// the rest (same values as the full T x T computation up to float rounding of the softmax sum
// and of pattern x V, whose masked terms are exact zeros). The score scale is applied inside
// the score product. Under model::GradientScope the functional full-square path runs instead
// (out= operations record no gradients).
// `softcap` > 0 (Gemma-2) replaces each scaled score s by softcap * tanh(s / softcap) before the
// mask, so hook_attn_scores holds the capped scores.
at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const AttentionMask& hidden, double scale, int64_t layer, const HeadMask* mask,
                  at::ScalarType dtype, HookRecorder& hooks, double softcap = 0.0);

// The frame every causal decoder's forward shares (spec section 0): inference mode (unless
// gradients_recorded()), checked
// token ids, the head-mask check, no padding masks, the hook recorder, the causal (sliding-window
// when c.window > 0; per layer with c.window_layers: mask_of) mask, the score scale
// (c.score_scale()) and, when rot_dim > 0, RoPE tables of the
// first rot_dim dims of a head. The family runs its embedding and layers between construction and
// finish(). Not copyable: `hooks` writes into `result`.
struct DecoderFrame {
    DecoderFrame(const ModelInput& input, const CaptureSpec& capture, const HeadMask* mask,
                 const ModelConfig& c, int64_t rot_dim, at::ScalarType dtype,
                 const at::Device& device);
    DecoderFrame(const DecoderFrame&) = delete;
    DecoderFrame& operator=(const DecoderFrame&) = delete;

    // Records x_final [batch, pos, d_model] as hook_ln_final.hook_normalized and the logits
    // [batch, pos, d_vocab] in f32 (undefined: not wanted); hands the result out.
    ForwardResult finish(const at::Tensor& x_final, const at::Tensor& logits);
    // A stage ending early (!stage.ends_model()): hands out its stream x.
    ForwardResult hand_over(const at::Tensor& x) { return Stage::hand_over(std::move(result), x); }
    // The RoPE tables, or null when the family has learned positions (rot_dim 0).
    const RopeTables* rope_or_null() const { return rope.rot_dim > 0 ? &rope : nullptr; }

    c10::InferenceMode guard{!gradients_recorded()};
    at::Tensor ids;  // [batch, pos] int64 on the device
    int64_t n_tokens = 0;
    Stage stage;              // the blocks to run
    bool want_logits = true;  // capture.wants_logits(): run the language-model head
    ForwardResult result;
    HookRecorder hooks;         // bound to `capture` (outlives the frame) and `result`
    RopeTables rope;            // rot_dim 0: none
    AttentionMask hidden;       // [query, key] causal, the window applied
    AttentionMask hidden_full;  // causal without window; defined when c.window_layers is not empty
    std::vector<int64_t> window_layers;
    double scale = 1.0;  // c.score_scale()
    // The mask of `layer`: `hidden`, or hidden_full on layers outside c.window_layers.
    const AttentionMask& mask_of(int64_t layer) const;
};

// ---- Weights: every family reads its tensors through WeightLoader ----

// A weight matrix or table of the forward (issue 47). On the CPU, a tensor whose file bytes are
// narrower than its compute-dtype copy would be (bf16 or f16 under a float32 / float64 model,
// GGML quantized blocks under any) stays in the file's mapped pages and is widened at each use:
// use() runs exactly the conversion the load would have run (file bytes -> float32, the layout
// change, the compute dtype) into a tensor that lives while the caller holds it. The widened
// values are a function of the file's bytes alone, so a forward computes with the very values a
// model widened at load holds, and every result is the same bit for bit (no error bound to
// state: the arithmetic is unchanged). Memory: the file's pages (shared, reclaimable) plus one
// widened matrix at a time. A file tensor of the compute dtype itself is used where it lies (as
// float32 files under float32, WeightLoader::read); every other weight is held in the compute
// dtype (a plain tensor).
class Weight {
public:
    Weight() = default;
    Weight(at::Tensor wide) : wide_(std::move(wide)) {}  // already in the compute dtype
    // Held in the file's pages (WeightLoader::stored_weight).
    struct Stored;
    explicit Weight(std::shared_ptr<const Stored> stored) : stored_(std::move(stored)) {}

    bool defined() const { return wide_.defined() || stored_ != nullptr; }
    // The weight in the compute dtype: the held tensor, or a freshly widened copy.
    at::Tensor use() const;
    // at::embedding(use(), ids) without widening the whole table: only rows `ids` (int64, any
    // shape, each in range) are widened; the same values bit for bit.
    at::Tensor rows(const at::Tensor& ids) const;
    // Rows [first, first + n) in the compute dtype: a view of the held tensor, or only those
    // rows widened (the values use() gives them, bit for bit).
    at::Tensor row_block(int64_t first, int64_t n) const;
    int64_t n_rows() const;
    // A persistent compute-dtype tensor (Transformer::parameters(): gradients and training need
    // tensors that stay): a deferred weight is widened once, kept, and used from then on, so a
    // model whose parameters were asked for holds them widened, as a model widened at load.
    // Thread-safe (forwards on other threads may be reading the weight).
    at::Tensor param() const;

private:
    at::Tensor wide_;
    std::shared_ptr<const Stored> stored_;
};

// Reads a family's tensors by role (registry tensor names of src.format), checks their shapes,
// moves them to the compute device and dtype, and counts the parameters it hands out. What the
// formats store differently from the HF layout is undone here, in one place:
// * HF checkpoints saved from the base model lack the head model's name prefix, and checkpoints
//   converted from TF BERT name LayerNorm parameters gamma / beta (name()).
// * RoPE convention: sinkscope computes in the HF layout (rotate_half: dimension i pairs with
//   i + d_head/2). llama.cpp's convert_hf_to_gguf.py permutes the rows of Q and K of each head
//   for llama.cpp's interleaved RoPE (pairs 2i, 2i+1):
//       w.reshape(n_head, 2, d_head/2, d_in).swapaxes(1, 2).reshape(w.shape)
//   so GGUF row 2i + t of a head is HF row t * d_head/2 + i. llama2.c checkpoints (run.c rotates
//   pairs 2i, 2i+1) use the same interleaved layout. host_rope_rows() undoes the permutation:
//       w.reshape(n_head, d_head/2, 2, d_in).swapaxes(1, 2)
//   which makes hook_q/hook_k identical across formats and q.k unchanged (a permutation applied
//   to both q and k leaves their dot product unchanged), so attention is the same either way.
// * GPT-2's HF Conv1D weights are [in, out]; GGUF stores them [out, in] (host_linear()).
// * Fused q/k/v: HF GPT-NeoX interleaves the rows per head, GGUF (convert_hf_to_gguf.py) and
//   GPT-2 store [all q; all k; all v]; host_qkv() returns the latter from every format.
// Float32 tensors that reach a CPU float32 model unchanged are not copied (issue 19): they are
// views of the weight file's read-only mapping (the view keeps it mapped), so a model's weights
// are never written in place (training builds its model from an in-memory store, whose tensors
// are copies). Everything else (conversions, layout changes, other devices and dtypes) is a copy.
class WeightLoader {
public:
    WeightLoader(const ModelConfig& c, const WeightSource& src, const RuntimeOptions& rt);
    // Name of `role` in the store: the registry name, or for HF weights the first present of its
    // fallbacks (see name_candidates in family_common.cpp); "" when the format has no such role.
    std::string name(TensorRole role, int64_t layer = -1) const;
    // True when the role has a name and the store holds it.
    bool has(TensorRole role, int64_t layer = -1) const;
    // Host f32 copy of `role`, shape-checked (for layout changes before to_device; not counted).
    at::Tensor host(TensorRole role, int64_t layer, const std::vector<int64_t>& shape) const {
        return read(role, layer, shape, /*kept=*/false);
    }
    // True when the format stores Q/K rows interleaved per head (GGUF of an architecture with
    // ArchitectureInfo::gguf_qk_interleaved, llama2.c).
    bool qk_interleaved() const;
    // Q or K weight `role` [n_head * d_head, d_in] as host f32 in the HF rotate_half row order,
    // whatever order the format stores (not counted).
    at::Tensor host_rope_rows(TensorRole role, int64_t layer, int64_t n_head, int64_t d_head,
                              int64_t d_in) const;
    // Linear weight `role` [n_out, n_in] as host f32, whatever the format stores: HF Conv1D
    // weights of ArchitectureInfo::hf_conv1d architectures are [n_in, n_out] and transposed here
    // (llama.cpp's converter writes them as [n_out, n_in] rows already). Not counted. `kept`:
    // the caller hands the result to to_device unchanged (it may then be a view of the file).
    at::Tensor host_linear(TensorRole role, int64_t layer, int64_t n_out, int64_t n_in,
                           bool kept = true) const;
    // to_device(host_linear(...)) as a Weight (weight() unless a transposed Conv1D); counted.
    Weight linear_weight(TensorRole role, int64_t layer, int64_t n_out, int64_t n_in);
    // Fused q/k/v weight (AttnQKV: [3 * n_heads * d_head, d_in]) or bias (AttnQKVBias, d_in 0:
    // [3 * n_heads * d_head]) as host f32 with rows [all q; all k; all v], head h at rows
    // h * d_head .. of its part. HF GPT-NeoX groups them per head ([head][q|k|v][d_head],
    // ArchitectureInfo::hf_qkv_per_head); GPT-2 and every GGUF store the q|k|v order. Not counted.
    at::Tensor host_qkv(TensorRole role, int64_t layer, int64_t n_heads, int64_t d_head,
                        int64_t d_in) const;
    // Host f32 -> device, compute dtype, contiguous; counted in n_params().
    at::Tensor to_device(const at::Tensor& host_f32);
    at::Tensor get(TensorRole role, int64_t layer, const std::vector<int64_t>& shape) {
        return to_device(read(role, layer, shape, /*kept=*/true));
    }
    // As get(), as a Weight: held in the file's pages and widened at use when the file's bytes
    // are narrower than the compute dtype on a CPU model (Weight), else get(). Counted.
    Weight weight(TensorRole role, int64_t layer, const std::vector<int64_t>& shape);
    // As to_device(host_rope_rows(...)), as a Weight (the row order is undone at each use).
    Weight rope_rows_weight(TensorRole role, int64_t layer, int64_t n_head, int64_t d_head,
                            int64_t d_in);
    // The consecutive row parts of `sizes` rows of a fused matrix `role` of `shape` (Phi-3
    // qkv_proj and gate_up_proj), as Weights; counted.
    std::vector<Weight> split_rows(TensorRole role, int64_t layer,
                                   const std::vector<int64_t>& shape,
                                   const std::vector<int64_t>& sizes);
    // q, k and v of a fused AttnQKV weight (host_qkv's rows), as Weights; counted.
    std::vector<Weight> qkv_parts(TensorRole role, int64_t layer, int64_t n_heads, int64_t d_head,
                                  int64_t d_in);
    int64_t n_params() const { return n_params_; }
    at::ScalarType dtype() const { return dtype_; }
    const at::Device& device() const { return device_; }

private:
    // `role` as host f32; `kept`: it goes to to_device unchanged, so on a CPU float32 model a
    // float32 tensor of a mapped file is used in place.
    at::Tensor read(TensorRole role, int64_t layer, const std::vector<int64_t>& shape,
                    bool kept) const;

    const ArchitectureInfo& arch_;
    const WeightSource& src_;
    at::ScalarType dtype_;
    at::Device device_;
    // True when `role` of `shape` stays in the file's pages (a CPU model, widen_at_load unset,
    // tensor_load.hpp stays_in_file).
    bool defer(TensorRole role, int64_t layer, const std::vector<int64_t>& shape) const;
    // `role` of `shape` [n, d] kept in the file's pages: rows `rows` of it (empty: all, in
    // order), counted; `first_part`: the first Weight made of this tensor (tallied once).
    Weight stored_weight(TensorRole role, int64_t layer, const std::vector<int64_t>& shape,
                         std::vector<int64_t> rows, bool first_part = true);

    bool cpu_;  // the model runs on the CPU (device_ is the meta device in metadata-only builds)
    bool widen_at_load_;  // RuntimeOptions::widen_at_load
    int64_t n_params_ = 0;
    // Metadata-only builds: the tensors read() returned that a CPU float32 build would keep in
    // the file's pages (to_device counts them and their contiguous views as in place).
    mutable std::vector<at::Tensor> in_place_;
};

// ---- Building blocks of the LayerNorm families (GPT-2, GPT-NeoX, Phi, BERT, ViT) ----

// at::linear(x, w.use(), b) (x [..., n_in], w [n_out, n_in], b [n_out] or undefined) with the
// output features in blocks of kLinearBlockRows weight rows: each block is one product
// x w[rows]^T on one thread, the blocks spread over forward_workers() threads (model.hpp), so a
// value does not depend on the thread count. A stored weight (Weight) is widened a block at a
// time, on the thread that multiplies it. While gradients are recorded, or off the CPU, the
// blocks run one after the other on the calling thread (the same values on the CPU).
constexpr int64_t kLinearBlockRows = 512;
at::Tensor linear(const at::Tensor& x, const Weight& w, const at::Tensor& b = {});

struct Linear {
    Weight w;
    at::Tensor b;
    at::Tensor operator()(const at::Tensor& x) const { return linear(x, w, b); }
};
// Linear weights of roles (w_role, b_role) of `layer`; no b_role: no bias.
Linear load_linear(WeightLoader& ld, TensorRole w_role, std::optional<TensorRole> b_role,
                   int64_t layer, int64_t n_out, int64_t n_in);

// LayerNorm with weight and bias, both [d_model] (HF nn.LayerNorm, in the compute dtype).
struct LayerNorm {
    at::Tensor w, b;
    double eps = 1e-5;
    at::Tensor operator()(const at::Tensor& x) const;  // x: [..., d_model]
};
LayerNorm load_layer_norm(WeightLoader& ld, TensorRole w_role, TensorRole b_role, int64_t layer,
                          int64_t d, double eps);

// RMS normalisation of the last dim in accum_type (f32), as HF's Llama / Gemma / Phi-3 RMSNorm
// compute it: x * rsqrt(mean(x^2) + eps) with x cast to f32 (the family applies its weight after).
at::Tensor rms_normalized(const at::Tensor& x, double eps);

// Elementwise activation of an MLP (Silu, GeluTanh = HF gelu_new, Gelu = exact erf).
at::Tensor activate(const at::Tensor& x, Activation act);

// Two-layer MLP: down(act(up(x))) (GPT-2 c_fc/c_proj, NeoX dense_h_to_4h/4h_to_h, Phi fc1/fc2).
struct Mlp {
    Linear up;    // [d_mlp, d_model]
    Linear down;  // [d_model, d_mlp]
    Activation act = Activation::Gelu;
    at::Tensor operator()(const at::Tensor& x) const { return down(activate(up(x), act)); }
};

// Separate q/k/v/output projections of one attention layer (fused layouts are split on load).
struct AttentionWeights {
    Linear q;     // [n_heads * d_head, d_model]
    Linear k, v;  // [n_kv_heads * d_head, d_model]
    Linear o;     // [d_model, n_heads * d_head]
};

// Builds a family's Transformer::parameters() list; undefined tensors (absent biases) are skipped.
struct ParameterList {
    std::vector<Parameter> items;
    void add(TensorRole role, int64_t layer, const at::Tensor& t) {
        if (t.defined()) items.push_back(Parameter{role, layer, t});
    }
    void add(TensorRole role, int64_t layer, const Weight& w) {
        if (w.defined()) items.push_back(Parameter{role, layer, w.param()});
    }
    void add(const Linear& lin, TensorRole w_role, TensorRole b_role, int64_t layer) {
        add(w_role, layer, lin.w);
        add(b_role, layer, lin.b);
    }
    void add(const LayerNorm& n, TensorRole w_role, TensorRole b_role, int64_t layer) {
        add(w_role, layer, n.w);
        add(b_role, layer, n.b);
    }
    // q, k, v, o weights and their biases.
    void add(const AttentionWeights& a, int64_t layer) {
        add(a.q, TensorRole::AttnQ, TensorRole::AttnQBias, layer);
        add(a.k, TensorRole::AttnK, TensorRole::AttnKBias, layer);
        add(a.v, TensorRole::AttnV, TensorRole::AttnVBias, layer);
        add(a.o, TensorRole::AttnO, TensorRole::AttnOBias, layer);
    }
};

// One attention sub-block on normalised input h [batch, pos, d_model]: projections, hook_q/k/v,
// RoPE on the first rope->rot_dim dims (rope null: no rotation, hook_rot_q/k = hook_q/k), attend()
// with scale `scale` and mask `hidden`, output projection. Returns [batch, pos, d_model].
at::Tensor self_attention(const at::Tensor& h, const AttentionWeights& w, const ModelConfig& c,
                          const RopeTables* rope, const AttentionMask& hidden, double scale,
                          int64_t layer, const HeadMask* mask, at::ScalarType dtype,
                          HookRecorder& hooks);

}  // namespace sinkscope::model::detail
