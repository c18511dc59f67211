// Every model of ../shared/zoo against its golden outputs (an independent float32 re-implementation
// of the Hugging Face modeling code, cross-checked with llama.cpp): token ids, logits, attention
// probabilities, pre-softmax scores and hidden states for every golden input.
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sinkscope/analysis/inputs.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/weights.hpp"
#include "sinkscope/model/model.hpp"
#include "testing.hpp"
#include "zoo_golden.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
namespace fs = std::filesystem;

namespace {

class ZooGolden : public ::testing::TestWithParam<const char*> {};

// Logits, attention, scores and hidden states within the float32 bound of two evaluations of the
// same function (zoo_tolerances: the goldens are float32 too), and the tokenizer's ids equal to
// the golden ids, for every golden input of the model.
TEST_P(ZooGolden, MatchesGoldenOutputs) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path dir = shared / "zoo" / GetParam();
    const Model m = load_model(dir);
    const auto inputs = testutil::zoo_inputs(dir);
    ASSERT_FALSE(inputs.empty());
    for (const auto& in : inputs) testutil::check_zoo_input(m, in);
}

INSTANTIATE_TEST_SUITE_P(Llama, ZooGolden, ::testing::Values("qwen2", "mistral", "gemma"),
                         [](const auto& info) { return std::string(info.param); });
// RoPE scaling: llama3, linear, dynamic NTK (paragraph T = 120 > max_position_embeddings 32,
// fox T = 17 below it) and yarn with its attention factor.
INSTANTIATE_TEST_SUITE_P(RopeScaling, ZooGolden,
                         ::testing::Values("llama3_rope", "llama_linear_rope", "llama_dynamic_rope",
                                           "llama_yarn_rope"),
                         [](const auto& info) { return std::string(info.param); });
// Dynamic NTK RoPE is made to run past max_position_embeddings (it recomputes its base for the
// input's length, rope.cpp), so the commands' input loader (the one context check of analyze,
// dump, perplexity, prune, fisher, dynamics) keeps every token: the paragraph input (T = 120 >
// max_position_embeddings 32) reaches the model whole and its forward gives the golden outputs at
// the full length (issue 46 item 8; the loader used to cut it to 32 tokens).
TEST(ZooRopeContext, DynamicNtkInputsRunAtTheirFullGoldenLength) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path dir = shared / "zoo" / "llama_dynamic_rope";
    const Model m = load_model(dir);
    EXPECT_EQ(m.config().context_limit(), 0);
    testutil::ScratchDir tmp;
    const auto inputs = testutil::zoo_inputs(dir);
    ASSERT_FALSE(inputs.empty());
    bool past_context = false;
    for (const auto& in : inputs) {
        SCOPED_TRACE(in.string());
        const std::vector<int32_t> golden = testutil::zoo_ids(in);
        past_context = past_context || int64_t(golden.size()) > m.config().n_ctx;
        const fs::path data = tmp.path() / (in.filename().string() + ".jsonl");
        testutil::write_text(data, nlohmann::json{{"ids", golden}}.dump() + "\n");
        const analysis::AnalysisInputs loaded =
            analysis::load_inputs(m, {.data = data}, tokenizer::BosPolicy::ModelDefault);
        ASSERT_EQ(loaded.size(), 1u);
        EXPECT_EQ(loaded.n_truncated, 0);
        EXPECT_EQ(loaded.truncation_note(), "");
        ASSERT_EQ(loaded.ids[0], golden);
        testutil::check_zoo_outputs(m, in, m.forward(loaded.model_input(m, 0), CaptureSpec::all()));
    }
    EXPECT_TRUE(past_context) << "no golden input is longer than max_position_embeddings";
}

