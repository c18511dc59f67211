// The shared pieces of the family files (family_common.hpp).
#include "family_common.hpp"

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

void HookRecorder::keep(HookPoint point, int64_t layer, const at::Tensor& t) {
    if (capture_.empty()) return;
    std::string n = hook_name(point, layer);
    if (capture_.wants(n)) result_.captured.emplace(std::move(n), t);
}

bool HookRecorder::wants(HookPoint point, int64_t layer) const {
    return !capture_.empty() && capture_.wants(hook_name(point, layer));
}

at::Tensor HookRecorder::scratch(int slot, at::IntArrayRef sizes,
                                 const at::TensorOptions& options) {
    SS_CHECK(slot >= 0 && slot < kScratchSlots, "scratch slot ", slot);
    int64_t numel = 1;
    for (int64_t d : sizes) numel *= d;
    at::Tensor& buf = scratch_[slot];
    if (!buf.defined() || buf.numel() < numel || buf.dtype() != options.dtype() ||
        buf.device() != options.device())
        buf = at::empty({numel}, options);
    return buf.narrow(0, 0, numel).view(sizes);
}

namespace {

// The pool behind release_capture_buffers (model.hpp): flat buffers, each free when the pool's
// reference is the only one left on its storage.
struct CapturePool {
    std::mutex mutex;
    std::vector<at::Tensor> buffers;
};
CapturePool& capture_pool() {
    static CapturePool pool;
    return pool;
}
bool is_free(const at::Tensor& buffer) {
    return buffer.storage().use_count() == 1;
}
constexpr int64_t kPooledBytes = int64_t(32) << 20;  // below, malloc's heap reuses the memory

}  // namespace

HookRecorder::~HookRecorder() {
    if (taken_.empty()) return;
    CapturePool& pool = capture_pool();
    const std::lock_guard<std::mutex> lock(pool.mutex);
    std::erase_if(pool.buffers, [this](const at::Tensor& b) {
        return is_free(b) && std::find(taken_.begin(), taken_.end(), b.data_ptr()) == taken_.end();
    });
}

at::Tensor HookRecorder::capture_buffer(at::IntArrayRef sizes, const at::TensorOptions& options) {
    int64_t numel = 1;
    for (int64_t d : sizes) numel *= d;
    const int64_t bytes = numel * static_cast<int64_t>(options.dtype().itemsize());
    if (bytes < kPooledBytes) return at::empty(sizes, options);
    CapturePool& pool = capture_pool();
    const std::lock_guard<std::mutex> lock(pool.mutex);
    for (const at::Tensor& b : pool.buffers) {
        // A free buffer of the dtype and device, at least as large and less than twice as large.
        if (!is_free(b) || b.dtype() != options.dtype() || b.device() != options.device() ||
            b.numel() < numel || b.numel() >= 2 * numel)
            continue;
        taken_.push_back(b.data_ptr());
        return b.narrow(0, 0, numel).view(sizes);
    }
    at::Tensor b = at::empty({numel}, options);
    // Captured squares: huge pages (core/allocator.hpp). Measured on the 134M Llama at T = 2048
    // with scores + pattern kept: 17% less forward time.
    if (b.is_cpu()) sinkscope::advise_huge_pages(b.data_ptr(), b.nbytes());
    pool.buffers.push_back(b);
    taken_.push_back(b.data_ptr());
    return b.view(sizes);
}

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

void check_head_mask(const HeadMask* mask, const ModelConfig& c) {
    if (!mask) return;
    SS_CHECK(mask->n_layers == c.n_layers && mask->n_heads == c.n_heads, "head mask shape");
    if (mask->kind == HeadMask::Kind::Mean)
        SS_CHECK(mask->z_mean.defined() &&
                     mask->z_mean.sizes() == at::IntArrayRef({c.n_layers, c.n_heads, c.d_head}),
                 "mean ablation needs z_mean [n_layers, n_heads, d_head]");
}

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

