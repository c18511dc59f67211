// Internal: RoPE scaling, read from config.json / GGUF metadata and applied to the rotary
// inverse frequencies (the one place every rotary family's cos / sin tables come from).
#pragma once

#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>
#include <nlohmann/json_fwd.hpp>

#include "sinkscope/model/config.hpp"

namespace sinkscope::io {
class GgufFile;
}

namespace sinkscope::model {

// config.json "rope_scaling" (null / absent / rope_type "default": none). `n_ctx` is
// max_position_embeddings (dynamic: the length above which it scales; yarn: with
// original_max_position_embeddings, the factor as transformers derives it; longrope / su: the
// top-level original_max_position_embeddings of `j`). Unknown types are an UnsupportedError
// naming `origin` and the type; a missing or
// mistyped parameter an InputError naming `origin` and the key.
RopeScaling read_hf_rope_scaling(const nlohmann::json& j, int64_t n_ctx, const std::string& origin);

// GGUF "<arch>.rope.scaling.type" / ".factor" / ".original_context_length" (and the older
// ".rope.scale_linear") as llama.cpp applies them, plus the per-pair divisors of tensor
// `freq_name` (rope_freqs.weight, [rot_dim / 2] F32) when the file has it.
RopeScaling read_gguf_rope_scaling(const io::GgufFile& f, const std::string& arch_prefix,
                                   const std::string& freq_name, int64_t rot_dim, int64_t n_ctx);

namespace detail {

// Inverse frequencies [rot_dim / 2] f32 of a forward over `n_tokens` positions (dynamic NTK
// depends on it), computed in float32 as transformers' ROPE_INIT_FUNCTIONS do:
// default theta^(-2i/rot_dim), then c.rope_scaling's kind, then its freq_factors (divisors).
at::Tensor rope_inv_freq(const ModelConfig& c, int64_t rot_dim, int64_t n_tokens,
                         const at::Device& device);

}  // namespace detail

}  // namespace sinkscope::model