// Every other scaling type keeps the limit its config states: the same checkpoint with rope_type
// linear (max_position_embeddings 32) has the paragraph cut to 32 tokens, said in one line, and
// refused with --over-context refuse.
TEST(ZooRopeContext, OtherScalingTypesKeepTheConfigContext) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path src = shared / "zoo" / "llama_dynamic_rope";
    testutil::ScratchDir tmp;
    const fs::path dir = tmp.path() / "linear";
    fs::create_directory(dir);
    for (const auto& e : fs::directory_iterator(src))
        if (e.is_regular_file() && e.path().filename() != "config.json")
            fs::copy_file(e.path(), dir / e.path().filename());
    auto cfg = nlohmann::json::parse(read_file(src / "config.json"));
    cfg["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
    testutil::write_text(dir / "config.json", cfg.dump());
    const Model m = load_model(dir);
    ASSERT_EQ(m.config().n_ctx, 32);
    EXPECT_EQ(m.config().context_limit(), 32);
    const std::vector<int32_t> golden = testutil::zoo_ids(src / "golden" / "paragraph");
    ASSERT_GT(golden.size(), 32u);
    const fs::path data = tmp.path() / "paragraph.jsonl";
    testutil::write_text(data, nlohmann::json{{"ids", golden}}.dump() + "\n");
    const analysis::AnalysisInputs loaded =
        analysis::load_inputs(m, {.data = data}, tokenizer::BosPolicy::ModelDefault);
    ASSERT_EQ(loaded.size(), 1u);
    EXPECT_EQ(loaded.n_truncated, 1);
    EXPECT_EQ(loaded.ids[0], std::vector<int32_t>(golden.begin(), golden.begin() + 32));
    const std::string note = loaded.truncation_note();
    EXPECT_EQ(note.find('\n'), std::string::npos) << note;
    EXPECT_NE(note.find("cut to 32 tokens, the model's context"), std::string::npos) << note;
    EXPECT_THROW(
        analysis::load_inputs(m, {.data = data, .over_context = analysis::OverContext::Refuse},
                              tokenizer::BosPolicy::ModelDefault),
        InputError);
}

INSTANTIATE_TEST_SUITE_P(Encoders, ZooGolden, ::testing::Values("bert", "roberta"),
                         [](const auto& info) { return std::string(info.param); });

INSTANTIATE_TEST_SUITE_P(Decoders, ZooGolden, ::testing::Values("gpt2", "pythia", "phi"),
                         [](const auto& info) { return std::string(info.param); });

INSTANTIATE_TEST_SUITE_P(Vision, ZooGolden, ::testing::Values("vit"),
                         [](const auto& info) { return std::string(info.param); });

// GGUF metadata entries, encoded as gguf-py writes them (key, type, value).
void put_u64(std::string& b, uint64_t v) {
    b.append(reinterpret_cast<const char*>(&v), 8);
}
void put_u32(std::string& b, uint32_t v) {
    b.append(reinterpret_cast<const char*>(&v), 4);
}
void put_str(std::string& b, const std::string& s) {
    put_u64(b, s.size());
    b += s;
}
constexpr uint32_t kGgufUint32 = 4, kGgufFloat32 = 6, kGgufString = 8;

// llama3_rope.gguf with rope_freqs.weight renamed away (so the file is the plain Llama of the
// RoPE zoo) and the rope.scaling.* keys `kv` (already encoded) inserted before the other keys. A
// padding key makes the insertion a multiple of the 32-byte alignment, so the data section and
// its offsets stay valid.
fs::path gguf_with_scaling_keys(const fs::path& shared, const fs::path& out, std::string kv,
                                uint64_t n_kv) {
    std::string bytes = read_file(shared / "zoo" / "gguf" / "llama3_rope.gguf");
    const size_t at = bytes.find("rope_freqs.weight");
    if (at == std::string::npos) throw InputError(out.string(), "no rope_freqs.weight");
    bytes.replace(at, 17, "rope_freqs.unused");
    const size_t pad_fixed = 8 + 8 + 4 + 8;  // key length, "test.pad", type, value length
    const size_t n_pad = (32 - (kv.size() + pad_fixed) % 32) % 32;
    put_str(kv, "test.pad");
    put_u32(kv, kGgufString);
    put_str(kv, std::string(n_pad, ' '));
    uint64_t count = 0;
    std::memcpy(&count, bytes.data() + 16, 8);
    count += n_kv + 1;
    std::memcpy(bytes.data() + 16, &count, 8);
    bytes.insert(24, kv);  // after magic, version, n_tensors, n_kv
    testutil::write_text(out, bytes);
    return out;
}

// The Llama-3 GGUF carries its scaling only as rope_freqs.weight: it gives the llama3_rope HF
// goldens (ignoring the tensor moves attention by up to 1.0).
TEST(ZooGguf, RopeFreqsGiveTheLlama3Goldens) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const Model m = load_model(shared / "zoo" / "gguf" / "llama3_rope.gguf");
    EXPECT_EQ(m.config().rope_scaling.freq_factors.size(), 8u);
    const auto inputs = testutil::zoo_inputs(shared / "zoo" / "llama3_rope");
    ASSERT_FALSE(inputs.empty());
    for (const auto& in : inputs) testutil::check_zoo_input(m, in);
}

