// Internal: the rotary inverse frequencies with the checkpoint's RoPE scaling applied (the one
// place every rotary family's cos / sin tables come from). The readers: rope_scaling.hpp.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

#include "rope_scaling.hpp"
#include "sinkscope/model/config.hpp"

namespace sinkscope::model {

namespace detail {

// Inverse frequencies [rot_dim / 2] f32 of a forward over `n_tokens` positions (dynamic NTK
// depends on it), computed in float32 as transformers' ROPE_INIT_FUNCTIONS do:
// default theta^(-2i/rot_dim), then c.rope_scaling's kind, then its freq_factors (divisors).
at::Tensor rope_inv_freq(const ModelConfig& c, int64_t rot_dim, int64_t n_tokens,
                         const at::Device& device);

}  // namespace detail

}  // namespace sinkscope::model
