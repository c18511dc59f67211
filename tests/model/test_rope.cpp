// RoPE scaling (src/model/rope.cpp): config.json rope_scaling of every type read as transformers
// reads it, unknown types refused in one line, the scaled inverse frequencies against their
// closed forms (the values of ../shared/zoo/README.md), and the scaling applied by every rotary
// family.
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "random_weights.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
using nlohmann::json;

namespace {

// The zoo's RoPE-scaled Llamas: head_dim 16, rope_theta 1e4.
constexpr int64_t kDim = 16;
constexpr double kTheta = 1e4;

json llama_config(const json& rope_scaling, int64_t n_ctx) {
    return {{"model_type", "llama"},
            {"hidden_size", 64},
            {"num_hidden_layers", 2},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 2},
            {"intermediate_size", 160},
            {"vocab_size", 100},
            {"rope_theta", kTheta},
            {"max_position_embeddings", n_ctx},
            {"rope_scaling", rope_scaling}};
}

// theta^(-2i/d) in float64.
std::vector<double> default_inv_freq() {
    std::vector<double> out;
    for (int64_t i = 0; i < kDim / 2; ++i)
        out.push_back(std::pow(kTheta, -2.0 * static_cast<double>(i) / kDim));
    return out;
}

std::vector<double> inv_freq_of(const ModelConfig& c, int64_t n_tokens) {
    const at::Tensor f = rope_inverse_frequencies(c, n_tokens).to(at::kDouble);
    return std::vector<double>(f.data_ptr<double>(), f.data_ptr<double>() + f.numel());
}

// inv_freq equals default_inv_freq / divisors to float32 rounding.
void expect_divisors(const std::vector<double>& inv_freq, const std::vector<double>& divisors,
                     double rel) {
    const std::vector<double> base = default_inv_freq();
    ASSERT_EQ(inv_freq.size(), divisors.size());
    for (size_t i = 0; i < divisors.size(); ++i)
        EXPECT_NEAR(base[i] / inv_freq[i], divisors[i], rel * divisors[i]) << "pair " << i;
}

