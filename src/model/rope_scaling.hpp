// Internal: RoPE scaling as a checkpoint states it, read from config.json / GGUF metadata
// (torch-free; applied to the inverse frequencies by rope.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

// A GGUF tensor of per-pair RoPE frequency divisors (llama.cpp rope_freqs.weight, phi3
// rope_factors_short / _long): [rot_dim / 2] F32, each finite and positive; an InputError
// naming the file and the tensor otherwise.
std::vector<float> read_gguf_divisors(const io::GgufFile& f, const std::string& name,
                                      int64_t rot_dim);

}  // namespace sinkscope::model