// The GGUF with rope_freqs and the HF directory with rope_scaling llama3 give the same attention,
// within the float32 bound of two forwards of one model (forward_bound.hpp).
TEST(ZooGguf, RopeFreqsGiveTheHfAttention) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const Model gguf = load_model(shared / "zoo" / "gguf" / "llama3_rope.gguf");
    const Model hf = load_model(shared / "zoo" / "llama3_rope");
    const ModelConfig& c = hf.config();
    for (const auto& in : testutil::zoo_inputs(shared / "zoo" / "llama3_rope")) {
        SCOPED_TRACE(in.string());
        const std::vector<int32_t> ids = testutil::zoo_ids(in);
        const ForwardResult a = gguf.forward(ids, CaptureSpec::attention());
        const ForwardResult b = hf.forward(ids, CaptureSpec::attention());
        std::vector<at::Tensor> pa, pb, sb;
        for (int64_t l = 0; l < c.n_layers; ++l) {
            pa.push_back(a.captured.at(hook_name(HookPoint::Pattern, l))[0]);
            pb.push_back(b.captured.at(hook_name(HookPoint::Pattern, l))[0]);
            sb.push_back(b.captured.at(hook_name(HookPoint::AttnScores, l))[0]);
        }
        const double max_score = testutil::max_abs(at::stack(sb));  // over layers, finite
        const auto T = static_cast<int64_t>(ids.size());
        testutil::expect_close("attention", at::stack(pa).to(at::kDouble),
                               at::stack(pb).to(at::kDouble),
                               testutil::attention_tol(c, T, max_score));
    }
}

// A rope_freqs tensor of the wrong length (7 values for 16 rotary dims) is a one-line InputError
// naming the file and the tensor.
TEST(ZooGguf, WrongLengthRopeFreqsIsRefused) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    std::string bytes = read_file(shared / "zoo" / "gguf" / "llama3_rope.gguf");
    // Tensor info: name (u64 length + bytes), u32 n_dims, u64 dims[0].
    const std::string name = "rope_freqs.weight";
    const size_t at_name = bytes.find(name);
    ASSERT_NE(at_name, std::string::npos);
    const size_t at_dim = at_name + name.size() + sizeof(uint32_t);
    uint64_t dim = 0;
    std::memcpy(&dim, bytes.data() + at_dim, sizeof dim);
    ASSERT_EQ(dim, 8u);
    dim = 7;
    std::memcpy(bytes.data() + at_dim, &dim, sizeof dim);
    testutil::ScratchDir tmp;
    const fs::path bad = tmp / "bad_rope_freqs.gguf";
    testutil::write_text(bad, bytes);
    try {
        load_model(bad);
        FAIL() << "a 7-value rope_freqs was accepted";
    } catch (const InputError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(bad.string()), std::string::npos) << what;
        EXPECT_NE(what.find("rope_freqs.weight"), std::string::npos) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
}

