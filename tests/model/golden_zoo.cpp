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

// Runs one golden input through the model and compares every golden array it has.
void check_input(const Model& m, const fs::path& dir) {
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
    const testutil::ZooTolerances tol = testutil::zoo_tolerances(c, dir);
    const at::Tensor logits_golden = testutil::zoo_tensor(dir / "logits.npy");
    testutil::expect_close("logits", r.logits.reshape(logits_golden.sizes()), logits_golden,
                           tol.logits);

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
                           testutil::zoo_tensor(dir / "attentions.npy"), tol.attention);
    testutil::expect_close("attn_scores", at::stack(scores),
                           testutil::zoo_tensor(dir / "attn_scores.npy"), tol.scores);
    testutil::expect_close("hidden_states", at::stack(hidden),
                           testutil::zoo_tensor(dir / "hidden_states.npy"), tol.hidden);
}

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
    for (const auto& in : inputs) check_input(m, in);
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