std::string message_of(const json& j, const std::string& origin) {
    try {
        config_from_hf_json(j, origin);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

// Every type transformers' ROPE_INIT_FUNCTIONS knows (besides longrope) is read with its keys;
// "type" is the older name of "rope_type"; null and "default" are no scaling.
TEST(RopeScaling, ReadsEveryHfType) {
    ModelConfig c = config_from_hf_json(llama_config({{"rope_type", "llama3"},
                                                      {"factor", 8.0},
                                                      {"low_freq_factor", 1.0},
                                                      {"high_freq_factor", 4.0},
                                                      {"original_max_position_embeddings", 64}},
                                                     512),
                                        "x");
    EXPECT_EQ(c.rope_scaling.kind, RopeScalingKind::Llama3);
    EXPECT_EQ(c.rope_scaling.factor, 8.0);
    EXPECT_EQ(c.rope_scaling.original_n_ctx, 64);
    c = config_from_hf_json(llama_config({{"type", "linear"}, {"factor", 4.0}}, 512), "x");
    EXPECT_EQ(c.rope_scaling.kind, RopeScalingKind::Linear);
    EXPECT_EQ(c.rope_scaling.factor, 4.0);
    c = config_from_hf_json(llama_config({{"rope_type", "dynamic"}, {"factor", 2.0}}, 32), "x");
    EXPECT_EQ(c.rope_scaling.kind, RopeScalingKind::Dynamic);
    // yarn: beta 32 / 1 by default, attention factor 0.1 ln(factor) + 1
    c = config_from_hf_json(
        llama_config(
            {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32}},
            128),
        "x");
    EXPECT_EQ(c.rope_scaling.kind, RopeScalingKind::Yarn);
    EXPECT_EQ(c.rope_scaling.beta_fast, 32.0);
    EXPECT_EQ(c.rope_scaling.beta_slow, 1.0);
    EXPECT_NEAR(c.rope_scaling.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-15);
    // mscale / mscale_all_dim: the ratio of the two temperatures (DeepSeek-V2 style)
    c = config_from_hf_json(
        llama_config(
            {{"rope_type", "yarn"}, {"factor", 4.0}, {"mscale", 0.707}, {"mscale_all_dim", 1.0}},
            128),
        "x");
    EXPECT_EQ(c.rope_scaling.original_n_ctx, 128);
    EXPECT_NEAR(c.rope_scaling.attention_factor,
                (0.1 * 0.707 * std::log(4.0) + 1.0) / (0.1 * std::log(4.0) + 1.0), 1e-15);
    for (const json& none : {json(nullptr), json{{"rope_type", "default"}}}) {
        c = config_from_hf_json(llama_config(none, 512), "x");
        EXPECT_FALSE(c.rope_scaling.active());
    }
    EXPECT_EQ(describe_rope_scaling(RopeScaling{}), "none");
}

// longrope (and its older name su) as transformers' _compute_longrope_parameters: with the
// top-level original_max_position_embeddings, factor = max_position_embeddings / original and the
// attention factor sqrt(1 + ln(factor) / ln(original)); the long divisors when the sequence is
// longer than the original context, the short ones otherwise. Closed forms in float64; the
// float32 computation is within float32 rounding (a few ulps, 1e-6 relative).
TEST(RopeScaling, LongRopeDivisorsBySequenceLength) {
    std::vector<double> short_f, long_f;
    for (int64_t i = 0; i < kDim / 2; ++i) {
        short_f.push_back(1.0 + 0.1 * double(i));
        long_f.push_back(2.0 + 0.5 * double(i));
    }
    for (const char* type : {"longrope", "su"}) {
        json j = llama_config({{"type", type}, {"short_factor", short_f}, {"long_factor", long_f}},
                              4096);
        j["original_max_position_embeddings"] = 512;
        const ModelConfig c = config_from_hf_json(j, "c.json");
        EXPECT_EQ(c.rope_scaling.kind, RopeScalingKind::LongRope) << type;
        EXPECT_EQ(c.rope_scaling.original_n_ctx, 512);
        EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
        EXPECT_NEAR(c.rope_scaling.attention_factor,
                    std::sqrt(1.0 + std::log(8.0) / std::log(512.0)), 1e-15);
        expect_divisors(inv_freq_of(c, 512), short_f, 1e-6);
        expect_divisors(inv_freq_of(c, 513), long_f, 1e-6);
        EXPECT_NE(describe_rope_scaling(c.rope_scaling).find("longrope (factor 8"),
                  std::string::npos)
            << describe_rope_scaling(c.rope_scaling);
    }
    // Without original_max_position_embeddings: factor from rope_scaling, original = n_ctx; an
    // explicit attention_factor wins.
    json j = llama_config({{"rope_type", "longrope"},
                           {"short_factor", short_f},
                           {"long_factor", long_f},
                           {"factor", 2.0},
                           {"attention_factor", 1.25}},
                          1024);
    ModelConfig c = config_from_hf_json(j, "c.json");
    EXPECT_EQ(c.rope_scaling.original_n_ctx, 1024);
    EXPECT_EQ(c.rope_scaling.factor, 2.0);
    EXPECT_EQ(c.rope_scaling.attention_factor, 1.25);
    // A list of the wrong length (rotary dims / 2 = 8) is refused naming the file.
    j["rope_scaling"]["short_factor"] = {1.0, 2.0};
    j["rope_scaling"]["long_factor"] = {1.0, 2.0};
    EXPECT_THROW(config_from_hf_json(j, "c.json"), InputError);
    EXPECT_NE(message_of(j, "c.json").find("c.json"), std::string::npos);
}

// Unknown types are refused in one line naming the config file and the type, by every family's
// reader; a missing parameter names its key.
TEST(RopeScaling, RefusesUnknownTypesInOneLine) {
    for (const char* type : {"ntk-by-parts", "mrope"}) {
        const json j = llama_config({{"rope_type", type}, {"factor", 2.0}}, 512);
        EXPECT_THROW(config_from_hf_json(j, "dir/config.json"), UnsupportedError);
        EXPECT_EQ(message_of(j, "dir/config.json"),
                  std::string("dir/config.json: not supported: rope_scaling type '") + type + "'");
    }
    for (const std::string arch : {"gpt_neox", "phi", "mistral", "qwen2", "gemma"}) {
        json j = testutil::tiny_config_json(find_architecture(arch));
        j["rope_scaling"] = {{"type", "weird"}, {"factor", 2.0}};
        EXPECT_EQ(message_of(j, "c.json"), "c.json: not supported: rope_scaling type 'weird'")
            << arch;
    }
    const json no_factor = llama_config({{"rope_type", "linear"}}, 512);
    EXPECT_THROW(config_from_hf_json(no_factor, "c.json"), InputError);
    EXPECT_NE(message_of(no_factor, "c.json").find("'factor'"), std::string::npos);
    const json no_original = llama_config({{"rope_type", "llama3"},
                                           {"factor", 8.0},
                                           {"low_freq_factor", 1.0},
                                           {"high_freq_factor", 4.0}},
                                          512);
    EXPECT_NE(message_of(no_original, "c.json").find("original_max_position_embeddings"),
              std::string::npos);
}

// The scaled frequencies of the zoo's four configs (README: "RoPE scaling" table).
TEST(RopeScaling, InverseFrequenciesMatchClosedForms) {
    const ModelConfig llama3 =
        config_from_hf_json(llama_config({{"rope_type", "llama3"},
                                          {"factor", 8.0},
                                          {"low_freq_factor", 1.0},
                                          {"high_freq_factor", 4.0},
                                          {"original_max_position_embeddings", 64}},
                                         512),
                            "x");
    expect_divisors(inv_freq_of(llama3, 10), {1, 1.2939758, 7.6673851, 8, 8, 8, 8, 8}, 1e-6);
    const ModelConfig linear =
        config_from_hf_json(llama_config({{"type", "linear"}, {"factor", 4.0}}, 512), "x");
    expect_divisors(inv_freq_of(linear, 10), {4, 4, 4, 4, 4, 4, 4, 4}, 1e-6);
    const ModelConfig yarn = config_from_hf_json(
        llama_config(
            {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32}},
            128),
        "x");
    expect_divisors(inv_freq_of(yarn, 10), {1, 1.6, 4, 4, 4, 4, 4, 4}, 1e-6);

    // dynamic NTK: unscaled up to max_position_embeddings (bitwise), then the base grows with T.
    const ModelConfig dynamic =
        config_from_hf_json(llama_config({{"rope_type", "dynamic"}, {"factor", 2.0}}, 32), "x");
    ModelConfig plain = dynamic;
    plain.rope_scaling = RopeScaling{};
    for (int64_t T : {1, 17, 32})
        EXPECT_TRUE(
            at::equal(rope_inverse_frequencies(dynamic, T), rope_inverse_frequencies(plain, T)))
            << T;
    const double base = kTheta * std::pow(2.0 * 120 / 32 - 1.0, 16.0 / 14.0);  // 84926.6
    EXPECT_NEAR(base, 84926.6, 0.1);
    const std::vector<double> got = inv_freq_of(dynamic, 120);
    for (int64_t i = 0; i < kDim / 2; ++i)
        EXPECT_NEAR(got[static_cast<size_t>(i)], std::pow(base, -2.0 * i / kDim),
                    1e-6 * std::pow(base, -2.0 * i / kDim))
            << "pair " << i;
}

