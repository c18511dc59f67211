// Input checks, pipeline stages and the decoders' frame (forward_frame.hpp).
#include "forward_frame.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "rope.hpp"
#include "sinkscope/core/allocator.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/parallel.hpp"
#include "sinkscope/io/weights.hpp"
#include "sinkscope/model/footprint.hpp"
#include "tensor_load.hpp"

namespace sinkscope::model::detail {

at::Tensor checked_ids(const ModelInput& input, int64_t d_vocab, const at::Device& device) {
    SS_CHECK(input.ids.defined(), "a text model needs token ids");
    SS_CHECK(input.ids.dim() == 2, "token ids must be [batch, pos], got rank ", input.ids.dim());
    const at::Tensor ids = input.ids.to(device, at::kLong);  // [batch, pos]
    if (ids.size(1) == 0) throw UsageError("empty token sequence");
    const int64_t id_min = ids.min().item<int64_t>(), id_max = ids.max().item<int64_t>();
    if (id_min < 0 || id_max >= d_vocab)
        throw UsageError("token id " + std::to_string(id_min < 0 ? id_min : id_max) +
                         " is outside the vocabulary [0, " + std::to_string(d_vocab) + ")");
    return ids;
}

void check_right_padding(const at::Tensor& attention_mask, int64_t batch, int64_t n_tokens) {
    if (!attention_mask.defined()) return;
    if (attention_mask.dim() != 2 || attention_mask.size(0) != batch ||
        attention_mask.size(1) != n_tokens)
        throw UsageError("the padding mask must be [batch, pos] = [" + std::to_string(batch) +
                         ", " + std::to_string(n_tokens) + "]");
    const at::Tensor m = attention_mask.to(at::kCPU, at::kLong).contiguous();  // [batch, pos]
    const int64_t* p = m.data_ptr<int64_t>();
    for (int64_t b = 0; b < batch; ++b) {
        const int64_t* row = p + b * n_tokens;
        int64_t real = 0;
        while (real < n_tokens && row[real] == 1) ++real;
        for (int64_t t = real; t < n_tokens; ++t)
            if (row[t] != 0)
                throw UsageError("padding mask row " + std::to_string(b) +
                                 ": a causal model takes right padding (1 for each real token, "
                                 "then 0 for each pad), got " +
                                 std::to_string(row[t]) + " at position " + std::to_string(t));
        if (real == 0)
            throw UsageError("padding mask row " + std::to_string(b) + " has no real token");
    }
}

void check_head_mask(const HeadMask* mask, const ModelConfig& c) {
    if (!mask) return;
    SS_CHECK(mask->n_layers == c.n_layers && mask->n_heads == c.n_heads, "head mask shape");
    if (mask->kind == HeadMask::Kind::Mean)
        SS_CHECK(mask->z_mean.defined() &&
                     mask->z_mean.sizes() == at::IntArrayRef({c.n_layers, c.n_heads, c.d_head}),
                 "mean ablation needs z_mean [n_layers, n_heads, d_head]");
}

DecoderFrame::DecoderFrame(const ModelInput& input, const CaptureSpec& capture,
                           const HeadMask* mask, const ModelConfig& c, int64_t rot_dim,
                           at::ScalarType dtype, const at::Device& device)
    : ids(checked_ids(input, c.d_vocab, device)),
      n_tokens(ids.size(1)),
      stage(input, c, ids.size(0), n_tokens, dtype, device),
      want_logits(capture.wants_logits()),
      hooks(capture, result) {
    check_head_mask(mask, c);
    check_right_padding(input.attention_mask, ids.size(0), n_tokens);
    if (rot_dim > 0) rope = rope_tables(n_tokens, rot_dim, c, dtype, device);
    hidden = AttentionMask(causal_mask(n_tokens, c.window, device), true, c.window, c.attention);
    if (c.window > 0 && !c.window_layers.empty()) {
        hidden_full = AttentionMask(causal_mask(n_tokens, 0, device), true, 0, c.attention);
        window_layers = c.window_layers;
    }
    scale = c.score_scale();
    d_head = c.d_head;
}

Stage::Stage(const ModelInput& input, const ModelConfig& c, int64_t batch, int64_t n_tokens,
             at::ScalarType dtype, const at::Device& device)
    : begin(input.stage.begin),
      end(input.stage.end < 0 ? c.n_layers : input.stage.end),
      n_layers(c.n_layers) {
    if (begin < 0 || begin >= end || end > c.n_layers)
        throw UsageError("layer range [" + std::to_string(input.stage.begin) + ", " +
                         std::to_string(input.stage.end) + ") is not a non-empty range of the " +
                         std::to_string(c.n_layers) + " blocks");
    if (begin == 0) return;
    const at::Tensor& r = input.stage.residual;
    if (!r.defined() || r.dim() != 3 || r.size(0) != batch || r.size(1) != n_tokens ||
        r.size(2) != c.d_model || r.scalar_type() != dtype)
        throw UsageError("a stage starting at block " + std::to_string(begin) +
                         " needs the residual stream entering it: [" + std::to_string(batch) +
                         ", " + std::to_string(n_tokens) + ", " + std::to_string(c.d_model) +
                         "] in the model's compute dtype");
    residual = r.to(device);
}

ForwardResult Stage::hand_over(ForwardResult result, const at::Tensor& x) {
    result.residual = x;
    return result;
}

const AttentionMask& DecoderFrame::mask_of(int64_t layer) const {
    if (!hidden_full.hidden.defined() ||
        std::binary_search(window_layers.begin(), window_layers.end(), layer))
        return hidden;
    return hidden_full;
}

ForwardResult DecoderFrame::finish(const at::Tensor& logits) {
    if (logits.defined()) result.logits = logits.to(accum_type(logits.scalar_type()));
    return std::move(result);
}

}  // namespace sinkscope::model::detail
