// Captured model tensors -> metric inputs (capture.hpp).
#include "sinkscope/analysis/capture.hpp"

#include <algorithm>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "sinkscope/analysis/layers.hpp"
#include "sinkscope/core/allocator.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/hooks.hpp"

namespace sinkscope::analysis {

using model::hook_name;
using model::HookPoint;

namespace {
// Converts `t` (any device and dtype) into the host fp64 buffer `out` of t.numel() values in
// C order: one pass, without an intermediate fp64 tensor.
void copy_to_host(const at::Tensor& t, double* out) {
    at::from_blob(out, t.sizes(), at::TensorOptions().dtype(at::kDouble)).copy_(t);
}

// Host fp64 copy of a captured tensor of batch element 0.
std::vector<double> to_host(const at::Tensor& t) {
    const at::Tensor b = t.select(0, 0);
    std::vector<double> out(static_cast<size_t>(b.numel()));
    copy_to_host(b, out.data());
    return out;
}

// Whether every analysed layer's hook_attn_scores was captured; InternalError when a
// hook_pattern is missing.
bool all_scores_captured(const model::ForwardResult& result, const std::vector<int64_t>& layers) {
    bool all_scores = true;
    for (int64_t l : layers) {
        SS_CHECK(result.captured.count(hook_name(HookPoint::Pattern, l)),
                 "to_attention_input: ", hook_name(HookPoint::Pattern, l), " was not captured");
        all_scores = all_scores && result.captured.count(hook_name(HookPoint::AttnScores, l));
    }
    return all_scores;
}

// Attention functions other than softmax (model/config.hpp: softmax_one, sigmoid) and the kv slot
// give rows that do not sum to 1 over the tokens, and the analyses read rows on the simplex
// (spec section 0). Each captured row is closed: divided by its sum over the visible keys (masked
// entries are exact zeros), as Gu et al.'s evaluation of sigmoid attention normalises the weights
// before it measures a sink. The scores become the logits of the closed row, so that pattern =
// softmax(scores) holds as for a softmax model: for softmax_one they are the scores themselves
// (exp(s_j) / sum_k exp(s_k) over the visible keys is softmax(s)), as for the kv slot's, for
// sigmoid log sigmoid(s) (masked: log sigmoid(-inf) = -inf). Closure and logits in float64, stored
// back in the captured dtype. `outside` (not null, a model with a slot outside the tokens:
// ModelConfig::has_outside_slot) gets, per layer with a captured pattern, 1 - each row's sum
// before closure, [H, T] of batch 0.
void close_rows(model::ForwardResult& r, const model::ModelConfig& cfg,
                const std::vector<int64_t>& layers,
                std::vector<std::vector<double>>* outside = nullptr) {
    if (cfg.rows_sum_to_one()) return;
    for (int64_t l : layers) {
        const auto p = r.captured.find(hook_name(HookPoint::Pattern, l));
        const auto z = r.captured.find(hook_name(HookPoint::AttnScores, l));
        at::Tensor logits;  // [batch, H, T, T] float64: the closed row's logits
        if (z != r.captured.end()) {
            logits = z->second.to(at::kDouble);
            if (cfg.attention == model::AttentionFunction::Sigmoid)
                logits = at::log_sigmoid(logits);
            z->second = logits.to(z->second.scalar_type());
        }
        if (p == r.captured.end()) continue;
        // The row divided by its sum; a row whose every weight underflowed to 0 in the compute
        // dtype (a sigmoid head whose scores are all very negative) would be 0 / 0: it is the
        // softmax of its logits instead, the same weights computed in log space.
        const at::Tensor a = p->second.to(at::kDouble);
        const at::Tensor sum = a.sum(-1, /*keepdim=*/true);
        if (outside && cfg.has_outside_slot()) outside->push_back(to_host(1.0 - sum.squeeze(-1)));
        at::Tensor closed = a / sum.where(sum > 0, at::ones_like(sum));
        if (logits.defined()) closed = at::where(sum > 0, closed, at::softmax(logits, -1));
        p->second = closed.to(p->second.scalar_type());
    }
}

// The recomputed rows of a long input (LazyAttention) are softmax rows of the scores: the closed
// rows of softmax_one and of the kv slot, not those of sigmoid (a long input has no slot_mass).
void check_lazy(const model::ModelConfig& cfg, bool lazy) {
    if (lazy && cfg.attention == model::AttentionFunction::Sigmoid)
        throw UnsupportedError(
            "a sigmoid-attention model's rows are analysed as captured, never recomputed: this "
            "input's pattern and scores exceed --attention-memory-mb; raise it or use shorter "
            "inputs");
}

}  // namespace

std::vector<int64_t> layers_or_all(const model::ModelConfig& config,
                                   const std::vector<int64_t>& layers) {
    return layers.empty() ? LayerSelection::every(config.n_layers).ids : layers;
}

metrics::AttentionInput attention_shape(const model::ModelConfig& config, int64_t n_tokens,
                                        const std::vector<int32_t>& token_ids,
                                        const std::vector<int64_t>& layers) {
    metrics::AttentionInput in;
    in.n_layers = layers.empty() ? config.n_layers : int64_t(layers.size());
    in.n_heads = config.n_heads;
    // Encoders attend both ways (spec section 0: their sink default is argmax).
    in.masking = config.causal ? metrics::Masking::Causal : metrics::Masking::Bidirectional;
    in.n_tokens = n_tokens;
    in.window = metrics_window(config, n_tokens, layers);
    in.length = n_tokens;
    in.token_ids.assign(token_ids.begin(), token_ids.end());
    return in;
}

bool use_lazy_attention(const model::ModelConfig& cfg, int64_t n_tokens, int64_t budget_mb,
                        int64_t n_layers) {
    const double L = double(n_layers > 0 ? n_layers : cfg.n_layers);
    const double bytes = 2.0 * 8.0 * L * double(cfg.n_heads) * double(n_tokens) * double(n_tokens);
    return bytes > double(budget_mb) * 1024.0 * 1024.0;
}

int64_t inputs_at_once(const model::ModelConfig& cfg, const AnalysisInputs& inputs, int64_t first,
                       int64_t end, int threads, int64_t budget_mb, CaptureWants want,
                       int64_t n_layers) {
    const int64_t L = n_layers > 0 ? n_layers : cfg.n_layers;  // layers captured
    double largest = 0;  // bytes of the largest capture among the inputs left
    for (int64_t n = first; n < end; ++n) {
        const double T = double(inputs.n_tokens(size_t(n)));
        const bool lazy = use_lazy_attention(cfg, int64_t(T), budget_mb, L);
        // Held squares: pattern and scores (float64 as the analyses read them), or the rotated
        // queries and keys a lazy input recomputes them from.
        // A lazy input's forward still forms one layer's float32 scores at a time.
        const double LH = double(L * cfg.n_heads);
        double bytes =
            lazy ? 2.0 * 8.0 * LH * T * double(cfg.d_head) + 4.0 * double(cfg.n_heads) * T * T
                 : 2.0 * 8.0 * LH * T * T;
        if (want.hidden)  // residual streams and values, float64
            bytes += 8.0 * T *
                     (double(L < cfg.n_layers ? 2 * L : L + 1) * double(cfg.d_model) +
                      double(L * cfg.n_heads * cfg.d_head));
        if (want.queries_keys)  // queries and keys (GQA-expanded), float64
            bytes += 2.0 * 8.0 * T * double(L * cfg.n_heads * cfg.d_head);
        largest = std::max(largest, bytes);
    }
    const double budget = double(budget_mb) * 1024.0 * 1024.0;
    // The inputs produced ahead and the one the analyses hold, within the budget.
    const int64_t fit = largest > 0 ? int64_t(budget / largest) - 1 : threads;
    return std::clamp<int64_t>(fit, 1, std::max(1, threads));
}

std::vector<std::string> capture_patterns(const model::ModelConfig& cfg, CaptureWants w, bool lazy,
                                          const std::vector<int64_t>& layers) {
    using model::HookPoint;
    const std::vector<int64_t> analysed = layers_or_all(cfg, layers);
    // Every layer: the globs; some layers (--layers): their hooks by name.
    std::vector<std::string> patterns;
    const auto want = [&](HookPoint p) {
        if (layers.empty())
            patterns.push_back(model::hook_glob(p));
        else
            for (int64_t l : analysed) patterns.push_back(model::hook_name(p, l));
    };
    if (lazy || w.queries_keys) {
        want(HookPoint::RotQ);
        want(HookPoint::RotK);
    }
    if (!lazy) {
        want(HookPoint::Pattern);
        want(HookPoint::AttnScores);
    }
    // Residual streams of value space: one per layer boundary for consecutive layers (the
    // stream entering each and the one leaving the last), else the pair around each layer
    // (value_space.hpp).
    const bool consecutive = analysis::consecutive(analysed);
    if (w.hidden) {
        want(HookPoint::ResidPre);
        want(HookPoint::V);
        if (consecutive)
            patterns.push_back(model::hook_name(HookPoint::ResidPost, analysed.back()));
        else
            for (int64_t l : analysed)
                patterns.push_back(model::hook_name(HookPoint::ResidPost, l));
    }
    return patterns;
}

Captured capture_input(const model::Model& m, const AnalysisInputs& inputs, size_t n,
                       CaptureWants want, bool lazy, const std::vector<int64_t>& layers,
                       const model::CaptureSpec* edits) {
    check_lazy(m.config(), lazy);
    // Logits are not analysed here: [T, d_vocab] is the largest product of a long input.
    model::CaptureSpec spec =
        model::CaptureSpec(capture_patterns(m.config(), want, lazy, layers)).without_logits();
    if (edits) spec.add_edits(*edits);
    return captured_from(m.forward(inputs.model_input(m, n), spec), m, inputs, n, want, lazy,
                         layers);
}

Captured captured_from(model::ForwardResult r, const model::Model& m, const AnalysisInputs& inputs,
                       size_t n, CaptureWants want, bool lazy, const std::vector<int64_t>& layers) {
    const std::vector<int32_t>& ids = inputs.ids[n];  // images: empty
    using model::HookPoint;
    const auto& cfg = m.config();
    const std::vector<int64_t> analysed = layers_or_all(cfg, layers);
    const bool consecutive = analysis::consecutive(analysed);
    check_lazy(cfg, lazy);
    Captured c;
    // Rows of softmax_one, sigmoid and the kv slot on the simplex; the weight outside the tokens
    // (sink_geometry's slot_mass) kept beside the queries and keys.
    close_rows(r, cfg, analysed, want.queries_keys && !lazy ? &c.vectors.outside_mass : nullptr);
    const int64_t T = inputs.n_tokens(n);
    const int64_t group = cfg.n_heads / cfg.n_kv_heads;
    // hook_v / hook_rot_k: [batch, pos, n_kv_heads, d_head] and hook_rot_q [batch, pos, n_heads,
    // d_head] -> [H, T, d_head], head h reading kv head h / group (heads_per_kv 1 for queries).
    auto by_head = [&](const at::Tensor& t, int64_t heads_per_kv) {
        const std::vector<double> x = to_host(t);
        const int64_t n_src = cfg.n_heads / heads_per_kv;
        std::vector<double> out(static_cast<size_t>(cfg.n_heads * T * cfg.d_head));
        for (int64_t h = 0; h < cfg.n_heads; ++h)
            for (int64_t t = 0; t < T; ++t)
                for (int64_t k = 0; k < cfg.d_head; ++k)
                    out[size_t((h * T + t) * cfg.d_head + k)] =
                        x[size_t((t * n_src + h / heads_per_kv) * cfg.d_head + k)];
        return out;
    };
    c.vectors.d_model = cfg.d_model;
    c.vectors.d_head = cfg.d_head;
    if (want.queries_keys)  // before a lazy input takes them over
        for (int64_t l : analysed) {
            c.vectors.queries.push_back(by_head(r.captured.at(hook_name(HookPoint::RotQ, l)), 1));
            c.vectors.keys.push_back(by_head(r.captured.at(hook_name(HookPoint::RotK, l)), group));
        }
    if (lazy) {
        c.lazy = std::make_unique<LazyAttention>(r, cfg, layers);
        c.attention = c.lazy->input(ids);
    } else if (auto held = held_attention(r, cfg, 0, layers)) {
        c.attention = attention_shape(
            cfg, r.captured.at(hook_name(HookPoint::Pattern, analysed.front())).size(-1), ids,
            layers);
        c.attention.source = held.get();
        c.attention.source_owner = std::move(held);
    } else {
        c.attention = to_attention_input(r, cfg, ids, 0, layers);
    }
    if (want.hidden) {
        // Each captured tensor is dropped once copied (peak memory of long inputs).
        auto take = [&r](const std::string& name) {
            std::vector<double> host = to_host(r.captured.at(name));
            r.captured.erase(name);
            return host;
        };
        std::vector<std::vector<double>>& hidden = c.vectors.hidden;
        for (int64_t l : analysed) {
            hidden.push_back(take(model::hook_name(HookPoint::ResidPre, l)));
            if (!consecutive) hidden.push_back(take(model::hook_name(HookPoint::ResidPost, l)));
        }
        if (consecutive)
            hidden.push_back(take(model::hook_name(HookPoint::ResidPost, analysed.back())));
        for (int64_t l : analysed) {
            const std::string name = model::hook_name(HookPoint::V, l);
            c.vectors.values.push_back(by_head(r.captured.at(name), group));
            r.captured.erase(name);
        }
    }
    // The analyses hold their own copy, or the StoredRows holds the squares it serves: the
    // pool's free squares go back to the system rather than stay resident while they run
    // (model.hpp).
    if (!lazy) {
        r.captured.clear();
        model::release_capture_buffers();
    }
    return c;
}

int64_t metrics_window(const model::ModelConfig& config, int64_t n_tokens,
                       const std::vector<int64_t>& layers) {
    if (!config.causal || config.window <= 0) return 0;
    const std::vector<int64_t> analysed = layers_or_all(config, layers);
    const auto windowed = std::count_if(analysed.begin(), analysed.end(),
                                        [&](int64_t l) { return config.layer_window(l) > 0; });
    if (windowed == 0) return 0;
    if (windowed == static_cast<int64_t>(analysed.size())) return config.window;
    if (n_tokens <= config.window) return 0;
    throw UnsupportedError("analysis of " + std::to_string(n_tokens) +
                           " tokens with a sliding window (" + std::to_string(config.window) +
                           ") on some layers only: the metrics apply one window to every layer; "
                           "use inputs of at most " +
                           std::to_string(config.window) + " tokens");
}

std::shared_ptr<const metrics::StoredRows> held_attention(const model::ForwardResult& result,
                                                          const model::ModelConfig& config,
                                                          int64_t batch_index,
                                                          const std::vector<int64_t>& layers) {
    const std::vector<int64_t> analysed = layers_or_all(config, layers);
    const bool all_scores = all_scores_captured(result, analysed);
    const at::Tensor& first = result.captured.at(hook_name(HookPoint::Pattern, analysed.front()));
    const at::ScalarType dtype = first.scalar_type();
    if (dtype != at::kFloat && dtype != at::kDouble) return nullptr;
    const int64_t t = first.size(-1);
    auto tensors = std::make_shared<std::vector<at::Tensor>>();
    std::vector<const void*> pattern, scores;
    const auto hold = [&](HookPoint p, std::vector<const void*>& out) {
        for (int64_t l : analysed) {
            const at::Tensor x = result.captured.at(hook_name(p, l))[batch_index];  // [H, T, T]
            if (!x.is_cpu() || x.scalar_type() != dtype || !x.is_contiguous() ||
                x.sizes() != at::IntArrayRef({config.n_heads, t, t}))
                return false;
            out.push_back(x.data_ptr());
            tensors->push_back(x);
        }
        return true;
    };
    if (!hold(HookPoint::Pattern, pattern) || (all_scores && !hold(HookPoint::AttnScores, scores)))
        return nullptr;
    return std::make_shared<const metrics::StoredRows>(
        dtype == at::kFloat ? metrics::StoredRows::Precision::F32
                            : metrics::StoredRows::Precision::F64,
        int64_t(analysed.size()), config.n_heads, t, std::move(pattern), std::move(scores),
        std::move(tensors));
}

metrics::AttentionInput to_attention_input(const model::ForwardResult& result,
                                           const model::ModelConfig& config,
                                           const std::vector<int32_t>& token_ids,
                                           int64_t batch_index,
                                           const std::vector<int64_t>& layers) {
    const std::vector<int64_t> analysed = layers_or_all(config, layers);
    const bool all_scores = all_scores_captured(result, analysed);
    metrics::AttentionInput in = attention_shape(
        config, result.captured.at(hook_name(HookPoint::Pattern, analysed.front())).size(-1),
        token_ids, layers);
    const auto copy_hook = [&](HookPoint p, std::vector<double>& out) {
        // 604 MB for pattern and scores at T = 512 on a 12 x 12-head model: on huge pages, their
        // first writes fault 512 times less often (that was 8% of such a run's CPU time).
        size_for_overwrite(
            out, static_cast<size_t>(in.n_layers * in.n_heads * in.n_tokens * in.n_tokens),
            at::get_num_threads());
        const size_t per_layer = static_cast<size_t>(in.n_heads * in.n_tokens * in.n_tokens);
        for (size_t k = 0; k < analysed.size(); ++k) {
            const std::string name = hook_name(p, analysed[k]);
            const at::Tensor t = result.captured.at(name)[batch_index];  // [H, T, T]
            SS_CHECK(static_cast<size_t>(t.numel()) == per_layer, "to_attention_input: ", name,
                     " has ", t.numel(), " entries, expected ", per_layer);
            copy_to_host(t, out.data() + k * per_layer);
        }
    };
    copy_hook(HookPoint::Pattern, in.pattern);
    if (all_scores) copy_hook(HookPoint::AttnScores, in.scores);
    return in;
}

}  // namespace sinkscope::analysis