// GGUF rope_freqs divide the frequencies after the scaling type (llama.cpp freq_factors).
TEST(RopeScaling, FreqFactorsDivideTheFrequencies) {
    ModelConfig c = config_from_hf_json(llama_config(nullptr, 512), "x");
    c.rope_scaling.freq_factors = {1, 2, 3, 4, 5, 6, 7, 8};
    expect_divisors(inv_freq_of(c, 4), {1, 2, 3, 4, 5, 6, 7, 8}, 1e-6);
    c.rope_scaling.kind = RopeScalingKind::Linear;
    c.rope_scaling.factor = 2.0;
    expect_divisors(inv_freq_of(c, 4), {2, 4, 6, 8, 10, 12, 14, 16}, 1e-6);
    EXPECT_EQ(describe_rope_scaling(c.rope_scaling),
              "linear (factor 2), rope_freqs [1, 2, 3, 4, 5, 6, 7, 8]");
}

class EveryRotaryFamily : public ::testing::TestWithParam<std::string> {};

// Linear factor 2 halves every angle: with one token repeated (layer 0's q is the same at every
// position), rotated q at position 2t with scaling equals rotated q at position t without, and
// differs from it without scaling: the families apply the config's scaling (partial rotary too).
TEST_P(EveryRotaryFamily, AppliesLinearScaling) {
    json j = testutil::tiny_config_json(find_architecture(GetParam()));
    const ModelConfig plain = config_from_hf_json(j, "tiny");
    j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
    const ModelConfig scaled = config_from_hf_json(j, "tiny");
    const testutil::MemoryWeightStore s = testutil::random_weights(plain, 5);
    const WeightSource src{&s, WeightFormat::HuggingFace, s.file};
    ModelInput in;
    in.ids = at::full({1, 12}, 7, at::TensorOptions().dtype(at::kLong));
    const std::string hook = hook_name(HookPoint::RotQ, 0);
    const at::Tensor q_plain =  // [1, pos, n_heads, d_head]
        build_model(plain, src).forward(in, CaptureSpec({hook}), nullptr).captured.at(hook);
    const at::Tensor q_scaled =
        build_model(scaled, src).forward(in, CaptureSpec({hook}), nullptr).captured.at(hook);
    const at::Tensor even = at::arange(0, 12, 2, at::TensorOptions().dtype(at::kLong));
    const at::Tensor half = at::arange(0, 6, at::TensorOptions().dtype(at::kLong));
    EXPECT_TRUE(
        at::allclose(q_scaled.index_select(1, even), q_plain.index_select(1, half), 1e-5, 1e-6));
    EXPECT_FALSE(
        at::allclose(q_scaled.index_select(1, even), q_plain.index_select(1, even), 1e-3, 1e-3));
}

