// The scaled RoPE inverse frequencies (the one place every rotary family's cos / sin tables come
// from), following transformers' modeling_rope_utils.py and llama.cpp's rope_freqs; the scaling
// parameters themselves are read in rope_scaling.cpp.
#include "rope.hpp"

#include <cmath>
#include <numbers>

#include <ATen/ATen.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/model/model.hpp"

namespace sinkscope::model {

namespace detail {

at::Tensor rope_inv_freq(const ModelConfig& c, int64_t rot_dim, int64_t n_tokens,
                         const at::Device& device) {
    const RopeScaling& s = c.rope_scaling;
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
    // [rot_dim / 2] f32: 2i / rot_dim, as transformers (int64 arange cast to float32)
    const at::Tensor expo = at::arange(0, rot_dim, 2, f32.dtype(at::kLong)).to(at::kFloat) /
                            static_cast<double>(rot_dim);
    at::Tensor inv_freq;  // [rot_dim / 2] f32
    switch (s.kind) {
        case RopeScalingKind::None:
            inv_freq = 1.0 / at::pow(c.rope_theta, expo);
            break;
        case RopeScalingKind::Linear:
            inv_freq = 1.0 / at::pow(c.rope_theta, expo) / s.factor;
            break;
        case RopeScalingKind::Dynamic: {
            if (n_tokens <= c.n_ctx) {  // max(position_ids) + 1 <= max_position_embeddings
                inv_freq = 1.0 / at::pow(c.rope_theta, expo);
                break;
            }
            // base * (factor * T / n_ctx - (factor - 1)) ^ (d / (d - 2)), in float32 because
            // transformers computes it from the position tensor.
            const at::Tensor seq = at::scalar_tensor(n_tokens, f32.dtype(at::kLong));
            const double d = static_cast<double>(rot_dim);
            const at::Tensor base =
                c.rope_theta *
                at::pow(seq * s.factor / static_cast<double>(c.n_ctx) - (s.factor - 1.0),
                        d / (d - 2.0));
            inv_freq = 1.0 / at::pow(base, expo);
            break;
        }
        case RopeScalingKind::Llama3: {
            const at::Tensor base_freq = 1.0 / at::pow(c.rope_theta, expo);
            const double old_ctx = static_cast<double>(s.original_n_ctx);
            const double low_wavelen = old_ctx / s.low_freq_factor;
            const double high_wavelen = old_ctx / s.high_freq_factor;
            // Python's scalar / tensor is reciprocal() * scalar.
            const at::Tensor wavelen = base_freq.reciprocal() * (2.0 * std::numbers::pi);
            at::Tensor scaled = at::where(wavelen > low_wavelen, base_freq / s.factor, base_freq);
            const at::Tensor smooth = (wavelen.reciprocal() * old_ctx - s.low_freq_factor) /
                                      (s.high_freq_factor - s.low_freq_factor);
            const at::Tensor smoothed = (1.0 - smooth) * scaled / s.factor + smooth * scaled;
            const at::Tensor medium = (wavelen < high_wavelen)
                                          .logical_not()
                                          .logical_and((wavelen > low_wavelen).logical_not());
            inv_freq = at::where(medium, smoothed, scaled);
            break;
        }
        case RopeScalingKind::LongRope: {
            // transformers: the long factors when max(position_ids) + 1 exceeds the original
            // context (Phi-3's longrope frequency update), else the short ones;
            // 1 / (ext * base^(2i/d)) in float32.
            const std::vector<float>& ext =
                n_tokens > s.original_n_ctx ? s.long_factor : s.short_factor;
            SS_CHECK(static_cast<int64_t>(ext.size()) == rot_dim / 2, "longrope has ", ext.size(),
                     " factors for ", rot_dim, " rotary dims");
            inv_freq = 1.0 / (at::tensor(ext, f32) * at::pow(c.rope_theta, expo));
            break;
        }
        case RopeScalingKind::Yarn: {
            const double d = static_cast<double>(rot_dim);
            const double base = c.rope_theta;
            auto correction_dim = [&](double n_rot) {
                return d *
                       std::log(static_cast<double>(s.original_n_ctx) /
                                (n_rot * 2.0 * std::numbers::pi)) /
                       (2.0 * std::log(base));
            };
            double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
            if (s.truncate) {
                low = std::floor(low);
                high = std::ceil(high);
            }
            low = std::max(low, 0.0);
            high = std::min(high, d - 1.0);
            if (low == high) high += 0.001;  // no division by zero
            const at::Tensor pos_freqs = at::pow(base, expo);
            const at::Tensor extrapolation = 1.0 / pos_freqs;
            const at::Tensor interpolation = 1.0 / (s.factor * pos_freqs);
            const at::Tensor ramp =
                at::clamp((at::arange(rot_dim / 2, f32) - low) / (high - low), 0.0, 1.0);
            const at::Tensor extrapolation_factor = 1.0 - ramp;
            inv_freq =
                interpolation * (1.0 - extrapolation_factor) + extrapolation * extrapolation_factor;
            break;
        }
    }
    if (!s.freq_factors.empty()) {
        SS_CHECK(static_cast<int64_t>(s.freq_factors.size()) == rot_dim / 2, "rope_freqs has ",
                 s.freq_factors.size(), " values for ", rot_dim, " rotary dims");
        inv_freq = inv_freq / at::tensor(s.freq_factors, f32);
    }
    return inv_freq;
}

}  // namespace detail

at::Tensor rope_inverse_frequencies(const ModelConfig& c, int64_t n_tokens) {
    return detail::rope_inv_freq(c, c.rotary_dim > 0 ? c.rotary_dim : c.d_head, n_tokens, at::kCPU);
}

}  // namespace sinkscope::model
