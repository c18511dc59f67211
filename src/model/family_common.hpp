// Internal: the pieces every family file shares: hook recording, input checks, masks and the
// eager attention core (spec section 0), so that each family file only says what differs.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "sinkscope/model/model.hpp"

namespace sinkscope::model::detail {

// Keeps the hooks a CaptureSpec selects in a ForwardResult.
class HookRecorder {
public:
    HookRecorder(const CaptureSpec& capture, ForwardResult& result)
        : capture_(capture), result_(result) {}
    void keep(HookPoint point, int64_t layer, const at::Tensor& t);
    bool wants(HookPoint point, int64_t layer) const;

private:
    const CaptureSpec& capture_;
    ForwardResult& result_;
};

// Token ids moved to `device` as int64 [batch, pos]; UsageError when an id is outside
// [0, d_vocab) or the input is empty.
at::Tensor checked_ids(const ModelInput& input, int64_t d_vocab, const at::Device& device);

// InternalError unless `mask` (may be null) matches [n_layers, n_heads] and, for mean ablation,
// carries z_mean [n_layers, n_heads, d_head].
void check_head_mask(const HeadMask* mask, const ModelConfig& c);

// [query, key] bool on `device`, true = masked: j > i, and j <= i - window when window > 0.
at::Tensor causal_mask(int64_t n_tokens, int64_t window, const at::Device& device);
// [batch, 1, 1, key] bool, true = padding key; undefined when attention_mask is undefined.
at::Tensor padding_mask(const ModelInput& input, const at::Device& device);

// HF rotate_half RoPE tables for the first `rot_dim` dims of a head: cos, sin [1, pos, 1, rot_dim]
// in `dtype` (inv_freq_i = theta^(-2i/rot_dim) in f32, as HF's rotary embedding).
struct RopeTables {
    at::Tensor cos, sin;
    int64_t rot_dim = 0;
    // Rotates the first rot_dim dims of t [batch, pos, heads, d_head]; the rest pass through.
    at::Tensor apply(const at::Tensor& t) const;
};
RopeTables rope_tables(int64_t n_tokens, int64_t rot_dim, double theta, at::ScalarType dtype,
                       const at::Device& device);

// Query rows per block when attention runs without keeping scores or pattern.
constexpr int64_t kQueryBlock = 256;

// Eager attention of one layer (spec section 0). q: [batch, pos, n_heads, d_head] (after RoPE),
// k, v: [batch, pos, n_kv_heads, d_head] (query head h reads kv head h / (n_heads/n_kv_heads)).
// `hidden` is a bool mask broadcastable to [batch, n_heads, query, key], true = masked (undefined:
// nothing masked). Records hook_attn_scores (scaled, masked = -inf), hook_pattern (softmax in f32,
// then `dtype`) and hook_z (after the head mask); returns z [batch, pos, n_heads, d_head].
// When neither scores nor pattern is captured, inputs longer than kQueryBlock are processed in
// query blocks (same values up to float rounding, O(T) instead of O(T^2) temporaries).
at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const at::Tensor& hidden, double scale, int64_t layer, const HeadMask* mask,
                  at::ScalarType dtype, HookRecorder& hooks);

}  // namespace sinkscope::model::detail