// llama.rope.scaling.type linear / yarn with .factor (and .original_context_length) as llama.cpp
// applies them give the HF goldens of the same scaling (same weights in every RoPE zoo model).
TEST(ZooGguf, RopeScalingKeysGiveTheHfGoldens) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    std::string linear;
    put_str(linear, "llama.rope.scaling.type");
    put_u32(linear, kGgufString);
    put_str(linear, "linear");
    put_str(linear, "llama.rope.scaling.factor");
    put_u32(linear, kGgufFloat32);
    const float four = 4.0f;
    linear.append(reinterpret_cast<const char*>(&four), 4);
    const Model lin = load_model(gguf_with_scaling_keys(shared, tmp / "linear.gguf", linear, 2));
    EXPECT_EQ(lin.config().rope_scaling.kind, RopeScalingKind::Linear);
    EXPECT_TRUE(lin.config().rope_scaling.freq_factors.empty());
    for (const auto& in : testutil::zoo_inputs(shared / "zoo" / "llama_linear_rope"))
        testutil::check_zoo_input(lin, in);

    std::string yarn;
    put_str(yarn, "llama.rope.scaling.type");
    put_u32(yarn, kGgufString);
    put_str(yarn, "yarn");
    put_str(yarn, "llama.rope.scaling.factor");
    put_u32(yarn, kGgufFloat32);
    yarn.append(reinterpret_cast<const char*>(&four), 4);
    put_str(yarn, "llama.rope.scaling.original_context_length");
    put_u32(yarn, kGgufUint32);
    put_u32(yarn, 32);
    const Model y = load_model(gguf_with_scaling_keys(shared, tmp / "yarn.gguf", yarn, 3));
    EXPECT_EQ(y.config().rope_scaling.kind, RopeScalingKind::Yarn);
    for (const auto& in : testutil::zoo_inputs(shared / "zoo" / "llama_yarn_rope"))
        testutil::check_zoo_input(y, in);

    // An unknown scaling type: one line naming the file and the key.
    std::string unknown;
    put_str(unknown, "llama.rope.scaling.type");
    put_u32(unknown, kGgufString);
    put_str(unknown, "longrope");
    const fs::path bad = gguf_with_scaling_keys(shared, tmp / "unknown.gguf", unknown, 1);
    try {
        load_model(bad);
        FAIL() << "rope.scaling.type longrope was accepted";
    } catch (const UnsupportedError& e) {
        EXPECT_EQ(std::string(e.what()), bad.string() +
                                             ": not supported: key llama.rope.scaling.type = "
                                             "'longrope' (RoPE scaling type)");
    }
}

// A GGUF of ../shared/zoo/gguf and the zoo HF directory it was converted from.
struct GgufTwin {
    const char* file;
    const char* hf_dir;
};

class ZooGgufTwin : public ::testing::TestWithParam<GgufTwin> {};

// Every family's GGUF gives the goldens of its HF directory, tokenizer ids included: the
// converter's layouts (GPT-2 Conv1D transposed, GPT-NeoX q/k/v re-ordered, Gemma 1 + w, partial
// rotary as rope.dimension_count) are undone by the loader.
TEST_P(ZooGgufTwin, GivesTheHfGoldens) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const Model m = load_model(shared / "zoo" / "gguf" / GetParam().file);
    const auto inputs = testutil::zoo_inputs(shared / "zoo" / GetParam().hf_dir);
    ASSERT_FALSE(inputs.empty());
    for (const auto& in : inputs) testutil::check_zoo_input(m, in);
}

// The hyper-parameters read from GGUF metadata equal those read from the HF config.json (two
// independent readers). Not compared: tied_embeddings (gpt2.gguf stores the tied head as a copy)
// and norm_add_one (the converter stores Gemma's 1 + w).
TEST_P(ZooGgufTwin, ConfigEqualsTheHfConfig) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const ModelConfig g = load_model(shared / "zoo" / "gguf" / GetParam().file).config();
    const ModelConfig h = load_model(shared / "zoo" / GetParam().hf_dir).config();
    EXPECT_EQ(g.architecture, h.architecture);
    EXPECT_EQ(g.n_layers, h.n_layers);
    EXPECT_EQ(g.n_heads, h.n_heads);
    EXPECT_EQ(g.n_kv_heads, h.n_kv_heads);
    EXPECT_EQ(g.d_model, h.d_model);
    EXPECT_EQ(g.d_head, h.d_head);
    EXPECT_EQ(g.d_mlp, h.d_mlp);
    EXPECT_EQ(g.d_vocab, h.d_vocab);
    EXPECT_EQ(g.norm, h.norm);
    // GGUF stores the epsilon as float32: equal to the config's double within f32 rounding.
    EXPECT_NEAR(g.norm_eps, h.norm_eps, h.norm_eps * 0x1p-23);
    EXPECT_EQ(g.positions, h.positions);
    EXPECT_EQ(g.rotary_dim, h.rotary_dim);
    EXPECT_EQ(g.rope_theta, h.rope_theta);
    EXPECT_EQ(g.parallel_residual, h.parallel_residual);
    EXPECT_EQ(g.act, h.act);
    EXPECT_EQ(g.qkv_bias, h.qkv_bias);
    EXPECT_EQ(g.embed_scale, h.embed_scale);
    EXPECT_EQ(g.window, h.window);
    if (h.positions == PositionKind::Learned) {
        EXPECT_EQ(g.n_ctx, h.n_ctx);
    }
}