DecoderFrame::DecoderFrame(const ModelInput& input, const CaptureSpec& capture,
                           const HeadMask* mask, const ModelConfig& c, int64_t rot_dim,
                           at::ScalarType dtype, const at::Device& device)
    : ids(checked_ids(input, c.d_vocab, device)),
      n_tokens(ids.size(1)),
      stage(input, c, ids.size(0), n_tokens, dtype, device),
      want_logits(capture.wants_logits()),
      hooks(capture, result) {
    check_head_mask(mask, c);
    SS_CHECK(!input.attention_mask.defined(), "padding masks are not supported by causal models");
    if (rot_dim > 0) rope = rope_tables(n_tokens, rot_dim, c, dtype, device);
    hidden = AttentionMask(causal_mask(n_tokens, c.window, device), true, c.window);
    if (c.window > 0 && !c.window_layers.empty()) {
        hidden_full = AttentionMask(causal_mask(n_tokens, 0, device), true, 0);
        window_layers = c.window_layers;
    }
    scale = c.score_scale();
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

ForwardResult DecoderFrame::finish(const at::Tensor& x_final, const at::Tensor& logits) {
    hooks.keep(HookPoint::FinalNorm, -1, x_final);
    if (logits.defined()) result.logits = logits.to(accum_type(logits.scalar_type()));
    return std::move(result);
}

at::Tensor RopeTables::apply(const at::Tensor& t) const {
    const int64_t d_head = t.size(-1), half = rot_dim / 2;
    const at::Tensor x = rot_dim == d_head ? t : t.narrow(-1, 0, rot_dim);
    const at::Tensor rot = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
    const at::Tensor out = x * cos + rot * sin;
    if (rot_dim == d_head) return out;
    return at::cat({out, t.narrow(-1, rot_dim, d_head - rot_dim)}, -1);
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

// The functional full-square form (recorded by autograd under model::GradientScope): scores of
// every query against every key, then the mask; without captured scores or pattern, query
// blocks bound the temporaries. Returns z [batch, pos, n_heads, d_head].
at::Tensor attend_functional(const at::Tensor& q, const at::Tensor& kh, const at::Tensor& vh,
                             const at::Tensor& hidden, double scale, int64_t layer,
                             at::ScalarType dtype, HookRecorder& hooks, double softcap) {
    const int64_t T = q.size(1);
    if (!hooks.wants(HookPoint::AttnScores, layer) && !hooks.wants(HookPoint::Pattern, layer) &&
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
            parts.push_back(at::matmul(at::softmax(scores, -1, accum_type(dtype)).to(dtype), vh));
        }
        return at::cat(parts, 2).transpose(1, 2).contiguous();
    }
    // [batch, n_heads, query, key] after scale and mask; masked = -inf
    at::Tensor scores =
        soft_capped(at::matmul(q.transpose(1, 2), kh.transpose(-2, -1)) * scale, softcap);
    if (hidden.defined()) scores.masked_fill_(hidden, -std::numeric_limits<double>::infinity());
    hooks.keep(HookPoint::AttnScores, layer, scores);
    // [batch, n_heads, query, key]; softmax in f32, masked entries exactly 0
    const at::Tensor pattern = at::softmax(scores, -1, accum_type(dtype)).to(dtype);
    hooks.keep(HookPoint::Pattern, layer, pattern);
    return at::matmul(pattern, vh).transpose(1, 2).contiguous();
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
    // The scale inside the product: multiplying q by a power of two is exact (it only moves the
    // exponent), so (q s) . k = s (q . k) bit for bit; any other scale is GEMM's alpha, which
    // scales each accumulated dot product once, as (q . k) * s does.
    int exponent = 0;
    const bool pow2_scale = std::frexp(scale, &exponent) == 0.5;
    at::Tensor qh = q.transpose(1, 2).contiguous();  // [batch, n_heads, pos, d_head]
    if (pow2_scale && scale != 1.0) qh.mul_(scale);
    const at::Tensor q3 = qh.view({BH, T, dh});
    const at::Tensor k3 = kh.contiguous().view({BH, T, dh});  // [batch * n_heads, key, d_head]
    const at::Tensor v3 = vh.contiguous().view({BH, T, dh});
    // Captured outputs, written block by block: [batch, n_heads, query, key]
    const at::Tensor scores_all =
        keep_scores ? hooks.capture_buffer({B, H, T, T}, opt) : at::Tensor();
    const at::Tensor pattern_all =
        keep_pattern ? hooks.capture_buffer({B, H, T, T}, opt) : at::Tensor();
    at::Tensor z = at::empty({B, T, H, dh}, opt);  // [batch, pos, n_heads, d_head]
    const at::Tensor& hidden = am.hidden;
    const bool row_mask = hidden.defined() && hidden.dim() >= 2 && hidden.size(-2) == T;
    for (int64_t i0 = 0; i0 < T; i0 += kQueryBlock) {
        const int64_t n = std::min(kQueryBlock, T - i0);
        // Keys the block sees: causal, [i0 + n - window, i0 + n); else all.
        const int64_t ke = am.causal ? i0 + n : T;
        const int64_t kb =
            am.causal && am.window > 0 ? std::max<int64_t>(0, i0 - am.window + 1) : 0;
        const int64_t nk = ke - kb;
        // [batch * n_heads, n, nk] scores of the block, scaled (view of scores_all or scratch)
        at::Tensor s3 = keep_scores ? scores_all.view({BH, T, T}).narrow(1, i0, n).narrow(2, kb, nk)
                                    : hooks.scratch(0, {BH, n, nk}, opt);
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
        // [batch * n_heads, n, nk] pattern of the block (view of pattern_all or scratch)
        at::Tensor p3 = keep_pattern
                            ? pattern_all.view({BH, T, T}).narrow(1, i0, n).narrow(2, kb, nk)
                            : hooks.scratch(1, {BH, n, nk}, opt);
        if (dtype == acc) {
            at::softmax_out(p3, s3, -1);
        } else {
            p3.copy_(at::softmax(s3, -1, acc));  // softmax in f32, then the compute dtype
        }
        // Keys the block cannot see: -inf scores, 0 weights, in the captured squares.
        for (const auto& [k0, k1] : {std::pair<int64_t, int64_t>{0, kb}, {ke, T}}) {
            if (k1 <= k0) continue;
            if (keep_scores) scores_all.narrow(2, i0, n).narrow(3, k0, k1 - k0).fill_(-kInf);
            if (keep_pattern) pattern_all.narrow(2, i0, n).narrow(3, k0, k1 - k0).zero_();
        }
        at::Tensor zb = hooks.scratch(2, {BH, n, dh}, opt);  // [batch * n_heads, n, d_head]
        at::bmm_out(zb, p3, v3.narrow(1, kb, nk));
        z.narrow(1, i0, n).copy_(zb.view({B, H, n, dh}).transpose(1, 2));
    }
    if (keep_scores) hooks.keep(HookPoint::AttnScores, layer, scores_all);
    if (keep_pattern) hooks.keep(HookPoint::Pattern, layer, pattern_all);
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
            ? attend_functional(q, kh, vh, hidden.hidden, scale, layer, dtype, hooks, softcap)
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
    hooks.keep(HookPoint::Z, layer, z);
    return z;
}

// ---- Weights ----

namespace {

// TF-era name of a LayerNorm parameter role (gamma = weight, beta = bias); nullptr for others.
const char* legacy_norm_suffix(TensorRole role) {
    switch (role) {
        case TensorRole::OutputNorm:
        case TensorRole::AttnNorm:
        case TensorRole::FfnNorm:
        case TensorRole::EmbedNorm:
        case TensorRole::HeadNorm:
            return "gamma";
        case TensorRole::OutputNormBias:
        case TensorRole::AttnNormBias:
        case TensorRole::FfnNormBias:
        case TensorRole::EmbedNormBias:
        case TensorRole::HeadNormBias:
            return "beta";
        default:
            return nullptr;
    }
}

// Names an HF checkpoint may use for registry name `n` of `role` when `n` itself is absent, in
// the order tried:
// * checkpoints saved from the base model (GPT2Model, e.g. openai-community/gpt2: "wte.weight"
//   instead of "transformer.wte.weight") lack the head model's prefix; transformers loads them
//   by stripping base_model_prefix, and so does this: the name without its first component;
// * checkpoints converted from the original TF BERT (bert-base-uncased among them) name the
//   LayerNorm parameters gamma / beta; transformers renames them on load, so does this.
std::vector<std::string> name_candidates(const std::string& n, TensorRole role) {
    std::vector<std::string> out;
    const auto dot = n.find('.');
    if (dot != std::string::npos) out.push_back(n.substr(dot + 1));
    if (const char* suffix = legacy_norm_suffix(role)) {
        auto legacy = [&](const std::string& s) { return s.substr(0, s.rfind('.') + 1) + suffix; };
        out.push_back(legacy(n));
        if (dot != std::string::npos) out.push_back(legacy(n.substr(dot + 1)));
    }
    return out;
}

}  // namespace

// ---- Weight: file bytes widened at use ----

struct Weight::Stored {
    io::TensorView view;  // the file's [n, d] bytes; view.owner keeps them mapped
    int64_t d = 0;        // values a row
    // Row r of the weight is row rows[r] of the file's tensor (empty: the file's rows in order):
    // a part of a fused matrix, or Q/K rows in the HF order (WeightLoader::host_rope_rows).
    std::vector<int64_t> rows;
    int64_t n_rows = 0;
    at::ScalarType dtype = at::kFloat;  // the compute dtype
    mutable std::mutex mutex;           // guards kept
    mutable at::Tensor kept;            // param(): widened once and kept

    // Rows `src` (n of them) of the file's tensor converted to float32 into out [n, d]. Rows
    // are whole quantization blocks (io::check_convertible), so a row converts alone to the
    // values it has in the whole tensor's conversion.
    void convert_rows(const int64_t* src, int64_t n, float* out) const {
        io::TensorView row = view;
        const int64_t row_bytes = io::weight_dtype_n_bytes(view.dtype, d);
        row.shape = {d};
        row.n_bytes = static_cast<size_t>(row_bytes);
        for (int64_t i = 0; i < n; ++i) {
            SS_CHECK(src[i] >= 0 && src[i] < view.shape[0], "row ", src[i], " outside ", view.name);
            row.data = view.data + src[i] * row_bytes;
            io::convert_to_f32(row, out + i * d);
        }
    }
    // The values WeightLoader::to_device(read / host_rope_rows / host_qkv part) gives this
    // tensor: read_f32's conversion of each value, the same row order, to_device's dtype.
    at::Tensor widen() const { return widen_rows(0, n_rows); }
    // Rows [first, first + n) of widen(), only those converted.
    at::Tensor widen_rows(int64_t first, int64_t n) const {
        SS_CHECK(first >= 0 && n >= 0 && first + n <= n_rows, "rows ", first, "+", n, " outside ",
                 view.name);
        at::Tensor host = at::empty({n, d}, at::TensorOptions().dtype(at::kFloat));
        if (rows.empty()) {
            const auto row_bytes = static_cast<size_t>(io::weight_dtype_n_bytes(view.dtype, d));
            io::TensorView part = view;
            part.shape = {n, d};
            part.data = view.data + size_t(first) * row_bytes;
            part.n_bytes = size_t(n) * row_bytes;
            io::convert_to_f32(part, host.data_ptr<float>());
        } else {
            convert_rows(rows.data() + first, n, host.data_ptr<float>());
        }
        return host.to(at::kCPU, dtype).contiguous();
    }
    at::Tensor kept_or_null() const {
        const std::lock_guard<std::mutex> lock(mutex);
        return kept;
    }
};

at::Tensor Weight::use() const {
    if (!stored_) return wide_;
    at::Tensor kept = stored_->kept_or_null();
    return kept.defined() ? kept : stored_->widen();
}

at::Tensor Weight::rows(const at::Tensor& ids) const {
    if (!stored_) return at::embedding(wide_, ids);
    if (at::Tensor kept = stored_->kept_or_null(); kept.defined()) return at::embedding(kept, ids);
    const Stored& st = *stored_;
    SS_CHECK(st.rows.empty(), "rows() of a table stored in order");
    const at::Tensor flat = ids.reshape({-1}).to(at::kCPU, at::kLong).contiguous();
    at::Tensor out = at::empty({flat.numel(), st.d}, at::TensorOptions().dtype(at::kFloat));
    st.convert_rows(flat.data_ptr<int64_t>(), flat.numel(), out.data_ptr<float>());
    std::vector<int64_t> sizes = ids.sizes().vec();
    sizes.push_back(st.d);
    return out.to(at::kCPU, st.dtype).view(sizes);
}

int64_t Weight::n_rows() const {
    return stored_ ? stored_->n_rows : wide_.size(0);
}

at::Tensor Weight::row_block(int64_t first, int64_t n) const {
    if (!stored_) return wide_.narrow(0, first, n);
    if (at::Tensor kept = stored_->kept_or_null(); kept.defined()) return kept.narrow(0, first, n);
    return stored_->widen_rows(first, n);
}

at::Tensor Weight::param() const {
    if (!stored_) return wide_;
    const std::lock_guard<std::mutex> lock(stored_->mutex);
    if (!stored_->kept.defined()) stored_->kept = stored_->widen();
    return stored_->kept;
}

WeightLoader::WeightLoader(const ModelConfig& c, const WeightSource& src, const RuntimeOptions& rt)
    : arch_(find_architecture(c.architecture)),
      src_(src),
      dtype_(scalar_type(rt.dtype)),
      device_(device_of(rt)),
      cpu_(rt.device == DeviceKind::Cpu),
      widen_at_load_(rt.widen_at_load) {}

std::string WeightLoader::name(TensorRole role, int64_t layer) const {
    const std::string n = tensor_name(arch_, src_.format, role, layer);
    if (n.empty() || src_.format != WeightFormat::HuggingFace || src_.store->has(n)) return n;
    for (const std::string& alt : name_candidates(n, role))
        if (src_.store->has(alt)) return alt;
    return n;  // absent: reading it reports the registry name
}

bool WeightLoader::has(TensorRole role, int64_t layer) const {
    const std::string n = name(role, layer);
    return !n.empty() && src_.store->has(n);
}

at::Tensor WeightLoader::read(TensorRole role, int64_t layer, const std::vector<int64_t>& shape,
                              bool kept) const {
    const std::string n = name(role, layer);
    SS_CHECK(!n.empty(), "architecture ", arch_.name, " names no tensor for role ",
             static_cast<int>(role), " in ", weight_format_name(src_.format));
    if (src_.metadata_only) {
        bool file_bytes = false;
        at::Tensor meta = read_meta(src_, n, shape, &file_bytes);
        // A CPU float32 build would use this tensor in the file's pages (to_device counts it).
        if (kept && cpu_ && file_bytes && dtype_ == at::kFloat) in_place_.push_back(meta);
        return meta;
    }
    const bool in_place = kept && device_.is_cpu() && dtype_ == at::kFloat;
    return read_f32(src_, n, shape, in_place);
}

bool WeightLoader::qk_interleaved() const {
    return src_.format == WeightFormat::Llama2c ||
           (src_.format == WeightFormat::Gguf && arch_.gguf_qk_interleaved);
}

at::Tensor WeightLoader::host_rope_rows(TensorRole role, int64_t layer, int64_t n_head,
                                        int64_t d_head, int64_t d_in) const {
    // [n_head * d_head, d_in]; kept as it is unless the rows are interleaved
    const at::Tensor w = read(role, layer, {n_head * d_head, d_in}, !qk_interleaved());
    if (!qk_interleaved()) return w;
    // interleaved rows (pairs 2i, 2i+1) -> rotate_half rows (i, i + d_head/2), per head
    return w.reshape({n_head, d_head / 2, 2, d_in})
        .transpose(1, 2)
        .reshape({n_head * d_head, d_in});
}

at::Tensor WeightLoader::host_linear(TensorRole role, int64_t layer, int64_t n_out, int64_t n_in,
                                     bool kept) const {
    if (src_.format == WeightFormat::HuggingFace && arch_.hf_conv1d)
        return host(role, layer, {n_in, n_out}).t().contiguous();  // Conv1D: y = x W + b
    return read(role, layer, {n_out, n_in}, kept);
}

at::Tensor WeightLoader::host_qkv(TensorRole role, int64_t layer, int64_t n_heads, int64_t d_head,
                                  int64_t d_in) const {
    const int64_t n = 3 * n_heads * d_head;
    const bool bias = d_in == 0;
    // [n] or [n, d_in], rows in the stored order, kept as they are unless grouped per head
    const bool per_head = src_.format == WeightFormat::HuggingFace && arch_.hf_qkv_per_head;
    const at::Tensor w =
        bias ? read(role, layer, {n}, !per_head) : host_linear(role, layer, n, d_in, !per_head);
    if (!per_head) return w;
    // rows [head][part][d_head] -> [part][head][d_head] (convert_hf_to_gguf.py's GPT-NeoX order)
    const at::Tensor grouped =
        bias ? w.view({n_heads, 3, d_head}) : w.view({n_heads, 3, d_head, d_in});
    const at::Tensor parts = grouped.transpose(0, 1).contiguous();
    return bias ? parts.view({n}) : parts.view({n, d_in});
}

at::Tensor WeightLoader::to_device(const at::Tensor& host_f32) {
    n_params_ += host_f32.numel();
    if (WeightFootprint* f = src_.metadata_only) {
        // As the real build: a tensor read in place, or a contiguous view of one (a part of
        // a fused q/k/v matrix), passes to_device without a copy.
        const bool in_place =
            host_f32.is_contiguous() &&
            std::any_of(in_place_.begin(), in_place_.end(), [&](const at::Tensor& t) {
                return t.storage().unsafeGetStorageImpl() ==
                       host_f32.storage().unsafeGetStorageImpl();
            });
        (in_place ? f->numel_in_place : f->numel_copied) += host_f32.numel();
    }
    return host_f32.to(device_, dtype_).contiguous();
}

Weight WeightLoader::stored_weight(TensorRole role, int64_t layer,
                                   const std::vector<int64_t>& shape, std::vector<int64_t> rows,
                                   bool first_part) {
    const std::string n = name(role, layer);
    SS_CHECK(!n.empty(), "architecture ", arch_.name, " names no tensor for role ",
             static_cast<int>(role), " in ", weight_format_name(src_.format));
    const io::TensorView view = checked_view(src_, n, shape);
    const int64_t numel = rows.empty() ? view.numel() : int64_t(rows.size()) * shape[1];
    n_params_ += numel;
    if (WeightFootprint* f = src_.metadata_only) {
        if (first_part) tally(src_, view, /*deferred=*/true);  // a fused tensor once
        f->numel_deferred += numel;
        const int64_t n_rows = rows.empty() ? shape[0] : int64_t(rows.size());
        return Weight(
            at::empty({n_rows, shape[1]}, at::TensorOptions().dtype(at::kFloat).device(at::kMeta)));
    }
    auto st = std::make_shared<Weight::Stored>();
    st->view = view;
    st->d = shape[1];
    st->n_rows = rows.empty() ? shape[0] : int64_t(rows.size());
    st->rows = std::move(rows);
    st->dtype = dtype_;
    return Weight(std::shared_ptr<const Weight::Stored>(std::move(st)));
}

bool WeightLoader::defer(TensorRole role, int64_t layer, const std::vector<int64_t>& shape) const {
    if (!cpu_ || widen_at_load_ || shape.size() != 2) return false;
    const std::string n = name(role, layer);
    if (n.empty() || !src_.store->has(n)) return false;  // the eager read reports it
    return stays_in_file(checked_view(src_, n, shape), dtype_);
}

Weight WeightLoader::weight(TensorRole role, int64_t layer, const std::vector<int64_t>& shape) {
    if (defer(role, layer, shape)) return stored_weight(role, layer, shape, {});
    // A bf16 (f16, f64) file under a model of the same dtype: its bytes as they lie, as a
    // float32 file under a float32 model (read()); the same values as the load's widening and
    // narrowing back, which is exact.
    const std::string n = name(role, layer);
    if (cpu_ && !widen_at_load_ && dtype_ != at::kFloat && !n.empty() && src_.store->has(n)) {
        const io::TensorView view = checked_view(src_, n, shape);
        if (usable_as_is(view, dtype_)) {
            n_params_ += view.numel();
            if (WeightFootprint* f = src_.metadata_only) {
                tally(src_, view, /*deferred=*/false);
                f->numel_in_place += view.numel();
                return Weight(
                    at::empty(shape, at::TensorOptions().dtype(dtype_).device(at::kMeta)));
            }
            return Weight(mapped_tensor(view, shape, dtype_));
        }
    }
    return get(role, layer, shape);
}

Weight WeightLoader::rope_rows_weight(TensorRole role, int64_t layer, int64_t n_head,
                                      int64_t d_head, int64_t d_in) {
    const std::vector<int64_t> shape{n_head * d_head, d_in};
    if (!qk_interleaved()) return weight(role, layer, shape);  // the HF order already
    if (!defer(role, layer, shape))
        return to_device(host_rope_rows(role, layer, n_head, d_head, d_in));
    // host_rope_rows: row t * d_head/2 + i of head h is the file's row 2i + t of head h
    std::vector<int64_t> rows(static_cast<size_t>(n_head * d_head));
    const int64_t half = d_head / 2;
    for (int64_t h = 0; h < n_head; ++h)
        for (int64_t t = 0; t < 2; ++t)
            for (int64_t i = 0; i < half; ++i)
                rows[static_cast<size_t>(h * d_head + t * half + i)] = h * d_head + 2 * i + t;
    return stored_weight(role, layer, shape, std::move(rows));
}

Weight WeightLoader::linear_weight(TensorRole role, int64_t layer, int64_t n_out, int64_t n_in) {
    if (src_.format == WeightFormat::HuggingFace && arch_.hf_conv1d)
        return to_device(host_linear(role, layer, n_out, n_in));
    return weight(role, layer, {n_out, n_in});
}

std::vector<Weight> WeightLoader::split_rows(TensorRole role, int64_t layer,
                                             const std::vector<int64_t>& shape,
                                             const std::vector<int64_t>& sizes) {
    std::vector<Weight> parts;
    int64_t begin = 0;
    if (!defer(role, layer, shape)) {
        const at::Tensor host_f32 = host(role, layer, shape);  // read once, then split
        for (int64_t n : sizes) {
            parts.push_back(to_device(host_f32.narrow(0, begin, n)));
            begin += n;
        }
        return parts;
    }
    for (int64_t n : sizes) {
        std::vector<int64_t> rows(static_cast<size_t>(n));
        for (int64_t r = 0; r < n; ++r) rows[static_cast<size_t>(r)] = begin + r;
        parts.push_back(stored_weight(role, layer, shape, std::move(rows), begin == 0));
        begin += n;
    }
    return parts;
}

std::vector<Weight> WeightLoader::qkv_parts(TensorRole role, int64_t layer, int64_t n_heads,
                                            int64_t d_head, int64_t d_in) {
    const int64_t n = 3 * n_heads * d_head, hd = n_heads * d_head;
    std::vector<Weight> parts;
    const bool conv1d = src_.format == WeightFormat::HuggingFace && arch_.hf_conv1d;
    if (conv1d || !defer(role, layer, {n, d_in})) {
        const at::Tensor host_f32 = host_qkv(role, layer, n_heads, d_head, d_in);
        for (int64_t p = 0; p < 3; ++p) parts.push_back(to_device(host_f32.narrow(0, p * hd, hd)));
        return parts;
    }
    // host_qkv's order: [part][head][d_head]; HF GPT-NeoX files group the rows per head
    const bool per_head = src_.format == WeightFormat::HuggingFace && arch_.hf_qkv_per_head;
    for (int64_t p = 0; p < 3; ++p) {
        std::vector<int64_t> rows(static_cast<size_t>(hd));
        for (int64_t h = 0; h < n_heads; ++h)
            for (int64_t i = 0; i < d_head; ++i)
                rows[static_cast<size_t>(h * d_head + i)] =
                    per_head ? (h * 3 + p) * d_head + i : p * hd + h * d_head + i;
        parts.push_back(stored_weight(role, layer, {n, d_in}, std::move(rows), p == 0));
    }
    return parts;
}

// ---- Building blocks of the LayerNorm families ----

at::Tensor linear(const at::Tensor& x, const Weight& w, const at::Tensor& b) {
    const int64_t n_out = w.n_rows();
    const int64_t n_blocks = (n_out + kLinearBlockRows - 1) / kLinearBlockRows;
    if (n_blocks <= 1) return at::linear(x, w.use(), b);
    const bool cpu = x.device().is_cpu();
    const int workers = cpu && !gradients_recorded() ? forward_workers() : 1;
    std::vector<at::Tensor> parts(static_cast<size_t>(n_blocks));
    const bool inference = c10::InferenceMode::is_enabled();
    parallel_parts(n_blocks, workers, [&](int64_t i) {
        const c10::InferenceMode mode{inference};  // as on the calling thread
        const int64_t first = i * kLinearBlockRows;
        const int64_t n = std::min(kLinearBlockRows, n_out - first);
        parts[size_t(i)] =
            at::linear(x, w.row_block(first, n), b.defined() ? b.narrow(0, first, n) : b);
    });
    return at::cat(parts, -1);
}

Linear load_linear(WeightLoader& ld, TensorRole w_role, std::optional<TensorRole> b_role,
                   int64_t layer, int64_t n_out, int64_t n_in) {
    Linear lin;
    lin.w = ld.linear_weight(w_role, layer, n_out, n_in);
    if (b_role) lin.b = ld.get(*b_role, layer, {n_out});
    return lin;
}

at::Tensor LayerNorm::operator()(const at::Tensor& x) const {
    return at::layer_norm(x, {w.size(0)}, w, b, eps);
}

LayerNorm load_layer_norm(WeightLoader& ld, TensorRole w_role, TensorRole b_role, int64_t layer,
                          int64_t d, double eps) {
    return LayerNorm{ld.get(w_role, layer, {d}), ld.get(b_role, layer, {d}), eps};
}

at::Tensor rms_normalized(const at::Tensor& x, double eps) {
    const at::Tensor xf = x.to(accum_type(x.scalar_type()));
    return xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
}

at::Tensor activate(const at::Tensor& x, Activation act) {
    switch (act) {
        case Activation::Silu:
            return at::silu(x);
        case Activation::GeluTanh:
            return at::gelu(x, "tanh");
        case Activation::Gelu:
            return at::gelu(x);
    }
    throw InternalError("unknown activation");
}

at::Tensor self_attention(const at::Tensor& h, const AttentionWeights& w, const ModelConfig& c,
                          const RopeTables* rope, const AttentionMask& hidden, double scale,
                          int64_t layer, const HeadMask* mask, at::ScalarType dtype,
                          HookRecorder& hooks) {
    const int64_t B = h.size(0), T = h.size(1), dh = c.d_head;
    const at::Tensor q = w.q(h).view({B, T, c.n_heads, dh});     // [batch, pos, n_heads, d_head]
    const at::Tensor k = w.k(h).view({B, T, c.n_kv_heads, dh});  // [batch, pos, n_kv, d_head]
    const at::Tensor v = w.v(h).view({B, T, c.n_kv_heads, dh});
    hooks.keep(HookPoint::Q, layer, q);
    hooks.keep(HookPoint::K, layer, k);
    hooks.keep(HookPoint::V, layer, v);
    const at::Tensor rq = rope ? rope->apply(q) : q;
    const at::Tensor rk = rope ? rope->apply(k) : k;
    hooks.keep(HookPoint::RotQ, layer, rq);
    hooks.keep(HookPoint::RotK, layer, rk);
    const at::Tensor z = attend(rq, rk, v, hidden, scale, layer, mask, dtype, hooks);
    return w.o(z.view({B, T, c.n_heads * dh}));  // [batch, pos, d_model]
}

}  // namespace sinkscope::model::detail

namespace sinkscope::model {

void release_capture_buffers() {
    detail::CapturePool& pool = detail::capture_pool();
    const std::lock_guard<std::mutex> lock(pool.mutex);
    std::erase_if(pool.buffers, detail::is_free);
}

}  // namespace sinkscope::model
