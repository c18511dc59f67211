// Every model of ../shared/zoo against its golden outputs (an independent float32 re-implementation
// of the Hugging Face modeling code, cross-checked with llama.cpp): token ids, logits, attention
// probabilities, pre-softmax scores and hidden states for every golden input.
#include <filesystem>
#include <string>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "sinkscope/model/model.hpp"
#include "testing.hpp"
#include "zoo_golden.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
namespace fs = std::filesystem;

namespace {

// Scores: |scores| reach ~80, so the golden README's float32 agreement is ~1e-4 absolute.
constexpr double kScoreTol = 2e-4;

// The goldens are float32 themselves. Mistral's (3 layers, sliding window) deviate from a float64
// evaluation by 6.6e-6 in layer 0's scores already, where sinkscope's float32 scores deviate by
// 4.8e-6 from the golden and equal a float32 torch run of HF's code exactly; by layer 2 the two
// float32 roundings differ by 1.03e-5 in attention (llama.cpp vs the golden: 1.1e-5, zoo
// CROSSCHECK.md). Every other model meets 1e-5.
double attention_tol(const std::string& model) {
    return model == "mistral" ? 1.5e-5 : testutil::kZooAttentionTol;
}

// Runs one golden input through the model and compares every golden array it has.
void check_input(const Model& m, const fs::path& dir, double att_tol) {
    SCOPED_TRACE(dir.string());
    const ModelConfig& c = m.config();
    ModelInput input;
    std::vector<int32_t> ids;
    if (fs::exists(dir / "pixel_values.npy")) {
        const at::Tensor px = testutil::zoo_tensor(dir / "pixel_values.npy");  // [C, H, W]
        input.pixel_values = px.to(at::kFloat).unsqueeze(0);
    } else {
        ids = testutil::zoo_ids(dir);
        // The model's own tokenizer reproduces the golden ids (text and special tokens).
        if (m.tokenizer()) {
            const auto manifest_text = testutil::zoo_text(dir);
            if (manifest_text) {
                EXPECT_EQ(m.encode(*manifest_text, tokenizer::BosPolicy::ModelDefault), ids)
                    << "token ids of '" << *manifest_text << "'";
            }
        }
        std::vector<int64_t> wide(ids.begin(), ids.end());
        input.ids = at::tensor(wide, at::TensorOptions().dtype(at::kLong)).view({1, -1});
        if (fs::exists(dir / "token_type_ids.npy"))
            input.token_type_ids = testutil::zoo_tensor(dir / "token_type_ids.npy")
                                       .to(at::kLong)
                                       .view({1, -1});
    }
    const ForwardResult r = m.forward(input, CaptureSpec::all());
    const at::Tensor logits_golden = testutil::zoo_tensor(dir / "logits.npy");
    testutil::expect_close("logits", r.logits.reshape(logits_golden.sizes()), logits_golden,
                           testutil::kZooLogitTol);

    std::vector<at::Tensor> pattern, scores, hidden;
    for (int64_t l = 0; l < c.n_layers; ++l) {
        pattern.push_back(r.captured.at(hook_name(HookPoint::Pattern, l))[0]);
        scores.push_back(r.captured.at(hook_name(HookPoint::AttnScores, l))[0]);
        hidden.push_back(r.captured.at(hook_name(HookPoint::ResidPre, l))[0]);
    }
    // HF's last hidden state: after the final norm for decoders; the raw last block output for
    // BERT/RoBERTa (no final norm) and ViT (vit.layernorm comes after output_hidden_states).
    hidden.push_back(c.causal ? r.captured.at(hook_name(HookPoint::FinalNorm))[0]
                              : r.captured.at(hook_name(HookPoint::ResidPost, c.n_layers - 1))[0]);
    testutil::expect_close("attentions", at::stack(pattern),
                           testutil::zoo_tensor(dir / "attentions.npy"), att_tol);
    testutil::expect_close("attn_scores", at::stack(scores),
                           testutil::zoo_tensor(dir / "attn_scores.npy"), kScoreTol);
    testutil::expect_close("hidden_states", at::stack(hidden),
                           testutil::zoo_tensor(dir / "hidden_states.npy"),
                           testutil::kZooHiddenTol);
}

class ZooGolden : public ::testing::TestWithParam<const char*> {};

// Logits within 1e-4, attention within 1e-5, hidden states within 1e-4 (max |diff|) and the
// tokenizer's ids equal to the golden ids, for every golden input of the model.
TEST_P(ZooGolden, MatchesGoldenOutputs) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path dir = shared / "zoo" / GetParam();
    const Model m = load_model(dir);
    const auto inputs = testutil::zoo_inputs(dir);
    ASSERT_FALSE(inputs.empty());
    for (const auto& in : inputs) check_input(m, in, attention_tol(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Llama, ZooGolden, ::testing::Values("qwen2", "mistral", "gemma"),
                         [](const auto& info) { return std::string(info.param); });
INSTANTIATE_TEST_SUITE_P(Encoders, ZooGolden, ::testing::Values("bert", "roberta"),
                         [](const auto& info) { return std::string(info.param); });

INSTANTIATE_TEST_SUITE_P(Decoders, ZooGolden, ::testing::Values("gpt2", "pythia", "phi"),
                         [](const auto& info) { return std::string(info.param); });

INSTANTIATE_TEST_SUITE_P(Vision, ZooGolden, ::testing::Values("vit"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