INSTANTIATE_TEST_SUITE_P(Families, ZooGgufTwin,
                         ::testing::Values(GgufTwin{"gpt2.gguf", "gpt2"},
                                           GgufTwin{"pythia.gguf", "pythia"},
                                           GgufTwin{"qwen2.gguf", "qwen2"},
                                           GgufTwin{"gemma.gguf", "gemma"},
                                           GgufTwin{"phi.gguf", "phi"}),
                         [](const auto& info) { return std::string(info.param.hf_dir); });

// A required key of a family GGUF, renamed (same length, so every offset stays valid), is a
// one-line InputError naming the file and the key; nothing falls back to a default.
TEST(ZooGguf, MissingFamilyKeyIsNamed) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const std::pair<const char*, const char*> cases[] = {
        {"gpt2.gguf", "gpt2.attention.layer_norm_epsilon"},
        {"gpt2.gguf", "gpt2.context_length"},
        {"pythia.gguf", "gptneox.rope.dimension_count"},
        {"pythia.gguf", "gptneox.use_parallel_residual"},
        {"pythia.gguf", "gptneox.attention.layer_norm_epsilon"},
        {"phi.gguf", "phi2.rope.dimension_count"},
        {"qwen2.gguf", "qwen2.attention.layer_norm_rms_epsilon"},
        {"gemma.gguf", "gemma.feed_forward_length"},
    };
    int n = 0;
    for (const auto& [file, key] : cases) {
        SCOPED_TRACE(std::string(file) + " " + key);
        std::string bytes = read_file(shared / "zoo" / "gguf" / file);
        std::string entry;  // the key as stored: u64 length, bytes
        put_str(entry, key);
        const size_t at = bytes.find(entry);
        ASSERT_NE(at, std::string::npos);
        bytes[at + entry.size() - 1] = '~';  // "...epsilon" -> "...epsilo~"
        const fs::path bad = tmp / ("bad" + std::to_string(n++) + ".gguf");
        testutil::write_text(bad, bytes);
        try {
            load_model(bad);
            ADD_FAILURE() << "loaded without " << key;
        } catch (const InputError& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find(bad.string()), std::string::npos) << what;
            EXPECT_NE(what.find(std::string("'") + key + "'"), std::string::npos) << what;
            EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        }
    }
}

// A minimal GGUF v3 writer (GGUF specification: header, key/values, tensor infos with ne in ggml
// order = reversed PyTorch shape, F32 data at offsets aligned to the default alignment 32).
class GgufWriter {
public:
    void str(const std::string& key, const std::string& v) {
        head(key, kGgufString);
        put_str(kv_, v);
    }
    void u32(const std::string& key, uint32_t v) {
        head(key, kGgufUint32);
        put_u32(kv_, v);
    }
    void f32(const std::string& key, float v) {
        head(key, kGgufFloat32);
        kv_.append(reinterpret_cast<const char*>(&v), 4);
    }
    void boolean(const std::string& key, bool v) {
        head(key, kGgufBool);
        kv_.push_back(v ? 1 : 0);
    }
    // shape in PyTorch order, data row-major
    void tensor(const std::string& name, const std::vector<int64_t>& shape,
                std::vector<float> data) {
        tensors_.push_back({name, shape, std::move(data)});
    }
    std::string bytes() const {
        std::string b = "GGUF";
        put_u32(b, 3);
        put_u64(b, tensors_.size());
        put_u64(b, n_kv_);
        b += kv_;
        std::string data;
        for (const auto& t : tensors_) {
            put_str(b, t.name);
            put_u32(b, static_cast<uint32_t>(t.shape.size()));
            for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) put_u64(b, uint64_t(*d));
            put_u32(b, 0);  // GGML_TYPE_F32
            put_u64(b, data.size());
            data.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * 4);
            data.resize((data.size() + 31) / 32 * 32, '\0');
        }
        b.resize((b.size() + 31) / 32 * 32, '\0');
        return b + data;
    }

private:
    static constexpr uint32_t kGgufBool = 7;
    struct Tensor {
        std::string name;
        std::vector<int64_t> shape;
        std::vector<float> data;
    };
    void head(const std::string& key, uint32_t type) {
        put_str(kv_, key);
        put_u32(kv_, type);
        ++n_kv_;
    }
    std::string kv_;
    uint64_t n_kv_ = 0;
    std::vector<Tensor> tensors_;
};

