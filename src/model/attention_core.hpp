// Internal (model families): masks, RoPE tables and the eager attention core of one layer
// (spec section 0).
#pragma once

#include <cstdint>
#include <utility>

#include <ATen/core/Tensor.h>

#include "hook_recorder.hpp"
#include "sinkscope/model/model.hpp"

namespace sinkscope::model::detail {

// [query, key] bool on `device`, true = masked: j > i, and j <= i - window when window > 0.
at::Tensor causal_mask(int64_t n_tokens, int64_t window, const at::Device& device);

// A layer's mask as attend() reads it. `hidden`: bool, broadcastable to [batch, n_heads, query,
// key], true = masked (undefined: nothing masked). `causal`: hidden is causal_mask(T, window)
// (spec section 0: query i sees keys j <= i, and j > i - window when window > 0), so attend()
// computes only the keys a block of queries can see; the others have weight exactly 0.
// `function`: how attend() turns a row of scores into weights (ModelConfig::attention; the
// decoders' frame sets it from the config, every other caller keeps softmax).
struct AttentionMask {
    AttentionMask() = default;
    AttentionMask(at::Tensor h) : hidden(std::move(h)) {}  // a general mask (padding, none)
    AttentionMask(at::Tensor h, bool is_causal, int64_t w,
                  AttentionFunction f = AttentionFunction::Softmax)
        : hidden(std::move(h)), causal(is_causal), window(w), function(f) {}
    at::Tensor hidden;
    bool causal = false;
    int64_t window = 0;
    AttentionFunction function = AttentionFunction::Softmax;
    // The layer's key/value slot (ModelConfig::kv_slot): k*, v* [n_kv_heads, d_head] in the
    // compute dtype, an extra key and value every query sees (undefined: none; softmax only).
    at::Tensor slot_key, slot_value;
    bool has_slot() const { return slot_key.defined(); }
    // This mask with the slot of one layer, k and v [n_kv_heads * d_head] as stored (viewed
    // [n_kv_heads, d_head] here, inside the forward, so that gradients reach them); undefined k:
    // this mask as it is.
    AttentionMask with_slot(const at::Tensor& k, const at::Tensor& v, int64_t d_head) const {
        AttentionMask m = *this;
        if (k.defined()) {
            m.slot_key = k.view({-1, d_head});
            m.slot_value = v.view({-1, d_head});
        }
        return m;
    }
};

// [.., key] weights in `dtype` of scores s [.., key] (scaled, soft-capped, masked = -inf) under
// `f`, computed in accum_type(dtype) (spec section 0): softmax; softmax_one = exp(s_j - m) /
// (exp(-m) + sum_k exp(s_k - m)) with m = max(0, max_k s_k), so no exponent overflows and a
// masked key's weight is exactly 0; sigmoid = 1 / (1 + exp(-s_j)) per key (masked: exactly 0).
at::Tensor attention_weights(const at::Tensor& s, AttentionFunction f, at::ScalarType dtype);
// Softmax over the keys of s [.., key] and one more key of logit `slot` [.., 1] (the kv slot):
// exp(s_j - m) / (exp(c - m) + sum_k exp(s_k - m)) and exp(c - m) / (the same), with
// m = max(c, max_k s_k), in accum_type(dtype), then `dtype` (masked keys: exactly 0).
struct SlotWeights {
    at::Tensor keys;  // [.., key]
    at::Tensor slot;  // [.., 1]
};
SlotWeights slot_softmax(const at::Tensor& s, const at::Tensor& slot, at::ScalarType dtype);
// [batch, 1, 1, key] bool, true = padding key; undefined when attention_mask is undefined.
at::Tensor padding_mask(const ModelInput& input, const at::Device& device);

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
// Records hook_attn_scores (scaled, masked = -inf), hook_pattern (the mask's function of the
// scores, softmax by default, in f32, then `dtype`; rows of the other functions do not sum to 1)
// and hook_z (after the head mask); returns z [batch, pos, n_heads, d_head].
// Queries are processed in blocks of kQueryBlock rows; with a causal mask a block computes scores
// only against the keys it can see and writes -inf / 0 into the captured scores / pattern for
// the rest (same values as the full T x T computation up to float rounding of the softmax sum
// and of pattern x V, whose masked terms are exact zeros). With a kv slot (hidden.has_slot())
// every row also sees k*: the pattern holds the tokens' weights (rows sum to 1 less the slot's
// weight; a pattern edit leaves the slot's weight as the scores gave it) and z adds the slot's
// weight times v*. The score scale is applied inside
// the score product. Under model::GradientScope the functional full-square path runs instead
// (out= operations record no gradients).
// `softcap` > 0 (Gemma-2) replaces each scaled score s by softcap * tanh(s / softcap) before the
// mask, so hook_attn_scores holds the capped scores.
at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const AttentionMask& hidden, double scale, int64_t layer, const HeadMask* mask,
                  at::ScalarType dtype, HookRecorder& hooks, double softcap = 0.0);

}  // namespace sinkscope::model::detail
