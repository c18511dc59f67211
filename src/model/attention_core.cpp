// Masks, RoPE tables and the eager attention core (attention_core.hpp).
#include "attention_core.hpp"

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

at::Tensor causal_mask(int64_t n_tokens, int64_t window, const at::Device& device) {
    const auto opt = at::TensorOptions().dtype(at::kLong).device(device);
    const at::Tensor qpos = at::arange(n_tokens, opt).unsqueeze(1);
    const at::Tensor kpos = at::arange(n_tokens, opt).unsqueeze(0);
    at::Tensor hidden = kpos > qpos;  // [query, key]
    if (window > 0) hidden = hidden.logical_or(kpos <= qpos - window);
    return hidden;
}

at::Tensor padding_mask(const ModelInput& input, const at::Device& device) {
    if (!input.attention_mask.defined()) return {};
    SS_CHECK(input.attention_mask.dim() == 2, "attention_mask must be [batch, pos]");
    return input.attention_mask.to(device).eq(0).view(
        {input.attention_mask.size(0), 1, 1, input.attention_mask.size(1)});
}

RopeTables rope_tables(int64_t n_tokens, int64_t rot_dim, const ModelConfig& c,
                       at::ScalarType dtype, const at::Device& device) {
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
    // inv_freq comes from the CPU whatever the device, as transformers computes it at load: an
    // angle pos * inv_freq passes a relative error of inv_freq on to cos and sin magnified by the
    // angle (up to T), so a GPU's pow (a few ulps, other bits than the CPU's) would move them by
    // more than the float32 bounds of the GPU tests (golden_cuda.cpp). The rest runs on the device.
    const at::Tensor inv_freq =
        rope_inv_freq(c, rot_dim, n_tokens, at::kCPU).to(device);             // [rot/2] f32
    const at::Tensor freqs = at::outer(at::arange(n_tokens, f32), inv_freq);  // [pos, rot/2]
    const at::Tensor emb = at::cat({freqs, freqs}, -1);                       // [pos, rot]
    at::Tensor cos = emb.cos(), sin = emb.sin();
    // YaRN's and LongRoPE's attention factor scales cos and sin in f32 (transformers'
    // attention_scaling).
    if (c.rope_scaling.kind == RopeScalingKind::Yarn ||
        c.rope_scaling.kind == RopeScalingKind::LongRope) {
        cos = cos * c.rope_scaling.attention_factor;
        sin = sin * c.rope_scaling.attention_factor;
    }
    RopeTables r;
    r.rot_dim = rot_dim;
    r.cos = cos.to(dtype).view({1, n_tokens, 1, rot_dim});
    r.sin = sin.to(dtype).view({1, n_tokens, 1, rot_dim});
    return r;
}

at::Tensor RopeTables::apply(const at::Tensor& t) const {
    const int64_t d_head = t.size(-1), half = rot_dim / 2;
    const at::Tensor x = rot_dim == d_head ? t : t.narrow(-1, 0, rot_dim);
    const at::Tensor rot = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
    const at::Tensor out = x * cos + rot * sin;
    if (rot_dim == d_head) return out;
    return at::cat({out, t.narrow(-1, rot_dim, d_head - rot_dim)}, -1);
}

at::Tensor attention_weights(const at::Tensor& s, AttentionFunction f, at::ScalarType dtype) {
    const at::ScalarType acc = accum_type(dtype);
    switch (f) {
        case AttentionFunction::Softmax:
            return at::softmax(s, -1, acc).to(dtype);
        case AttentionFunction::SoftmaxOne:  // one more key of logit 0 whose weight is dropped
            return slot_softmax(s, at::zeros({}, s.options().dtype(acc)), dtype).keys;
        case AttentionFunction::Sigmoid:
            return at::sigmoid(s.to(acc)).to(dtype);  // masked keys: sigmoid(-inf) = 0
    }
    throw InternalError("unknown attention function");
}

SlotWeights slot_softmax(const at::Tensor& s, const at::Tensor& slot, at::ScalarType dtype) {
    const at::ScalarType acc = accum_type(dtype);
    const at::Tensor x = s.to(acc), c = slot.to(acc);
    // m is a constant of the row (no gradient); no exponent overflows.
    const at::Tensor m = at::maximum(at::amax(x, {-1}, /*keepdim=*/true), c).detach();
    const at::Tensor e = at::exp(x - m);  // masked keys: exp(-inf) = 0
    const at::Tensor ec = at::exp(c - m);
    const at::Tensor denom = ec + e.sum(-1, /*keepdim=*/true);
    return {(e / denom).to(dtype), (ec / denom).to(dtype)};
}