// ../shared/zoo/bert as llama.cpp's convert_hf_to_gguf.py writes a BERT (arch "bert", an
// embedding model: the MLM head cls.* is dropped). Names from llama.cpp's LLM_TENSOR_NAMES /
// gguf-py's TensorNameMap, written out here independently of the registry; hyper-parameters
// from config.json under the converter's keys. No vocabulary: ids only.
fs::path write_bert_gguf(const fs::path& shared, const fs::path& out) {
    const fs::path dir = shared / "zoo" / "bert";
    const auto cfg = nlohmann::json::parse(read_file(dir / "config.json"));
    GgufWriter w;
    w.str("general.architecture", "bert");
    w.u32("bert.block_count", cfg.at("num_hidden_layers").get<uint32_t>());
    w.u32("bert.context_length", cfg.at("max_position_embeddings").get<uint32_t>());
    w.u32("bert.embedding_length", cfg.at("hidden_size").get<uint32_t>());
    w.u32("bert.feed_forward_length", cfg.at("intermediate_size").get<uint32_t>());
    w.u32("bert.attention.head_count", cfg.at("num_attention_heads").get<uint32_t>());
    w.f32("bert.attention.layer_norm_epsilon", cfg.at("layer_norm_eps").get<float>());
    w.boolean("bert.attention.causal", false);
    w.u32("bert.pooling_type", 2);  // CLS (unused by sinkscope)
    const std::pair<const char*, const char*> renames[] = {
        {"embeddings.word_embeddings", "token_embd"},
        {"embeddings.position_embeddings", "position_embd"},
        {"embeddings.token_type_embeddings", "token_types"},
        {"embeddings.LayerNorm", "token_embd_norm"},
        {"attention.self.query", "attn_q"},
        {"attention.self.key", "attn_k"},
        {"attention.self.value", "attn_v"},
        {"attention.output.dense", "attn_output"},
        {"attention.output.LayerNorm", "attn_output_norm"},
        {"intermediate.dense", "ffn_up"},
        {"output.dense", "ffn_down"},
        {"output.LayerNorm", "layer_output_norm"},
    };
    const auto store = io::open_safetensors(dir / "model.safetensors");
    int n = 0;
    for (const std::string& name : store->names()) {
        if (name.rfind("bert.", 0) != 0) continue;  // cls.*: the MLM head
        std::string rest = name.substr(5), gguf;    // e.g. encoder.layer.1.output.dense.weight
        const std::string layer_prefix = "encoder.layer.";
        if (rest.rfind(layer_prefix, 0) == 0) {
            const size_t dot = rest.find('.', layer_prefix.size());
            gguf = "blk." + rest.substr(layer_prefix.size(), dot - layer_prefix.size()) + ".";
            rest = rest.substr(dot + 1);
        }
        const size_t last = rest.rfind('.');
        const std::string module = rest.substr(0, last), param = rest.substr(last);
        bool found = false;
        for (const auto& [hf, ll] : renames)
            if (module == hf) {
                gguf += ll + param;
                found = true;
            }
        if (!found) throw InputError(name, "no GGUF name in the test's table");
        const io::TensorView v = store->get(name);
        w.tensor(gguf, v.shape, io::to_f32(v));
        ++n;
    }
    if (n != 5 + 16 * cfg.at("num_hidden_layers").get<int>())
        throw InputError(dir.string(), "unexpected tensor count " + std::to_string(n));
    testutil::write_text(out, w.bytes());
    return out;
}

// A BERT GGUF (no MLM head) gives the attention, scores and hidden states of the HF goldens and no
// logits; generation-style uses of the logits are refused.
TEST(ZooGguf, BertWithoutHeadGivesTheHfAttention) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const Model m = load_model(write_bert_gguf(shared, tmp / "bert.gguf"));
    EXPECT_EQ(m.config().architecture, "bert");
    EXPECT_FALSE(m.config().causal);
    EXPECT_EQ(m.config().n_token_types, 2);
    const auto inputs = testutil::zoo_inputs(shared / "zoo" / "bert");
    ASSERT_FALSE(inputs.empty());
    for (const auto& in : inputs) testutil::check_zoo_input(m, in, /*lm_head=*/false);
    // An encoder without an LM head (nor, in this test file, a vocabulary): no perplexity of
    // either kind.
    EXPECT_THROW(compute_perplexity(m, {{101, 102, 103}}), UnsupportedError);
    EXPECT_THROW(compute_masked_perplexity(m, {{101, 2000, 102}}, {}), UnsupportedError);
}

}  // namespace