INSTANTIATE_TEST_SUITE_P(Rope, EveryRotaryFamily, ::testing::Values("llama", "gpt_neox", "phi"));

// YaRN multiplies cos and sin by its attention factor: RoPE preserves the norm of every rotated
// pair, so |rot_q| = attention factor * |q| for a fully rotated head.
TEST(RopeScaling, YarnScalesCosAndSin) {
    json j = testutil::tiny_config_json(find_architecture("llama"));
    j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
    const ModelConfig c = config_from_hf_json(j, "tiny");
    const testutil::MemoryWeightStore s = testutil::random_weights(c, 5);
    const Model m = build_model(c, WeightSource{&s, WeightFormat::HuggingFace, s.file});
    ModelInput in;
    in.ids = at::tensor(std::vector<int64_t>{1, 5, 9, 2, 33, 17}, at::kLong).view({1, -1});
    const ForwardResult r = m.forward(in, CaptureSpec::all(), nullptr);
    const at::Tensor q = r.captured.at(hook_name(HookPoint::Q, 1)).to(at::kDouble);
    const at::Tensor rq = r.captured.at(hook_name(HookPoint::RotQ, 1)).to(at::kDouble);
    const double af = 0.1 * std::log(4.0) + 1.0;
    EXPECT_TRUE(at::allclose(rq.norm(2, {-1}), q.norm(2, {-1}) * af, 1e-5, 1e-6));
}
