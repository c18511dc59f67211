// Shared by the zoo golden tests: reads ../shared/zoo/<model>/golden/<input>/*.npy and compares a
// forward pass's tensors with them by max absolute difference, naming the worst index, within
// tolerances derived from the model's shape and the goldens' magnitudes (forward_bound.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"

#include "forward_bound.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/model/model.hpp"
#include "tensor_tolerance.hpp"

namespace sinkscope::testutil {

// Golden input directories of one zoo model (fox, robot, ...), sorted.
inline std::vector<std::filesystem::path> zoo_inputs(const std::filesystem::path& model_dir) {
    std::vector<std::filesystem::path> out;
    for (const auto& e : std::filesystem::directory_iterator(model_dir / "golden"))
        if (e.is_directory()) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

inline std::vector<int32_t> zoo_ids(const std::filesystem::path& input_dir,
                                    const char* file = "input_ids.npy") {
    const auto wide = io::read_npy(input_dir / file).to_i64();
    return std::vector<int32_t>(wide.begin(), wide.end());
}

// The text of a single-text golden input (manifest "text"); nullopt for images and text pairs.
inline std::optional<std::string> zoo_text(const std::filesystem::path& input_dir) {
    const auto manifest =
        nlohmann::json::parse(read_file(input_dir.parent_path() / "manifest.json"));
    const std::string name = input_dir.filename().string();
    for (const auto& in : manifest.at("inputs"))
        if (in.at("name") == name && in.contains("text") && !in.contains("text_pair"))
            return in.at("text").get<std::string>();
    return std::nullopt;
}

// Golden array as an f64 CPU tensor of its stored shape.
inline at::Tensor zoo_tensor(const std::filesystem::path& file) {
    const io::NpyArray a = io::read_npy(file);
    const std::vector<double> v = a.to_f64();
    return at::tensor(v, at::TensorOptions().dtype(at::kDouble)).view(a.shape).clone();
}

// Tolerances of a float32 forward against a zoo golden (the goldens are float32 PyTorch runs of
// the same function, so two float32 evaluations in different orders: forward_bound.hpp), scaled by
// the golden magnitudes: max|logit|, max|score| over every layer, max|hidden|. `math_terms`: the
// math functions of a block as rounded operations (forward_bound.hpp), 0 = not counted.
struct ZooTolerances {
    double logits, attention, scores, hidden;
};
inline ZooTolerances zoo_tolerances(const model::ModelConfig& c,
                                    const std::filesystem::path& input_dir, double math_terms = 0) {
    const at::Tensor scores = zoo_tensor(input_dir / "attn_scores.npy");  // [L, H, T, T]
    const int64_t T = scores.size(-1);
    const double max_score = max_abs(scores);
    ZooTolerances t;
    t.logits = logit_tol(c, T, max_abs(zoo_tensor(input_dir / "logits.npy")), 2, math_terms);
    t.attention = attention_tol(c, T, max_score, 2, math_terms);
    t.scores = f32_two_evaluations_bound(
        pattern_terms(c, T, c.n_layers - 1) + math_terms * double(c.n_layers), max_score);
    t.hidden = hidden_tol(c, T, c.n_layers, max_abs(zoo_tensor(input_dir / "hidden_states.npy")), 2,
                          math_terms);
    return t;
}

// Compares a forward pass `r` (of every hook, CaptureSpec::all()) of golden input `dir` with every
// golden array it has within zoo_tolerances. lm_head false: the model has no LM head, so it must
// give no logits.
inline void check_zoo_outputs(const model::Model& m, const std::filesystem::path& dir,
                              const model::ForwardResult& r, bool lm_head = true,
                              double math_terms = 0) {
    SCOPED_TRACE(dir.string());
    const model::ModelConfig& c = m.config();
    const ZooTolerances tol = zoo_tolerances(c, dir, math_terms);
    if (lm_head) {
        const at::Tensor logits_golden = zoo_tensor(dir / "logits.npy");
        expect_close("logits", r.logits.reshape(logits_golden.sizes()), logits_golden, tol.logits);
    } else {
        EXPECT_FALSE(r.logits.defined()) << "a model without an LM head gave logits";
    }

    std::vector<at::Tensor> pattern, scores, hidden;
    for (int64_t l = 0; l < c.n_layers; ++l) {
        pattern.push_back(r.captured.at(model::hook_name(model::HookPoint::Pattern, l))[0]);
        scores.push_back(r.captured.at(model::hook_name(model::HookPoint::AttnScores, l))[0]);
        hidden.push_back(r.captured.at(model::hook_name(model::HookPoint::ResidPre, l))[0]);
    }
    // HF's last hidden state: after the final norm for decoders; the raw last block output for
    // BERT/RoBERTa (no final norm) and ViT (vit.layernorm comes after output_hidden_states).
    hidden.push_back(
        c.causal ? r.captured.at(model::hook_name(model::HookPoint::FinalNorm))[0]
                 : r.captured.at(model::hook_name(model::HookPoint::ResidPost, c.n_layers - 1))[0]);
    expect_close("attentions", at::stack(pattern), zoo_tensor(dir / "attentions.npy"),
                 tol.attention);
    expect_close("attn_scores", at::stack(scores), zoo_tensor(dir / "attn_scores.npy"), tol.scores);
    expect_close("hidden_states", at::stack(hidden), zoo_tensor(dir / "hidden_states.npy"),
                 tol.hidden);
}

// What golden input `dir` feeds the model (CPU tensors, which a forward moves to its device):
// ids [1, T] int64 and, where the golden has them, token types [1, T]; or an image's
// pixel_values [1, C, H, W] f32.
inline model::ModelInput zoo_model_input(const std::filesystem::path& dir) {
    model::ModelInput input;
    if (std::filesystem::exists(dir / "pixel_values.npy")) {
        const at::Tensor px = zoo_tensor(dir / "pixel_values.npy");  // [C, H, W]
        input.pixel_values = px.to(at::kFloat).unsqueeze(0);
        return input;
    }
    const std::vector<int32_t> ids = zoo_ids(dir);
    std::vector<int64_t> wide(ids.begin(), ids.end());
    input.ids = at::tensor(wide, at::TensorOptions().dtype(at::kLong)).view({1, -1});
    if (std::filesystem::exists(dir / "token_type_ids.npy"))
        input.token_type_ids = zoo_tensor(dir / "token_type_ids.npy").to(at::kLong).view({1, -1});
    return input;
}

// Runs one golden input (../shared/zoo/<model>/golden/<input>) through the model and compares every
// golden array it has within zoo_tolerances; the model's tokenizer must give the golden ids.
// lm_head false: the model has no LM head (a BERT GGUF), so it must give no logits.
inline void check_zoo_input(const model::Model& m, const std::filesystem::path& dir,
                            bool lm_head = true, double math_terms = 0) {
    SCOPED_TRACE(dir.string());
    // The model's own tokenizer reproduces the golden ids (text and special tokens).
    if (m.tokenizer() && !std::filesystem::exists(dir / "pixel_values.npy")) {
        const auto manifest_text = zoo_text(dir);
        if (manifest_text) {
            EXPECT_EQ(m.encode(*manifest_text, tokenizer::BosPolicy::ModelDefault), zoo_ids(dir))
                << "token ids of '" << *manifest_text << "'";
        }
    }
    check_zoo_outputs(m, dir, m.forward(zoo_model_input(dir), model::CaptureSpec::all()), lm_head,
                      math_terms);
}

}  // namespace sinkscope::testutil
