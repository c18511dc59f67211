// LazyAttention: row blocks of one head recomputed from rotated q and k, kept in a FIFO cache.
#include "sinkscope/analysis/lazy_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "sinkscope/analysis/capture.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/hooks.hpp"

namespace sinkscope::analysis {

LazyAttention::LazyAttention(model::ForwardResult& result, const model::ModelConfig& config,
                             const std::vector<int64_t>& layers)
    : config_(config), layers_(layers_or_all(config, layers)) {
    using model::HookPoint;
    for (int64_t l : layers_) {
        auto q = result.captured.find(model::hook_name(HookPoint::RotQ, l));
        auto k = result.captured.find(model::hook_name(HookPoint::RotK, l));
        SS_CHECK(q != result.captured.end() && k != result.captured.end(),
                 "LazyAttention needs hook_rot_q and hook_rot_k of layer ", l);
        q_.push_back(q->second[0].to(at::kFloat).contiguous());  // [T, H, d_head]
        k_.push_back(k->second[0].to(at::kFloat).contiguous());  // [T, H_kv, d_head]
        result.captured.erase(q);
        result.captured.erase(k);
    }
    n_tokens_ = q_.front().size(0);
    n_blocks_ = (n_tokens_ + kRowsPerBlock - 1) / kRowsPerBlock;
    scale_ = config.score_scale();
    // Every head's block of the current rows stays cached while the next rows start (the head
    // metrics read row i of every head before row i + 1).
    const int64_t n_layers = static_cast<int64_t>(layers_.size());
    n_slots_ = std::max<int64_t>(64, 2 * n_layers * config.n_heads);
    slots_.resize(static_cast<size_t>(n_slots_));
    slot_of_.assign(static_cast<size_t>(n_layers * config.n_heads * n_blocks_), -1);
}

metrics::AttentionInput LazyAttention::input(const std::vector<int32_t>& token_ids) const {
    metrics::AttentionInput in = attention_shape(config_, n_tokens_, token_ids, layers_);
    in.source = this;
    return in;
}

const LazyAttention::Slot& LazyAttention::fetch(int64_t l, int64_t h, int64_t i) const {
    const int64_t block = i / kRowsPerBlock;
    const int64_t key = (l * config_.n_heads + h) * n_blocks_ + block;
    const int32_t found = slot_of_[static_cast<size_t>(key)];
    if (found >= 0) return slots_[static_cast<size_t>(found)];

    Slot& s = slots_[static_cast<size_t>(next_)];
    if (s.key >= 0) slot_of_[static_cast<size_t>(s.key)] = -1;
    s.key = key;
    slot_of_[static_cast<size_t>(key)] = static_cast<int32_t>(next_);
    next_ = (next_ + 1) % n_slots_;
    ++n_computed_;

    const int64_t i0 = block * kRowsPerBlock;
    s.pattern.resize(static_cast<size_t>(kRowsPerBlock * n_tokens_));
    s.scores.resize(static_cast<size_t>(kRowsPerBlock * n_tokens_));
    compute(l, h, i0, std::min(kRowsPerBlock, n_tokens_ - i0), s.pattern.data(), s.scores.data());
    return s;
}

void LazyAttention::drop_cache() const {
    // The slots' buffers (2 x 8 rows x T doubles each: 151 MB at T = 4096 on 144 heads) go back.
    std::vector<Slot>(static_cast<size_t>(n_slots_)).swap(slots_);
    std::fill(slot_of_.begin(), slot_of_.end(), -1);
    next_ = 0;
}

void LazyAttention::copy_rows(int64_t l, int64_t h, int64_t i0, int64_t i1, double* out) const {
    SS_CHECK(l >= 0 && l < static_cast<int64_t>(layers_.size()) && h >= 0 && h < config_.n_heads &&
                 i0 >= 0 && i0 <= i1 && i1 <= n_tokens_,
             "LazyAttention::copy_rows: layer ", l, " head ", h, " rows [", i0, ", ", i1, ")");
    for (int64_t b = i0; b < i1; b += kBulkRows) {
        const int64_t n = std::min(kBulkRows, i1 - b);
        compute(l, h, b, n, out + (b - i0) * n_tokens_, nullptr);
    }
}

void LazyAttention::compute(int64_t l, int64_t h, int64_t i0, int64_t n, double* pattern_out,
                            double* scores_out) const {
    c10::InferenceMode guard;
    const int64_t T = n_tokens_;
    // Causal rows i < i0 + n see no key at or past i0 + n: only keys [0, width) are computed,
    // the rest is written as the masked entries they are (probability 0, score -inf).
    const int64_t width = config_.causal ? i0 + n : T;
    const int64_t kv = h / (config_.n_heads / config_.n_kv_heads);
    const at::Tensor q = q_[static_cast<size_t>(l)].narrow(0, i0, n).select(1, h);  // [n, d_head]
    const at::Tensor k =
        k_[static_cast<size_t>(l)].narrow(0, 0, width).select(1, kv);  // [width, d_head]
    at::Tensor scores = at::matmul(q, k.transpose(0, 1)) * scale_;     // [n, width] f32
    // The model's attention: Gemma-2's soft-cap before the mask, its window on local layers only.
    if (config_.attn_softcap > 0)
        scores = at::tanh(scores / config_.attn_softcap) * config_.attn_softcap;
    const int64_t window = config_.layer_window(layers_[static_cast<size_t>(l)]);
    // Spec section 0 visibility: causal rows see j <= i (and j > i - window).
    const auto opt = at::TensorOptions().dtype(at::kLong).device(scores.device());
    if (config_.causal) {
        const at::Tensor qpos = at::arange(i0, i0 + n, opt).unsqueeze(1);
        const at::Tensor kpos = at::arange(width, opt).unsqueeze(0);
        at::Tensor hidden = kpos > qpos;  // [n, width]
        if (window > 0) hidden = hidden.logical_or(kpos <= qpos - window);
        scores.masked_fill_(hidden, -std::numeric_limits<double>::infinity());
    }
    const at::Tensor pattern = at::softmax(scores, -1, at::kFloat);  // [n, width]
    // The RowSource contract: finite probabilities (a row of NaN or infinite scores, or with no
    // visible key, gives NaN here), so the analyses need not check recomputed rows again.
    SS_CHECK_INPUT(at::isfinite(pattern).all().item<bool>(), "attention",
                   "the recomputed attention of layer ", l, " head ", h, " rows ", i0, "..",
                   i0 + n - 1, " is not finite (NaN or infinite scores in the forward)");
    // Converted to f64 straight into the caller's memory (one pass, no temporary).
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    at::Tensor p_out = at::from_blob(pattern_out, {n, T}, f64);
    p_out.narrow(1, 0, width).copy_(pattern);
    if (width < T) p_out.narrow(1, width, T - width).zero_();
    if (scores_out) {
        at::Tensor s_out = at::from_blob(scores_out, {n, T}, f64);
        s_out.narrow(1, 0, width).copy_(scores);
        if (width < T)
            s_out.narrow(1, width, T - width).fill_(-std::numeric_limits<double>::infinity());
    }
}

const double* LazyAttention::row(int64_t l, int64_t h, int64_t i) const {
    return fetch(l, h, i).pattern.data() + (i % kRowsPerBlock) * n_tokens_;
}

const double* LazyAttention::score_row(int64_t l, int64_t h, int64_t i) const {
    return fetch(l, h, i).scores.data() + (i % kRowsPerBlock) * n_tokens_;
}

}  // namespace sinkscope::analysis
