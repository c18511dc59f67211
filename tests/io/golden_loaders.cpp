// Weight loaders on the real checkpoints of ../shared: shapes against config.json / headers /
// README, stories260K's GGUF against its llama2.c original, and every zoo model against the
// tensor inventory and embedding goldens of its manifest.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "sinkscope/io/gguf.hpp"
#include "sinkscope/io/model_files.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/weights.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::io;
namespace fs = std::filesystem;
using nlohmann::json;
using testutil::read_json;

namespace {

using Shape = std::vector<int64_t>;
}  // namespace

// tinystories656K: every tensor of a LlamaForCausalLM with the config's sizes (hidden 128,
// 2 layers, 8 q / 4 kv heads, FFN 384, vocab 2048), all finite F32. Its embeddings are tied and
// the one stored copy is lm_head.weight (model.embed_tokens.weight is absent): a loader must
// tie in either direction.
TEST(LoadersGolden, TinyStories656KMatchesConfig) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path dir = shared / "models/tinystories656K";
    const json cfg = read_json(dir / "config.json");
    const int64_t d_model = cfg["hidden_size"], n_layers = cfg["num_hidden_layers"];
    const int64_t n_heads = cfg["num_attention_heads"], n_kv = cfg["num_key_value_heads"];
    const int64_t d_mlp = cfg["intermediate_size"], d_vocab = cfg["vocab_size"];
    ASSERT_EQ(d_model, 128);  // README values, so a changed config cannot pass silently
    ASSERT_EQ(n_layers, 2);
    ASSERT_EQ(n_heads, 8);
    ASSERT_EQ(n_kv, 4);
    ASSERT_EQ(d_vocab, 2048);
    const int64_t d_head = d_model / n_heads;

    ASSERT_TRUE(cfg["tie_word_embeddings"].get<bool>());
    std::map<std::string, Shape> want = {{"lm_head.weight", {d_vocab, d_model}},
                                         {"model.norm.weight", {d_model}}};
    for (int64_t l = 0; l < n_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        want[p + "input_layernorm.weight"] = {d_model};
        want[p + "post_attention_layernorm.weight"] = {d_model};
        want[p + "self_attn.q_proj.weight"] = {n_heads * d_head, d_model};
        want[p + "self_attn.k_proj.weight"] = {n_kv * d_head, d_model};
        want[p + "self_attn.v_proj.weight"] = {n_kv * d_head, d_model};
        want[p + "self_attn.o_proj.weight"] = {d_model, n_heads * d_head};
        want[p + "mlp.gate_proj.weight"] = {d_mlp, d_model};
        want[p + "mlp.up_proj.weight"] = {d_mlp, d_model};
        want[p + "mlp.down_proj.weight"] = {d_model, d_mlp};
    }
    auto store = open_safetensors(dir);
    std::vector<std::string> want_names;
    for (const auto& [name, shape] : want) want_names.push_back(name);
    EXPECT_EQ(store->names(), want_names);
    for (const auto& [name, shape] : want) {
        TensorView v = store->get(name);
        EXPECT_EQ(v.shape, shape) << name;
        EXPECT_EQ(v.dtype, WeightDType::F32) << name;
        for (float x : to_f32(v)) ASSERT_TRUE(std::isfinite(x)) << name;
    }
}

// stories260K: the llama2.c header is the README's (dim 64, hidden 172, 5 layers, 8 heads,
// 4 kv heads, vocab 512 shared, seq_len 512) and every tensor of the llama.cpp-converted GGUF
// is bit-identical to its llama2.c original, with no RoPE row permutation of wq/wk (both
// formats rotate adjacent pairs); output.weight is a copy of the shared embedding.
TEST(LoadersGolden, Stories260KGgufEqualsLlama2c) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path dir = shared / "models/stories260K";
    Llama2cHeader h{};
    auto bin = open_llama2c(dir / "stories260K.bin", &h);
    EXPECT_EQ(h.dim, 64);
    EXPECT_EQ(h.hidden_dim, 172);
    EXPECT_EQ(h.n_layers, 5);
    EXPECT_EQ(h.n_heads, 8);
    EXPECT_EQ(h.n_kv_heads, 4);
    EXPECT_EQ(h.vocab_size, 512);
    EXPECT_EQ(h.seq_len, 512);
    EXPECT_TRUE(h.shared_classifier);
    EXPECT_FALSE(bin->has("wcls"));

    auto gguf = open_gguf_weights(dir / "stories260K.gguf");
    std::vector<std::pair<std::string, std::string>> pairs = {
        {"token_embedding_table", "token_embd.weight"},
        {"token_embedding_table", "output.weight"},
        {"rms_final_weight", "output_norm.weight"}};
    const std::pair<const char*, const char*> per_layer[] = {{"rms_att_weight", "attn_norm"},
                                                             {"wq", "attn_q"},
                                                             {"wk", "attn_k"},
                                                             {"wv", "attn_v"},
                                                             {"wo", "attn_output"},
                                                             {"rms_ffn_weight", "ffn_norm"},
                                                             {"w1", "ffn_gate"},
                                                             {"w2", "ffn_down"},
                                                             {"w3", "ffn_up"}};
    for (int l = 0; l < h.n_layers; ++l)
        for (auto [a, b] : per_layer)
            pairs.emplace_back(std::string(a) + "." + std::to_string(l),
                               "blk." + std::to_string(l) + "." + b + ".weight");
    EXPECT_EQ(gguf->names().size(), pairs.size());
    for (const auto& [a, b] : pairs) {
        SCOPED_TRACE(a + " vs " + b);
        TensorView x = bin->get(a), y = gguf->get(b);
        EXPECT_EQ(x.shape, y.shape);
        ASSERT_EQ(x.n_bytes, y.n_bytes);
        EXPECT_EQ(y.dtype, WeightDType::F32);
        EXPECT_EQ(std::memcmp(x.data, y.data, x.n_bytes), 0);
    }
    EXPECT_EQ(gguf->get("blk.0.attn_k.weight").shape, (Shape{32, 64}));  // [kv_dim, dim]
    EXPECT_EQ(gguf->get("blk.0.ffn_down.weight").shape, (Shape{64, 172}));
}

