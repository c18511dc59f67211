// The architecture registry: ONE table of every supported architecture (name, HF model_type
// strings, GGUF arch, family builder, tensor names per role and weight format). Adding an
// architecture = one table row (+ one family file when the computation differs).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sinkscope/model/config.hpp"

namespace sinkscope::io {
class WeightStore;
}

namespace sinkscope::model {

class Transformer;
struct RuntimeOptions;

// Tensor roles of a decoder block and the model ends.
enum class TensorRole {
    TokenEmbed, OutputNorm, Output,
    AttnNorm, AttnQ, AttnK, AttnV, AttnO, AttnQBias, AttnKBias, AttnVBias,
    FfnNorm, FfnGate, FfnUp, FfnDown,
};
constexpr int kNumTensorRoles = 15;

// Tensor names of one naming scheme; "{L}" stands for the layer index. nullptr: role absent.
struct TensorNames {
    std::array<const char*, kNumTensorRoles> by_role;
};

// Weights as read from disk, with what the family needs to interpret them.
struct WeightSource {
    const io::WeightStore* store = nullptr;
    WeightFormat format = WeightFormat::HuggingFace;
    std::string origin;  // file or directory, for error messages
};

using FamilyBuilder = std::unique_ptr<Transformer> (*)(const ModelConfig&, const WeightSource&,
                                                        const RuntimeOptions&);

struct ArchitectureInfo {
    const char* name;                       // sinkscope's name (ModelConfig::architecture)
    std::vector<std::string> hf_model_types;  // config.json "model_type" values
    const char* gguf_arch;                  // general.architecture (nullptr: not from GGUF)
    FamilyBuilder build;
    const TensorNames* hf_names;
    const TensorNames* gguf_names;
    const TensorNames* llama2c_names;       // nullptr: no llama2.c export
    // llama.cpp's converter permutes Q/K rows of this architecture for interleaved RoPE
    // (convert_hf_to_gguf.py LlamaModel.permute); the loader undoes it (see llama.cpp).
    bool gguf_qk_interleaved;
    // HF-config facts that are properties of the architecture rather than of config.json.
    Activation default_act;
    bool qkv_bias;
    bool norm_add_one_hf;  // RMSNorm (1 + w) in HF weights; GGUF stores 1 + w already
    bool embed_scale;
    bool has_sliding_window;
};

const std::vector<ArchitectureInfo>& architectures();
// Lookups throw UnsupportedError naming `origin` and the unknown name.
const ArchitectureInfo& find_architecture(const std::string& name);
const ArchitectureInfo& find_by_hf_model_type(const std::string& model_type,
                                              const std::string& origin);
const ArchitectureInfo& find_by_gguf_arch(const std::string& arch, const std::string& origin);
// The llama2.c checkpoint format is one architecture (llama).
const ArchitectureInfo& llama2c_architecture();

// Tensor name for a role in a format ("" when the role is absent in that format).
std::string tensor_name(const ArchitectureInfo& arch, WeightFormat format, TensorRole role,
                        int64_t layer = -1);

// Family builders (one file each).
std::unique_ptr<Transformer> build_llama_family(const ModelConfig&, const WeightSource&,
                                                const RuntimeOptions&);

}  // namespace sinkscope::model