namespace {

// Gemma-2 (transformers Gemma2Attention): scores / cap, tanh, * cap, then the mask.
at::Tensor soft_capped(const at::Tensor& s, double softcap) {
    return softcap > 0 ? at::tanh(s / softcap) * softcap : s;
}

// [batch, n_heads, pos, d_head] of k or v [batch, pos, n_kv_heads, d_head]: query head i reads kv
// head i / group (HF repeat_kv).
at::Tensor per_query_head(const at::Tensor& t, int64_t n_heads) {
    const at::Tensor th = t.transpose(1, 2);
    return n_heads == t.size(2) ? th : th.repeat_interleave(n_heads / t.size(2), 1);
}

// The kv slot of one layer as attend() reads it: the slot's logit for every query row and its
// value per query head (both undefined without a slot).
struct Slot {
    at::Tensor logits;  // [batch, n_heads, pos, 1]: (q . k*) * scale, soft-capped
    at::Tensor value;   // [1, n_heads, 1, d_head]: v* of each query head's kv head
    bool defined() const { return logits.defined(); }
};
Slot slot_of(const at::Tensor& q, const AttentionMask& am, double scale, double softcap) {
    if (!am.has_slot()) return {};
    const int64_t H = q.size(2), dh = q.size(3), group = H / am.slot_key.size(0);
    const auto per_head = [&](const at::Tensor& t) {  // [n_kv_heads, d_head] -> [H, d_head]
        return group == 1 ? t : t.repeat_interleave(group, 0);
    };
    Slot s;
    s.logits = soft_capped(
        at::matmul(q.transpose(1, 2), per_head(am.slot_key).view({1, H, dh, 1})) * scale, softcap);
    s.value = per_head(am.slot_value).view({1, H, 1, dh});
    return s;
}

// Weights of a [batch, n_heads, n, key] block of scores, and z = weights x vh (+ the slot).
at::Tensor weighted_values(const at::Tensor& scores, const at::Tensor& vh, const Slot& slot,
                           int64_t i0, AttentionFunction function, at::ScalarType dtype,
                           HookRecorder* hooks, int64_t layer) {
    if (!slot.defined()) {
        at::Tensor p = attention_weights(scores, function, dtype);
        if (hooks) p = hooks->keep(HookPoint::Pattern, layer, p);
        return at::matmul(p, vh);
    }
    SlotWeights w = slot_softmax(scores, slot.logits.narrow(2, i0, scores.size(2)), dtype);
    if (hooks) w.keys = hooks->keep(HookPoint::Pattern, layer, w.keys);
    return at::matmul(w.keys, vh) + w.slot * slot.value;
}

// The functional full-square form (recorded by autograd under model::GradientScope): scores of
// every query against every key, then the mask; without captured scores or pattern, query
// blocks bound the temporaries. Returns z [batch, pos, n_heads, d_head].
at::Tensor attend_functional(const at::Tensor& q, const at::Tensor& kh, const at::Tensor& vh,
                             const AttentionMask& am, double scale, int64_t layer,
                             at::ScalarType dtype, HookRecorder& hooks, double softcap) {
    const at::Tensor& hidden = am.hidden;
    const Slot slot = slot_of(q, am, scale, softcap);
    const int64_t T = q.size(1);
    if (!hooks.wants(HookPoint::AttnScores, layer) && !hooks.wants(HookPoint::Pattern, layer) &&
        !hooks.edits(HookPoint::AttnScores, layer) && !hooks.edits(HookPoint::Pattern, layer) &&
        T > kQueryBlock) {
        std::vector<at::Tensor> parts;
        for (int64_t i0 = 0; i0 < T; i0 += kQueryBlock) {
            const int64_t n = std::min(kQueryBlock, T - i0);
            at::Tensor scores = soft_capped(  // [batch, n_heads, n, key]
                at::matmul(q.narrow(1, i0, n).transpose(1, 2), kh.transpose(-2, -1)) * scale,
                softcap);
            if (hidden.defined())
                scores.masked_fill_(
                    hidden.dim() >= 2 && hidden.size(-2) == T ? hidden.narrow(-2, i0, n) : hidden,
                    -std::numeric_limits<double>::infinity());
            parts.push_back(
                weighted_values(scores, vh, slot, i0, am.function, dtype, nullptr, layer));
        }
        return at::cat(parts, 2).transpose(1, 2).contiguous();
    }
    // [batch, n_heads, query, key] after scale and mask; masked = -inf
    at::Tensor scores =
        soft_capped(at::matmul(q.transpose(1, 2), kh.transpose(-2, -1)) * scale, softcap);
    if (hidden.defined()) scores.masked_fill_(hidden, -std::numeric_limits<double>::infinity());
    scores = hooks.keep(HookPoint::AttnScores, layer, scores);
    // pattern [batch, n_heads, query, key]: softmax (or `function`) in f32, masked entries
    // exactly 0
    return weighted_values(scores, vh, slot, 0, am.function, dtype, &hooks, layer)
        .transpose(1, 2)
        .contiguous();
}

// The inference form: query blocks of kQueryBlock rows written into preallocated outputs and
// reused scratch (hooks.scratch), scores only against the keys [kb, ke) a causal block can see.
// Returns z [batch, pos, n_heads, d_head].
at::Tensor attend_blocked(const at::Tensor& q, const at::Tensor& kh, const at::Tensor& vh,
                          const AttentionMask& am, double scale, int64_t layer,
                          at::ScalarType dtype, HookRecorder& hooks, double softcap) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    const int64_t B = q.size(0), T = q.size(1), H = q.size(2), dh = q.size(3);
    const int64_t BH = B * H;
    const auto opt = q.options().dtype(dtype);
    const at::ScalarType acc = accum_type(dtype);
    const bool keep_scores = hooks.wants(HookPoint::AttnScores, layer);
    const bool keep_pattern = hooks.wants(HookPoint::Pattern, layer);
    // Editing hooks on the scores or the pattern (hooks.hpp) read and replace the whole square:
    // the blocks then run in phases (every block's scores, the hook, every block's pattern, the
    // hook, every block's z) with the same operations on the same values as the one-pass form,
    // so a hook returning what it was given changes nothing.
    const bool edit_scores = hooks.edits(HookPoint::AttnScores, layer);
    const bool edit_pattern = hooks.edits(HookPoint::Pattern, layer);
    const bool phased = edit_scores || edit_pattern;
    const bool full_scores = keep_scores || edit_scores;
    const bool full_pattern = keep_pattern || phased;
    // The scale inside the product: multiplying q by a power of two is exact (it only moves the
    // exponent), so (q s) . k = s (q . k) bit for bit; any other scale is GEMM's alpha, which
    // scales each accumulated dot product once, as (q . k) * s does.
    int exponent = 0;
    const bool pow2_scale = std::frexp(scale, &exponent) == 0.5;
    at::Tensor qh = q.transpose(1, 2).contiguous();  // [batch, n_heads, pos, d_head]
    // (one position or one head: contiguous() hands q itself out, which mul_ must not change)
    if (qh.data_ptr() == q.data_ptr()) qh = qh.clone();
    if (pow2_scale && scale != 1.0) qh.mul_(scale);
    const at::Tensor q3 = qh.view({BH, T, dh});
    const at::Tensor k3 = kh.contiguous().view({BH, T, dh});  // [batch * n_heads, key, d_head]
    const at::Tensor v3 = vh.contiguous().view({BH, T, dh});
    // Captured (or edited) squares, written block by block: [batch, n_heads, query, key]
    at::Tensor scores_all = full_scores ? hooks.capture_buffer({B, H, T, T}, opt) : at::Tensor();
    at::Tensor pattern_all = full_pattern ? hooks.capture_buffer({B, H, T, T}, opt) : at::Tensor();
    at::Tensor z = at::empty({B, T, H, dh}, opt);  // [batch, pos, n_heads, d_head]
    const at::Tensor& hidden = am.hidden;
    // The kv slot: its logit per row [batch * n_heads, query, 1], its weight per row (written by
    // block_pattern), its value per head [batch * n_heads, 1, d_head].
    const Slot slot = slot_of(q, am, scale, softcap);
    const at::Tensor slot_logits = slot.defined() ? slot.logits.reshape({BH, T, 1}) : at::Tensor();
    const at::Tensor slot_w = slot.defined() ? at::empty({BH, T, 1}, opt) : at::Tensor();
    const at::Tensor slot_v =
        slot.defined() ? slot.value.expand({B, H, 1, dh}).reshape({BH, 1, dh}) : at::Tensor();
    const bool row_mask = hidden.defined() && hidden.dim() >= 2 && hidden.size(-2) == T;
    // Keys block [i0, i0 + n) sees: causal, [i0 + n - window, i0 + n); else all.
    struct Keys {
        int64_t kb = 0, ke = 0;
    };
    const auto visible = [&](int64_t i0, int64_t n) {
        Keys r;
        r.ke = am.causal ? i0 + n : T;
        r.kb = am.causal && am.window > 0 ? std::max<int64_t>(0, i0 - am.window + 1) : 0;
        return r;
    };
    // The [batch * n_heads, n, nk] view of a captured square [batch, n_heads, query, key] that
    // block i0's rows against keys r occupy.
    const auto block_of = [&](const at::Tensor& square, int64_t i0, int64_t n, Keys r) {
        return square.view({BH, T, T}).narrow(1, i0, n).narrow(2, r.kb, r.ke - r.kb);
    };
    // After an edit: the block's keys, or every key when the edited square holds something other
    // than `outside` (-inf scores, 0 weights) outside them.
    const auto edited_keys = [&](const at::Tensor& square, int64_t i0, int64_t n, double outside) {
        const Keys r = visible(i0, n);
        const at::Tensor rows = square.narrow(2, i0, n);
        const auto other = [&](int64_t k0, int64_t k1) {
            return k1 > k0 && !rows.narrow(3, k0, k1 - k0).eq(outside).all().item<bool>();
        };
        return other(0, r.kb) || other(r.ke, T) ? Keys{0, T} : r;
    };
    // [batch * n_heads, n, nk] scores of block i0 against keys r, scaled and masked (a view of
    // scores_all or scratch); the keys it cannot see get -inf in scores_all.
    const auto block_scores = [&](int64_t i0, int64_t n, Keys r) {
        const int64_t kb = r.kb, ke = r.ke, nk = ke - kb;
        at::Tensor s3 =
            full_scores ? block_of(scores_all, i0, n, r) : hooks.scratch(0, {BH, n, nk}, opt);
        const at::Tensor qb = q3.narrow(1, i0, n), kbT = k3.narrow(1, kb, nk).transpose(1, 2);
        if (pow2_scale) {
            at::bmm_out(s3, qb, kbT);
        } else {
            // beta = 0 still reads the output on libtorch's small-matrix path (0 * inf = NaN)
            s3.zero_();
            at::baddbmm_out(s3, s3, qb, kbT, 0.0, scale);
        }
        const at::Tensor s4 = s3.view({B, H, n, nk});
        if (softcap > 0) s4.div_(softcap).tanh_().mul_(softcap);
        if (hidden.defined()) {
            if (am.causal && am.window == 0) {
                // only the block's diagonal square [i0, ke) holds masked keys
                s4.narrow(-1, i0 - kb, n)
                    .masked_fill_(hidden.narrow(-2, i0, n).narrow(-1, i0, n), -kInf);
            } else {
                at::Tensor hb = row_mask ? hidden.narrow(-2, i0, n) : hidden;
                if (am.causal) hb = hb.narrow(-1, kb, nk);
                s4.masked_fill_(hb, -kInf);
            }
        }
        if (full_scores)
            for (const auto& [k0, k1] : {std::pair<int64_t, int64_t>{0, kb}, {ke, T}})
                if (k1 > k0) scores_all.narrow(2, i0, n).narrow(3, k0, k1 - k0).fill_(-kInf);
        return s3;
    };
    // [batch * n_heads, n, nk] pattern of block i0 from its scores s3 (a view of pattern_all or
    // scratch); the keys it cannot see get 0 in pattern_all.
    const auto block_pattern = [&](const at::Tensor& s3, int64_t i0, int64_t n, Keys r) {
        const int64_t kb = r.kb, ke = r.ke, nk = ke - kb;
        at::Tensor p3 =
            full_pattern ? block_of(pattern_all, i0, n, r) : hooks.scratch(1, {BH, n, nk}, opt);
        if (slot.defined()) {
            const SlotWeights w = slot_softmax(s3, slot_logits.narrow(1, i0, n), dtype);
            p3.copy_(w.keys);
            slot_w.narrow(1, i0, n).copy_(w.slot);
        } else if (am.function != AttentionFunction::Softmax) {
            p3.copy_(attention_weights(s3, am.function, dtype));
        } else if (dtype == acc) {
            at::softmax_out(p3, s3, -1);
        } else {
            p3.copy_(at::softmax(s3, -1, acc));  // softmax in f32, then the compute dtype
        }
        if (full_pattern)
            for (const auto& [k0, k1] : {std::pair<int64_t, int64_t>{0, kb}, {ke, T}})
                if (k1 > k0) pattern_all.narrow(2, i0, n).narrow(3, k0, k1 - k0).zero_();
        return p3;
    };
    // z rows [i0, i0 + n) from the block's pattern p3 over keys r.
    const auto block_z = [&](const at::Tensor& p3, int64_t i0, int64_t n, Keys r) {
        at::Tensor zb = hooks.scratch(2, {BH, n, dh}, opt);  // [batch * n_heads, n, d_head]
        at::bmm_out(zb, p3, v3.narrow(1, r.kb, r.ke - r.kb));
        if (slot.defined()) zb.add_(slot_w.narrow(1, i0, n) * slot_v);
        z.narrow(1, i0, n).copy_(zb.view({B, H, n, dh}).transpose(1, 2));
    };
    if (!phased) {
        for (int64_t i0 = 0; i0 < T; i0 += kQueryBlock) {
            const int64_t n = std::min(kQueryBlock, T - i0);
            const Keys r = visible(i0, n);
            block_z(block_pattern(block_scores(i0, n, r), i0, n, r), i0, n, r);
        }
        if (keep_scores) scores_all = hooks.keep(HookPoint::AttnScores, layer, scores_all);
        if (keep_pattern) pattern_all = hooks.keep(HookPoint::Pattern, layer, pattern_all);
        return z;
    }
    if (edit_scores) {
        for (int64_t i0 = 0; i0 < T; i0 += kQueryBlock) {
            const int64_t n = std::min(kQueryBlock, T - i0);
            block_scores(i0, n, visible(i0, n));
        }
        scores_all = hooks.keep(HookPoint::AttnScores, layer, scores_all);
        for (int64_t i0 = 0; i0 < T; i0 += kQueryBlock) {
            const int64_t n = std::min(kQueryBlock, T - i0);
            const Keys r = edited_keys(scores_all, i0, n, -kInf);
            block_pattern(block_of(scores_all, i0, n, r), i0, n, r);
        }
    } else {
        for (int64_t i0 = 0; i0 < T; i0 += kQueryBlock) {
            const int64_t n = std::min(kQueryBlock, T - i0);
            const Keys r = visible(i0, n);
            block_pattern(block_scores(i0, n, r), i0, n, r);
        }
        if (keep_scores) scores_all = hooks.keep(HookPoint::AttnScores, layer, scores_all);
    }
    pattern_all = hooks.keep(HookPoint::Pattern, layer, pattern_all);
    for (int64_t i0 = 0; i0 < T; i0 += kQueryBlock) {
        const int64_t n = std::min(kQueryBlock, T - i0);
        const Keys r = edited_keys(pattern_all, i0, n, 0.0);
        block_z(block_of(pattern_all, i0, n, r), i0, n, r);
    }
    return z;
}

}  // namespace

at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const AttentionMask& hidden, double scale, int64_t layer, const HeadMask* mask,
                  at::ScalarType dtype, HookRecorder& hooks, double softcap) {
    const int64_t H = q.size(2), dh = q.size(3);
    const at::Tensor kh = per_query_head(k, H);  // [batch, n_heads, key, d_head]
    const at::Tensor vh = per_query_head(v, H);
    at::Tensor z =  // [batch, pos, n_heads, d_head]
        gradients_recorded()
            ? attend_functional(q, kh, vh, hidden, scale, layer, dtype, hooks, softcap)
            : attend_blocked(q, kh, vh, hidden, scale, layer, dtype, hooks, softcap);
    if (mask && mask->any_in_layer(layer)) {
        for (int64_t head = 0; head < H; ++head) {
            if (!mask->is_ablated(layer, head)) continue;
            at::Tensor zh = z.select(2, head);  // [batch, pos, d_head] view
            if (mask->kind == HeadMask::Kind::Zero)
                zh.zero_();
            else
                zh.copy_(
                    mask->z_mean[layer][head].to(z.device(), dtype).view({1, 1, dh}).expand_as(zh));
        }
    }
    return hooks.keep(HookPoint::Z, layer, z);
}

}  // namespace sinkscope::model::detail
