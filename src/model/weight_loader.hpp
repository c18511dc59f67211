// Internal (model families): the weights of a forward (Weight: held, or widened from the file's
// pages at each use) and the loader every family reads its tensors through.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"

namespace sinkscope::model::detail {

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

// The tensors a family's forward uses, by role and layer, in the order the family loaded them
// (WeightLoader records them as it hands them out): Transformer::parameters() is this list
// (gradients, training and Fisher's grouping by role read it), so a family states each tensor
// once, where it loads it. A tied output lists the embedding's tensor again under its own role.
class TensorTable {
public:
    void add(TensorRole role, int64_t layer, const Weight& w) {
        if (w.defined()) entries_.push_back({role, layer, w});
    }
    // Parameter::tensor is Weight::param(): a weight kept in the file's pages is widened once.
    std::vector<Parameter> parameters() const;

private:
    struct Entry {
        TensorRole role;
        int64_t layer;
        Weight weight;
    };
    std::vector<Entry> entries_;
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
    // Host f32 -> device, compute dtype, contiguous; counted in n_params(). Not recorded.
    at::Tensor to_device(const at::Tensor& host_f32);
    // What get(), weight(), rope_rows_weight(), linear_weight() and split_rows() hand out is
    // recorded in tensors() under its role (weight(): under `as` when given), in call order;
    // what a family makes itself from host*(), to_device() or qkv_parts() (norm scales, fused
    // parts, a tied output) it records with record().
    at::Tensor get(TensorRole role, int64_t layer, const std::vector<int64_t>& shape) {
        at::Tensor t = to_device(read(role, layer, shape, /*kept=*/true));
        record(role, layer, t);
        return t;
    }
    // As get(), as a Weight: held in the file's pages and widened at use when the file's bytes
    // are narrower than the compute dtype on a CPU model (Weight), else get(). Counted.
    Weight weight(TensorRole role, int64_t layer, const std::vector<int64_t>& shape,
                  std::optional<TensorRole> as = std::nullopt);
    // As to_device(host_rope_rows(...)), as a Weight (the row order is undone at each use).
    Weight rope_rows_weight(TensorRole role, int64_t layer, int64_t n_head, int64_t d_head,
                            int64_t d_in);
    // The consecutive row parts of `sizes` rows of a fused matrix `role` of `shape` (Phi-3
    // qkv_proj and gate_up_proj), as Weights; counted, recorded under `part_roles`.
    std::vector<Weight> split_rows(TensorRole role, int64_t layer,
                                   const std::vector<int64_t>& shape,
                                   const std::vector<int64_t>& sizes,
                                   const std::vector<TensorRole>& part_roles);
    // q, k and v of a fused AttnQKV weight (host_qkv's rows), as Weights; counted, not recorded
    // (GPT-2 and GPT-NeoX list each part with its bias part).
    std::vector<Weight> qkv_parts(TensorRole role, int64_t layer, int64_t n_heads, int64_t d_head,
                                  int64_t d_in);
    int64_t n_params() const { return n_params_; }
    void record(TensorRole role, int64_t layer, const Weight& w) { tensors_.add(role, layer, w); }
    // The recorded tensors (Transformer::parameters()); call once, at the end of the load.
    TensorTable take_tensors() { return std::move(tensors_); }
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

    // The file rows of Q/K rows in the HF rotate_half order (host_rope_rows), per head.
    static std::vector<int64_t> interleaved_rope_rows(int64_t n_head, int64_t d_head);
    // weight() without recording.
    Weight unrecorded_weight(TensorRole role, int64_t layer, const std::vector<int64_t>& shape);

    TensorTable tensors_;
    bool cpu_;  // the model runs on the CPU (device_ is the meta device in metadata-only builds)
    bool widen_at_load_;  // RuntimeOptions::widen_at_load
    int64_t n_params_ = 0;
    // Metadata-only builds: the tensors read() returned that a CPU float32 build would keep in
    // the file's pages (to_device counts them and their contiguous views as in place).
    mutable std::vector<at::Tensor> in_place_;
};

}  // namespace sinkscope::model::detail
