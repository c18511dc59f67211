// ModelConfig from HF config.json and llama2.c headers; the registry lookups.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sinkscope/core/error.hpp"
#include "sinkscope/model/config.hpp"
#include "sinkscope/model/registry.hpp"

using namespace sinkscope;
using namespace sinkscope::model;

namespace {
nlohmann::json base(const std::string& type) {
    return {{"model_type", type},       {"hidden_size", 64},        {"num_hidden_layers", 2},
            {"num_attention_heads", 8}, {"num_key_value_heads", 2}, {"intermediate_size", 96},
            {"vocab_size", 100},        {"rope_theta", 500000.0},   {"rms_norm_eps", 1e-5}};
}
}  // namespace

// HF keys map to TransformerLens names; missing num_key_value_heads/head_dim use HF defaults.
TEST(Config, HfLlamaKeys) {
    const ModelConfig c = config_from_hf_json(base("llama"), "config.json");
    EXPECT_EQ(c.architecture, "llama");
    EXPECT_EQ(c.n_layers, 2);
    EXPECT_EQ(c.n_heads, 8);
    EXPECT_EQ(c.n_kv_heads, 2);
    EXPECT_EQ(c.d_model, 64);
    EXPECT_EQ(c.d_head, 8);
    EXPECT_EQ(c.d_mlp, 96);
    EXPECT_EQ(c.d_vocab, 100);
    EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
    EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
    EXPECT_FALSE(c.tied_embeddings);
    auto j = base("llama");
    j.erase("num_key_value_heads");
    EXPECT_EQ(config_from_hf_json(j, "x").n_kv_heads, 8);
}

// Architecture facts: mistral's window, qwen2's bias and optional window, gemma's norm/scale/
// activation/head_dim/tied defaults.
TEST(Config, ArchitectureSpecifics) {
    auto m = base("mistral");
    m["sliding_window"] = 4096;
    EXPECT_EQ(config_from_hf_json(m, "x").window, 4096);
    auto q = base("qwen2");
    q["sliding_window"] = 32;
    q["use_sliding_window"] = false;
    const ModelConfig qc = config_from_hf_json(q, "x");
    EXPECT_TRUE(qc.qkv_bias);
    EXPECT_EQ(qc.window, 0);
    auto g = base("gemma");
    g["head_dim"] = 16;
    const ModelConfig gc = config_from_hf_json(g, "x");
    EXPECT_EQ(gc.d_head, 16);
    EXPECT_TRUE(gc.norm_add_one && gc.embed_scale && gc.tied_embeddings);
    EXPECT_EQ(gc.act, Activation::GeluTanh);
}

// Unknown model_type or rope_scaling type is UnsupportedError naming the file and the type; bad
// dims InputError.
TEST(Config, BadConfigs) {
    try {
        config_from_hf_json(base("t5"), "dir/config.json");
        FAIL();
    } catch (const UnsupportedError& e) {
        EXPECT_NE(std::string(e.what()).find("dir/config.json"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("t5"), std::string::npos);
    }
    auto j = base("llama");
    j["num_key_value_heads"] = 3;
    EXPECT_THROW(config_from_hf_json(j, "x"), InputError);
    j = base("llama");
    j.erase("hidden_size");
    EXPECT_THROW(config_from_hf_json(j, "x"), InputError);
    j = base("llama");
    j["rope_scaling"] = {{"type", "ntk-by-parts"}, {"factor", 2.0}};
    EXPECT_THROW(config_from_hf_json(j, "x"), UnsupportedError);
}

// llama2.c header: negative vocab means an unshared classifier; eps 1e-5 and theta 1e4 (run.c).
TEST(Config, Llama2cHeader) {
    io::Llama2cHeader h{64, 172, 5, 8, 4, 512, 512, true};
    const ModelConfig c = config_from_llama2c(h);
    EXPECT_EQ(c.d_head, 8);
    EXPECT_EQ(c.d_mlp, 172);
    EXPECT_EQ(c.n_kv_heads, 4);
    EXPECT_TRUE(c.tied_embeddings);
    EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
}

// The registry is one table: names unique, each HF model_type resolves to its row.
TEST(Registry, LookupsAreConsistent) {
    std::set<std::string> names;
    for (const auto& a : architectures()) {
        EXPECT_TRUE(names.insert(a.name).second) << a.name;
        for (const auto& t : a.hf_model_types)
            EXPECT_EQ(find_by_hf_model_type(t, "x").name, a.name);
        if (a.gguf_arch) {  // loadable from GGUF: names and a metadata reader
            EXPECT_EQ(find_by_gguf_arch(a.gguf_arch, "x").name, a.name);
            EXPECT_NE(a.gguf_names, nullptr) << a.name;
            EXPECT_NE(a.read_gguf_config, nullptr) << a.name;
        }
    }
    EXPECT_EQ(tensor_name(find_architecture("llama"), WeightFormat::Gguf, TensorRole::AttnQ, 3),
              "blk.3.attn_q.weight");
    EXPECT_THROW(find_by_gguf_arch("falcon", "f.gguf"), UnsupportedError);
}
