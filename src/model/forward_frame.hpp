// Internal (model families): what every forward checks and sets up before its blocks run: the
// input checks, the blocks to run (Stage, a pipeline stage) and the causal decoders' frame.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/InferenceMode.h>

#include "attention_core.hpp"
#include "hook_recorder.hpp"
#include "sinkscope/model/model.hpp"

namespace sinkscope::model::detail {

// Token ids moved to `device` as int64 [batch, pos]; UsageError when an id is outside
// [0, d_vocab) or the input is empty.
at::Tensor checked_ids(const ModelInput& input, int64_t d_vocab, const at::Device& device);

// Causal decoders take right padding (model.hpp ModelInput::attention_mask): each row 1 for its
// real tokens, then 0 for its pads, at least one real token; UsageError otherwise. A real token
// never sees a later position, so its activations equal those of the sequence alone; what the
// pads' positions hold is not defined.
void check_right_padding(const at::Tensor& attention_mask, int64_t batch, int64_t n_tokens);

// InternalError unless `mask` (may be null) matches [n_layers, n_heads] and, for mean ablation,
// carries z_mean [n_layers, n_heads, d_head].
void check_head_mask(const HeadMask* mask, const ModelConfig& c);

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

    // x_final [batch, pos, d_model] through ln_final.hook_normalized (kept, edited): what the
    // unembedding reads.
    at::Tensor final_norm(const at::Tensor& x_final) {
        return hooks.keep(HookPoint::FinalNorm, -1, x_final);
    }
    // Records the logits [batch, pos, d_vocab] in f32 (undefined: not wanted); hands the result
    // out.
    ForwardResult finish(const at::Tensor& logits);
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
    // mask_of(layer) with the layer's kv slot k, v [n_kv_heads * d_head] (undefined: none).
    AttentionMask slot_mask(int64_t layer, const at::Tensor& k, const at::Tensor& v) const {
        return mask_of(layer).with_slot(k, v, d_head);
    }
    int64_t d_head = 0;  // c.d_head
};

}  // namespace sinkscope::model::detail