// Every zoo model opens; the number of stored parameters and the dtype of each tensor are
// those of its manifest, and every value is finite after conversion.
TEST(LoadersGolden, ZooSafetensorsMatchManifests) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    int n_models = 0, n_model_dirs = 0;  // every zoo model directory (config.json) is checked
    for (const auto& entry : fs::directory_iterator(shared / "zoo")) {
        n_model_dirs += fs::exists(entry.path() / "config.json");
        if (!fs::exists(entry.path() / "model.safetensors")) continue;
        const std::string model = entry.path().filename().string();
        SCOPED_TRACE(model);
        ++n_models;
        const json weights = read_json(entry.path() / "golden/manifest.json")["weights"];
        auto store = open_safetensors(entry.path());
        std::map<std::string, WeightDType> half;  // tensors the manifest lists as F16/BF16
        for (const auto& [dtype, list] : weights["tensors_by_dtype"].items()) {
            if (!list.is_array()) continue;
            for (const auto& n : list)
                half[n.get<std::string>()] =
                    dtype == "float16" ? WeightDType::F16 : WeightDType::BF16;
        }
        const int64_t n_f32 = std::stoll(weights["tensors_by_dtype"]["float32"].get<std::string>());
        int64_t n_params = 0, n_f32_seen = 0;
        for (const std::string& name : store->names()) {
            TensorView v = store->get(name);
            n_params += v.numel();
            if (half.count(name)) {
                EXPECT_EQ(v.dtype, half[name]) << name;
            } else {
                EXPECT_EQ(v.dtype, WeightDType::F32) << name;
                ++n_f32_seen;
            }
            for (float x : to_f32(v)) ASSERT_TRUE(std::isfinite(x)) << name;
        }
        EXPECT_EQ(n_params, weights["num_parameters_stored"].get<int64_t>());
        EXPECT_EQ(n_f32_seen, n_f32);
        EXPECT_EQ(store->names().size(), size_t(n_f32) + half.size());
    }
    EXPECT_EQ(n_models, n_model_dirs);
    EXPECT_GE(n_models, 9);  // the nine families of the zoo README, plus any added since
}

// BF16 and F16 embeddings decode bit-exactly: the zoo's hidden_states[0] (= embed_tokens[ids],
// computed by PyTorch) equals rows of the converted matrix for qwen2/mistral (BF16), phi (F16).
TEST(LoadersGolden, ZooHalfEmbeddingsMatchHiddenStates) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    for (const char* model : {"qwen2", "mistral", "phi"}) {
        SCOPED_TRACE(model);
        const fs::path dir = shared / "zoo" / model;
        auto store = open_safetensors(dir);
        TensorView emb = store->get("model.embed_tokens.weight");
        EXPECT_NE(emb.dtype, WeightDType::F32);
        const std::vector<float> w = to_f32(emb);  // [d_vocab, d_model]
        const int64_t d_model = emb.shape[1];
        const std::vector<int64_t> ids = read_npy(dir / "golden/fox/input_ids.npy").to_i64();
        const NpyArray hs = read_npy(dir / "golden/fox/hidden_states.npy");  // [L+1, T, d_model]
        ASSERT_EQ(hs.shape[2], d_model);
        const std::vector<double> h0 = hs.to_f64();
        double max_abs = 0;
        for (size_t t = 0; t < ids.size(); ++t)
            for (int64_t c = 0; c < d_model; ++c)
                max_abs = std::max(max_abs,
                                   std::abs(h0[t * d_model + c] - double(w[ids[t] * d_model + c])));
        EXPECT_EQ(max_abs, 0.0);
    }
}

// The three real model layouts of ../shared are classified with their tokenizers.
TEST(LoadersGolden, LocateSharedModels) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path models = shared / "models";
    ModelFiles hf = locate_model(models / "tinystories656K");
    EXPECT_EQ(hf.format, ModelFormat::HfDirectory);
    EXPECT_EQ(hf.weights, models / "tinystories656K/model.safetensors");
    EXPECT_EQ(hf.tokenizer, models / "tinystories656K/tokenizer.json");
    ModelFiles bin = locate_model(models / "stories260K/stories260K.bin");
    EXPECT_EQ(bin.format, ModelFormat::Llama2c);
    EXPECT_EQ(bin.tokenizer, models / "stories260K/tok512.bin");
    ModelFiles gguf = locate_model(models / "stories260K/stories260K.gguf");
    EXPECT_EQ(gguf.format, ModelFormat::Gguf);
    EXPECT_EQ(open_weights(gguf)->names().size(), 48u);
    for (const auto& entry : fs::directory_iterator(shared / "zoo")) {
        // Hugging Face model directories; zoo/gguf holds GGUF files (one per family).
        if (!fs::exists(entry.path() / "config.json")) continue;
        EXPECT_EQ(locate_model(entry.path()).format, ModelFormat::HfDirectory) << entry.path();
    }
}
