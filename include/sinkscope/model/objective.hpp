// One sample as a prediction problem under the model's own training objective: what the model
// reads, which output rows are scored, and the labels the data gives them. Decoders predict the
// next token at every position but the last; encoders (BERT, RoBERTa) predict masked tokens
// (masked LM); a vision classifier predicts the class of the image (no label in the data).
// Shared by the masked-LM pseudo-perplexity, the Fisher information and training.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include <ATen/core/Tensor.h>

#include "sinkscope/model/model.hpp"

namespace sinkscope::model {

struct PredictionTask {
    ModelInput input;              // batch of 1
    std::vector<int64_t> rows;     // output rows scored (positions; vision: {0})
    std::vector<int64_t> targets;  // the data's label of each row (empty for images)
};

// Decoders: rows 0..T-2 predict ids[1..T-1]. Fewer than 2 tokens: no row.
PredictionTask next_token_task(const std::vector<int32_t>& ids);

// What masking needs from an encoder's tokenizer: its mask token ([MASK] or <mask>) and the
// template's special tokens ([CLS], [SEP], <s>, </s>), which are never masked.
struct MaskedLmVocabulary {
    int32_t mask_id = -1;
    std::set<int32_t> special;
};
// UnsupportedError naming the model when it has no tokenizer or no mask token.
MaskedLmVocabulary masked_lm_vocabulary(const Model& model);

// Encoders: round(rate x n) of the sample's n maskable tokens (at least 1; halves up) are drawn
// with `seed` and `sample_index` (core/random.hpp: the same on every platform; one stream per
// sample, so a sample's draw does not depend on the others), all replaced by the mask token at
// once; rows are their positions, targets the original ids. No maskable token: no row.
PredictionTask masked_lm_task(const std::vector<int32_t>& ids, const MaskedLmVocabulary& vocab,
                              const MaskedLmOptions& options, size_t sample_index);

// The task of a text sample under `model`'s objective (next-token for causal models, masked LM
// for encoders); UnsupportedError for vision models.
PredictionTask text_task(const Model& model, const std::vector<int32_t>& ids,
                         const MaskedLmOptions& options, size_t sample_index);

// Log-probabilities [rows, classes] of the scored rows of one forward of task.input, computed in
// the logits' dtype (f32; f64 for a float64 model) or in `dtype` when given (perplexities: f64).
// Inside a GradientScope they carry the autograd graph.
at::Tensor scored_log_probs(const Model& model, const PredictionTask& task,
                            const HeadMask* mask = nullptr,
                            std::optional<at::ScalarType> dtype = std::nullopt);

// One label per row drawn from the row's distribution exp(log_probs) (the "true" Fisher's
// labels): inverse CDF in f64 with a uniform from Xoshiro256(seed), rows in order. Reproducible
// bit for bit for equal log-probabilities.
std::vector<int64_t> draw_labels(const at::Tensor& log_probs, uint64_t seed);

// Mean negative log-likelihood of `labels` (one per row) under log_probs: a 0-dim tensor of
// log_probs' dtype (differentiable).
at::Tensor mean_nll(const at::Tensor& log_probs, const std::vector<int64_t>& labels);

}  // namespace sinkscope::model
