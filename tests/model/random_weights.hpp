// Test helper: an in-memory WeightStore filled with seeded random weights for any registered
// architecture, generated from the registry's tensor-name table (every role the architecture
// names gets a tensor), so the model runs without files.
#pragma once

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/weights.hpp"
#include "sinkscope/model/config.hpp"
#include "sinkscope/model/registry.hpp"

namespace sinkscope::testutil {

class MemoryWeightStore : public io::WeightStore {
public:
    struct Entry {
        std::vector<int64_t> shape;
        std::vector<float> values;
    };
    std::map<std::string, Entry> tensors;
    std::string file = "memory.safetensors";

    std::vector<std::string> names() const override {
        std::vector<std::string> out;
        for (const auto& [k, v] : tensors) out.push_back(k);
        return out;
    }
    bool has(const std::string& name) const override { return tensors.count(name) != 0; }
    io::TensorView get(const std::string& name) const override {
        auto it = tensors.find(name);
        if (it == tensors.end()) throw InputError(file, "tensor " + name + " is missing");
        io::TensorView v;
        v.name = name;
        v.dtype = io::WeightDType::F32;
        v.shape = it->second.shape;
        v.data = reinterpret_cast<const uint8_t*>(it->second.values.data());
        v.n_bytes = it->second.values.size() * sizeof(float);
        v.file = file;
        return v;
    }
    std::vector<std::filesystem::path> files() const override { return {file}; }
};

// A tiny config.json that every family's reader accepts: the keys of all families at once (each
// reader takes its own), model_type from the registry. d_model 16, 2 layers, 4 query heads and 2
// key/value heads where the family reads num_key_value_heads, head_dim 6 (!= d_model / n_heads)
// where it reads head_dim, sliding window 3 where the architecture has one, 8x8 images in 4x4
// patches for vision.
inline nlohmann::json tiny_config_json(const model::ArchitectureInfo& a) {
    nlohmann::json j = {
        {"model_type", a.hf_model_types.front()},
        // Llama family, GPT-NeoX, Phi, BERT / RoBERTa, ViT
        {"hidden_size", 16},
        {"num_hidden_layers", 2},
        {"num_attention_heads", 4},
        {"num_key_value_heads", 2},
        {"head_dim", 6},
        {"intermediate_size", 24},
        {"vocab_size", 40},
        {"max_position_embeddings", 24},
        {"sliding_window", 3},
        {"partial_rotary_factor", 0.5},
        {"layer_norm_eps", 1e-5},
        {"type_vocab_size", 2},
        // GPT-2
        {"n_embd", 16},
        {"n_layer", 2},
        {"n_head", 4},
        {"n_inner", 24},
        {"n_positions", 24},
        // ViT
        {"image_size", 8},
        {"patch_size", 4},
        {"num_labels", 5},
    };
    // Phi-3 rotates int(6 * factor) dims, which must be even (Phi's 0.5 would give 3).
    if (a.hf_model_types.front() == "phi3") j["partial_rotary_factor"] = 1.0;
    return j;
}

// tiny_config_json read by the architecture's own config reader (so every registry fact, e.g.
// activation, q/k/v bias, (1 + w) norms, embedding scale, window, lands in the config as it does
// for a real checkpoint).
inline model::ModelConfig tiny_config(const std::string& arch) {
    return model::config_from_hf_json(tiny_config_json(model::find_architecture(arch)),
                                      "tiny config.json (" + arch + ")");
}

inline bool is_norm_weight(model::TensorRole r) {
    using R = model::TensorRole;
    return r == R::OutputNorm || r == R::AttnNorm || r == R::FfnNorm || r == R::EmbedNorm ||
           r == R::HeadNorm || r == R::AttnPostNorm || r == R::FfnPostNorm;
}

// The shape of `role` in a Hugging Face checkpoint of config c: [out, in] linear weights, except
// GPT-2's Conv1D ([in, out]); fused q/k/v is 3 * d_model rows (NeoX) or columns (GPT-2).
inline std::vector<int64_t> role_shape(const model::ArchitectureInfo& a,
                                       const model::ModelConfig& c, model::TensorRole r) {
    using R = model::TensorRole;
    const bool conv1d = a.hf_conv1d;  // HF Conv1D: weights [in, out]
    auto linear = [&](int64_t n_out, int64_t n_in) {
        return conv1d ? std::vector<int64_t>{n_in, n_out} : std::vector<int64_t>{n_out, n_in};
    };
    const int64_t D = c.d_model, qd = c.n_heads * c.d_head, kd = c.n_kv_heads * c.d_head,
                  F = c.d_mlp, P = c.patch_size;
    switch (r) {
        case R::TokenEmbed:
        case R::Output:
            return {c.d_vocab, D};
        case R::OutputBias:
            return {c.d_vocab};
        case R::PosEmbed:
            if (c.is_vision()) return {1, c.n_ctx, D};  // CLS + patches
            return {c.n_ctx + c.pos_offset, D};
        case R::TypeEmbed:
            return {c.n_token_types, D};
        case R::AttnQ:
            return linear(qd, D);
        case R::AttnK:
        case R::AttnV:
            return linear(kd, D);
        case R::AttnQBias:
            return {qd};
        case R::AttnKBias:
        case R::AttnVBias:
        case R::AttnSlotK:
        case R::AttnSlotV:
            return {kd};
        case R::AttnO:
            return linear(D, qd);
        case R::AttnQKV:
            return linear(qd + 2 * kd, D);
        case R::AttnQKVBias:
            return {qd + 2 * kd};
        case R::FfnGate:
        case R::FfnUp:
            return linear(F, D);
        case R::FfnUpBias:
            return {F};
        case R::FfnGateUp:
            return linear(2 * F, D);
        case R::FfnDown:
            return linear(D, F);
        case R::HeadDense:
            return linear(D, D);
        case R::PatchEmbed:
            return {D, c.n_channels, P, P};
        case R::ClsToken:
            return {1, 1, D};
        default:
            return {D};  // norm weights and biases, d_model-sized biases
    }
}

// True when a checkpoint of config c stores `role`: the tied output matrix and disabled q/k/v
// biases are not stored (as save_pretrained writes them), the kv slot only with c.kv_slot.
inline bool role_stored(const model::ModelConfig& c, model::TensorRole r) {
    using R = model::TensorRole;
    if (r == R::Output) return !c.tied_embeddings;
    if (r == R::AttnQBias || r == R::AttnKBias || r == R::AttnVBias) return c.qkv_bias;
    if (r == R::AttnSlotK || r == R::AttnSlotV) return c.kv_slot;
    return true;
}

// Seeded random HF-named weights for every role the registry names for c.architecture and c
// stores: N(0, 0.5^2) (attention far from uniform), norm weights with an effective scale of
// 1 + N(0, 0.2^2) (stored around 0 where the norm multiplies by 1 + w). Per-layer roles ("{L}" in
// the name) get one tensor per layer.
inline MemoryWeightStore random_weights(const model::ModelConfig& c, unsigned seed = 7) {
    using model::TensorRole;
    using model::WeightFormat;
    const model::ArchitectureInfo& a = model::find_architecture(c.architecture);
    MemoryWeightStore s;
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.5f);
    const float norm_center = c.norm_add_one ? 0.0f : 1.0f;
    for (int ri = 0; ri < model::kNumTensorRoles; ++ri) {
        const auto role = static_cast<TensorRole>(ri);
        if (!role_stored(c, role)) continue;
        const std::string n0 = model::tensor_name(a, WeightFormat::HuggingFace, role, 0);
        if (n0.empty()) continue;  // the architecture has no such role
        const bool per_layer = n0 != model::tensor_name(a, WeightFormat::HuggingFace, role, 1);
        for (int64_t l = per_layer ? 0 : -1; l < (per_layer ? c.n_layers : 0); ++l) {
            MemoryWeightStore::Entry e{role_shape(a, c, role), {}};
            int64_t n = 1;
            for (int64_t d : e.shape) n *= d;
            e.values.resize(static_cast<size_t>(n));
            for (float& v : e.values)
                v = is_norm_weight(role) ? norm_center + 0.4f * normal(rng) : normal(rng);
            s.tensors[model::tensor_name(a, WeightFormat::HuggingFace, role, l)] = std::move(e);
        }
    }
    return s;
}

}  // namespace sinkscope::testutil
