// The hand-off from the model to the metrics: one forward with capture hooks, and the captured
// tensors turned into metric inputs (attention rows, hidden states, V projections) on the host.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sinkscope/analysis/inputs.hpp"
#include "sinkscope/analysis/lazy_attention.hpp"
#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/metrics/attention.hpp"
#include "sinkscope/metrics/stored_rows.hpp"
#include "sinkscope/model/model.hpp"

namespace sinkscope::analysis {

// `layers` in every function below: the model layers analysed, ascending (analyze --layers,
// layers.hpp); empty: every layer. The metric input's layer k is the model's layers[k].
std::vector<int64_t> layers_or_all(const model::ModelConfig& config,
                                   const std::vector<int64_t>& layers);

// Attention of sequence `batch_index` of a forward pass as the metrics see it (spec section 0):
// pattern from every analysed layer's hook_pattern, scores from hook_attn_scores when all were
// captured, fp64 on the host; masking and window from the config (encoders attend both ways).
// Throws InternalError when a layer's hook_pattern is missing.
metrics::AttentionInput to_attention_input(const model::ForwardResult& result,
                                           const model::ModelConfig& config,
                                           const std::vector<int32_t>& token_ids,
                                           int64_t batch_index = 0,
                                           const std::vector<int64_t>& layers = {});

// The one sliding window the metrics apply to every analysed layer (metrics::AttentionInput::
// window) for an input of n_tokens: config.window, or 0 for encoders and when no analysed layer
// has one. A window on some analysed layers only (Gemma-2's local layers) hides nothing while
// n_tokens <= window, so 0 is exact then; longer inputs throw UnsupportedError (the metrics have
// one visibility rule for all layers).
int64_t metrics_window(const model::ModelConfig& config, int64_t n_tokens,
                       const std::vector<int64_t>& layers = {});

// An input of n_tokens as the metrics see it, without its rows: shape, masking (encoders attend
// both ways) and window from the config, and the token ids; the caller adds the rows or their
// source.
metrics::AttentionInput attention_shape(const model::ModelConfig& config, int64_t n_tokens,
                                        const std::vector<int32_t>& token_ids,
                                        const std::vector<int64_t>& layers = {});

// The captured pattern (and scores, when every layer's were captured) of sequence
// `batch_index` served in place (metrics/stored_rows.hpp), holding the tensors: nullptr unless
// every one is an fp32 or fp64 host tensor in C order (bf16/fp16 models and GPU tensors are
// copied by to_attention_input instead).
std::shared_ptr<const metrics::StoredRows> held_attention(const model::ForwardResult& result,
                                                          const model::ModelConfig& config,
                                                          int64_t batch_index = 0,
                                                          const std::vector<int64_t>& layers = {});

// Whether one input's [L, H, T, T] pattern and scores (fp64) exceed `budget_mb`, so its rows are
// recomputed from the rotated q and k instead of stored. L: `n_layers` analysed (0: every layer).
bool use_lazy_attention(const model::ModelConfig& cfg, int64_t n_tokens, int64_t budget_mb,
                        int64_t n_layers = 0);

// What a capture keeps besides the attention, as the selected analyses need it
// (AnalysisPipeline::wants_model_vectors, wants_queries_keys).
struct CaptureWants {
    bool hidden = false;        // residual streams and V projections (ModelVectors)
    bool queries_keys = false;  // rotated queries and keys (ModelVectors)
};

struct Captured {
    std::unique_ptr<LazyAttention> lazy;  // long inputs: rows recomputed on demand
    // Other inputs: the captured fp32 (fp64) squares themselves, widened where they are read
    // (attention.source_owner, held_attention), or else an fp64 copy (to_attention_input).
    metrics::AttentionInput attention;
    ModelVectors vectors;  // what CaptureWants asked for (fp64 host copies)
};

// How many inputs may be produced ahead of the analyses on threads of their own
// (core/parallel.hpp): `threads`, fewer when their captures and the one being analysed would
// not fit together in the `budget_mb` that decides when one input alone is recomputed lazily
// (use_lazy_attention); 1 (one input after the other) at least. Results do not depend on it.
int64_t inputs_at_once(const model::ModelConfig& cfg, const AnalysisInputs& inputs, int64_t first,
                       int64_t end, int threads, int64_t budget_mb, CaptureWants want,
                       int64_t n_layers = 0);

// Runs input n through the model capturing what the analyses need: the attention (stored, or
// lazily recomputed when `lazy`), and the model vectors `want` asks for. `edits` (may be null):
// editing hooks the forward runs (analyze --intervene, api/interventions.hpp).
Captured capture_input(const model::Model& m, const AnalysisInputs& inputs, size_t n,
                       CaptureWants want, bool lazy, const std::vector<int64_t>& layers = {},
                       const model::CaptureSpec* edits = nullptr);

// capture_input in its two halves, for a forward run in stages (analyze --split layers): the
// hooks it captures (CaptureSpec patterns), and what it makes of the forward's result `r` (every
// hook of the patterns captured, whichever stage recorded it).
std::vector<std::string> capture_patterns(const model::ModelConfig& cfg, CaptureWants want,
                                          bool lazy, const std::vector<int64_t>& layers = {});
Captured captured_from(model::ForwardResult r, const model::Model& m, const AnalysisInputs& inputs,
                       size_t n, CaptureWants want, bool lazy,
                       const std::vector<int64_t>& layers = {});

}  // namespace sinkscope::analysis
