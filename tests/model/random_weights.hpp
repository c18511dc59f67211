// Test helper: an in-memory WeightStore filled with seeded random weights for any registered
// architecture and weight format, so the model runs without files.
#pragma once

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

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

// A tiny config of architecture `arch` (GQA 4 query / 2 kv heads).
inline model::ModelConfig tiny_config(const std::string& arch) {
    const model::ArchitectureInfo& a = model::find_architecture(arch);
    model::ModelConfig c;
    c.architecture = arch;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.d_model = 16;
    c.d_head = arch == "gemma" ? 6 : 4;  // Gemma: d_head independent of d_model / n_heads
    c.d_mlp = 24;
    c.d_vocab = 40;
    c.n_ctx = 64;
    c.act = a.default_act;
    c.qkv_bias = a.qkv_bias;
    c.norm_add_one = a.norm_add_one_hf;
    c.embed_scale = a.embed_scale;
    c.tied_embeddings = a.embed_scale;
    c.window = a.has_sliding_window ? 3 : 0;
    return c;
}

// Adds seeded random tensors by role with HF names: std 0.5 (attention far from uniform), or
// 1 + 0.2 N(0, 1) for norm weights. Used by random_hf_weights and by the families whose tensor
// shapes differ from the Llama ones.
class RandomFiller {
public:
    RandomFiller(MemoryWeightStore& store, const std::string& arch, unsigned seed)
        : store_(store), arch_(model::find_architecture(arch)), rng_(seed) {}
    void add(model::TensorRole role, int64_t layer, std::vector<int64_t> shape,
             bool norm = false) {
        int64_t n = 1;
        for (auto d : shape) n *= d;
        MemoryWeightStore::Entry e{shape, std::vector<float>(static_cast<size_t>(n))};
        for (auto& v : e.values) v = norm ? 1.0f + 0.2f * normal_(rng_) : normal_(rng_);
        store_.tensors[model::tensor_name(arch_, model::WeightFormat::HuggingFace, role, layer)] =
            e;
    }

private:
    MemoryWeightStore& store_;
    const model::ArchitectureInfo& arch_;
    std::mt19937 rng_;
    std::normal_distribution<float> normal_{0.0f, 0.5f};
};

// Random weights with HF names for `c` (std 0.5 so attention is far from uniform).
inline MemoryWeightStore random_hf_weights(const model::ModelConfig& c, unsigned seed = 7) {
    using model::TensorRole;
    MemoryWeightStore s;
    RandomFiller filler(s, c.architecture, seed);
    auto add = [&](TensorRole role, int64_t layer, std::vector<int64_t> shape, bool norm = false) {
        filler.add(role, layer, std::move(shape), norm);
    };
    const int64_t D = c.d_model, qd = c.n_heads * c.d_head, kd = c.n_kv_heads * c.d_head;
    add(TensorRole::TokenEmbed, -1, {c.d_vocab, D});
    add(TensorRole::OutputNorm, -1, {D}, true);
    if (!c.tied_embeddings) add(TensorRole::Output, -1, {c.d_vocab, D});
    for (int64_t l = 0; l < c.n_layers; ++l) {
        add(TensorRole::AttnNorm, l, {D}, true);
        add(TensorRole::AttnQ, l, {qd, D});
        add(TensorRole::AttnK, l, {kd, D});
        add(TensorRole::AttnV, l, {kd, D});
        add(TensorRole::AttnO, l, {D, qd});
        if (c.qkv_bias) {
            add(TensorRole::AttnQBias, l, {qd});
            add(TensorRole::AttnKBias, l, {kd});
            add(TensorRole::AttnVBias, l, {kd});
        }
        add(TensorRole::FfnNorm, l, {D}, true);
        add(TensorRole::FfnGate, l, {c.d_mlp, D});
        add(TensorRole::FfnUp, l, {c.d_mlp, D});
        add(TensorRole::FfnDown, l, {D, c.d_mlp});
    }
    return s;
}

}  // namespace sinkscope::testutil
