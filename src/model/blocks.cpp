// The building blocks of the family files (blocks.hpp).
#include "blocks.hpp"

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

at::Tensor hooked_attend(at::Tensor q, at::Tensor k, at::Tensor v, const RopeTables* rope,
                         const AttentionMask& hidden, double scale, int64_t layer,
                         const HeadMask* mask, at::ScalarType dtype, HookRecorder& hooks,
                         double softcap) {
    q = hooks.keep(HookPoint::Q, layer, q);
    k = hooks.keep(HookPoint::K, layer, k);
    v = hooks.keep(HookPoint::V, layer, v);
    const at::Tensor rq = hooks.keep(HookPoint::RotQ, layer, rope ? rope->apply(q) : q);
    const at::Tensor rk = hooks.keep(HookPoint::RotK, layer, rope ? rope->apply(k) : k);
    return attend(rq, rk, v, hidden, scale, layer, mask, dtype, hooks, softcap);
}

at::Tensor self_attention(const at::Tensor& h, const AttentionWeights& w, const ModelConfig& c,
                          const RopeTables* rope, const AttentionMask& hidden, double scale,
                          int64_t layer, const HeadMask* mask, at::ScalarType dtype,
                          HookRecorder& hooks) {
    const int64_t B = h.size(0), T = h.size(1), dh = c.d_head;
    const at::Tensor z = hooked_attend(w.q(h).view({B, T, c.n_heads, dh}),     // [b, pos, H, dh]
                                       w.k(h).view({B, T, c.n_kv_heads, dh}),  // [b, pos, Hkv, dh]
                                       w.v(h).view({B, T, c.n_kv_heads, dh}), rope, hidden, scale,
                                       layer, mask, dtype, hooks);
    return w.o(z.view({B, T, c.n_heads * dh}));  // [batch, pos, d_model]
}

}  // namespace sinkscope::model::detail
