// What evaluates a built model with plain forward passes: mean z for mean ablation, greedy
// generation, perplexity.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/parallel.hpp"
#include "sinkscope/core/random.hpp"
#include "sinkscope/model/evaluation.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/objective.hpp"
#include "sinkscope/model/sliding_window.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"

namespace sinkscope::model {

at::Tensor compute_mean_z(const Model& model, const std::vector<std::vector<int32_t>>& inputs) {
    const ModelConfig& c = model.config();
    const CaptureSpec spec({hook_glob(HookPoint::Z)});
    at::Tensor sum = at::zeros({c.n_layers, c.n_heads, c.d_head}, at::kDouble);  // host
    int64_t n = 0;
    for (const auto& ids : inputs) {
        const ForwardResult r = model.forward(ids, spec);
        for (int64_t l = 0; l < c.n_layers; ++l)  // hook_z [1, pos, H, d_head]
            sum[l] += r.captured.at(hook_name(HookPoint::Z, l))[0].to(at::kCPU, at::kDouble).sum(0);
        n += static_cast<int64_t>(ids.size());
    }
    SS_CHECK(n > 0, "compute_mean_z needs at least one token");
    return (sum / static_cast<double>(n)).to(at::kFloat);
}

std::vector<int32_t> generate_greedy(const Model& model, std::vector<int32_t> prompt, int64_t n_new,
                                     int32_t stop_token) {
    // Full recomputation per step (no KV cache): generation is for parity checks on small models.
    for (int64_t step = 0; step < n_new; ++step) {
        const ForwardResult r = model.forward(prompt);
        if (!r.logits.defined()) throw UsageError("generate: the model has no LM head");
        const int32_t next = static_cast<int32_t>(r.logits[0][-1].argmax().item<int64_t>());
        if (stop_token >= 0 && next == stop_token) break;
        prompt.push_back(next);
    }
    return prompt;
}

namespace {

// Summed NLL of ids[first, end) in one forward of the window ids[begin, end): token t is
// predicted by the logits at window row t - 1 - begin (begin < first < end).
double window_nll(const Model& model, const std::vector<int32_t>& ids, int64_t begin, int64_t first,
                  int64_t end, const HeadMask* mask) {
    const std::vector<int32_t> window(ids.begin() + begin, ids.begin() + end);
    const ForwardResult r = model.forward(window, {}, mask);
    if (!r.logits.defined()) throw UsageError("perplexity: the model has no LM head");
    // [end - first, d_vocab] f64 log-probabilities of the scored tokens
    const at::Tensor logp =
        at::log_softmax(r.logits[0].narrow(0, first - 1 - begin, end - first).to(at::kDouble), -1);
    const std::vector<int64_t> next(ids.begin() + first, ids.begin() + end);
    const at::Tensor target =
        at::tensor(next, at::TensorOptions().dtype(at::kLong)).to(logp.device()).view({-1, 1});
    return -logp.gather(1, target).sum().item<double>();
}

// Samples scored at once (model.hpp compute_threads): fewer when their logits, float32 and
// their float64 log-probabilities, would pass kLogitsBudget together. Results do not depend on it.
constexpr double kLogitsBudget = 4.0 * 1024 * 1024 * 1024;
int64_t samples_at_once(const ModelConfig& c, int64_t longest) {
    const double bytes = 12.0 * double(std::max<int64_t>(1, longest)) * double(c.d_vocab);
    return std::clamp<int64_t>(int64_t(kLogitsBudget / bytes), 1, compute_threads());
}

// Runs score(k) -> (summed NLL, scored tokens) of every sample, several at once, and adds them
// up in sample order: per-sample means (NaN where nothing was scored), totals. `cap` > 0: no
// forward is longer than cap tokens (a sliding window).
template <class Score>
PerplexityResult score_samples(const ModelConfig& c,
                               const std::vector<std::vector<int32_t>>& samples, int64_t cap,
                               Score&& score, const SampleDone& done) {
    int64_t longest = 0;
    for (const auto& ids : samples) longest = std::max<int64_t>(longest, int64_t(ids.size()));
    if (cap > 0) longest = std::min(longest, cap);
    const int64_t at_once = samples_at_once(c, longest);
    PerplexityResult out;
    double total = 0;
    const int share = forward_share(std::min<int64_t>(at_once, int64_t(samples.size())));
    auto shared_score = [&](int64_t k) {
        const ForwardWorkers workers(share);  // the samples side by side share the threads
        return score(k);
    };
    ordered_parallel(int64_t(samples.size()), int(at_once), at_once, shared_score,
                     [&](int64_t, std::pair<double, int64_t> s) {
                         const auto [nll, scored] = s;
                         if (scored == 0) {  // nothing to predict
                             out.sample_nll.push_back(std::nan(""));
                             out.sample_tokens.push_back(0);
                         } else {
                             out.sample_nll.push_back(nll / static_cast<double>(scored));
                             out.sample_tokens.push_back(scored);
                             total += nll;
                             out.n_tokens += scored;
                         }
                         if (done) done(int64_t(out.sample_nll.size()), out.n_tokens);
                     });
    out.mean_nll = out.n_tokens > 0 ? total / static_cast<double>(out.n_tokens) : 0.0;
    return out;
}

}  // namespace

PerplexityResult compute_perplexity(const Model& model,
                                    const std::vector<std::vector<int32_t>>& samples,
                                    const HeadMask* mask, const SlidingWindow& window) {
    return compute_perplexity(model, samples, mask, window, SampleDone{});
}

PerplexityResult compute_perplexity(const Model& model,
                                    const std::vector<std::vector<int32_t>>& samples,
                                    const HeadMask* mask, const SlidingWindow& window,
                                    const SampleDone& done) {
    const ModelConfig& c = model.config();
    // An encoder's logits at position t see token t itself (bidirectional attention), so a
    // "next-token" NLL of them measures nothing; a ViT has no tokens at all.
    if (c.is_vision() || !c.causal)
        throw UnsupportedError(model.path.string(),
                               "next-token perplexity of " + c.architecture +
                                   " (an encoder or vision model: its outputs are not next-token "
                                   "predictions)");
    if (window.length > 0 &&
        (window.length < 2 || window.stride < 1 || window.stride > window.length))
        throw UsageError("sliding window of " + std::to_string(window.length) +
                         " tokens needs a stride in [1, " + std::to_string(window.length) +
                         "], got " + std::to_string(window.stride));
    // One sample's summed NLL and scored tokens, on whichever thread (one forward at a time on
    // one compute thread, model.hpp); the sums below add them in sample order.
    auto score = [&](int64_t k) {
        const std::vector<int32_t>& ids = samples[size_t(k)];
        const auto T = static_cast<int64_t>(ids.size());
        std::pair<double, int64_t> s{0.0, 0};
        if (window.length == 0 || T <= window.length) {
            if (T >= 2) s = {window_nll(model, ids, 0, 1, T, mask), T - 1};
            return s;
        }
        int64_t prev_end = 0;
        for (int64_t begin = 0;; begin += window.stride) {
            const int64_t end = std::min(begin + window.length, T);
            const int64_t first = std::max(prev_end, begin + 1);
            if (first < end) {
                s.first += window_nll(model, ids, begin, first, end, mask);
                s.second += end - first;
            }
            prev_end = end;
            if (end == T) break;
        }
        return s;
    };
    PerplexityResult out =
        score_samples(c, samples, window.length > 0 ? window.length : int64_t(-1), score, done);
    if (out.n_tokens == 0) throw UsageError("perplexity: no sample has two or more tokens");
    out.perplexity = std::exp(out.mean_nll);
    return out;
}

PerplexityResult compute_perplexity(const Model& model,
                                    const std::vector<std::vector<int32_t>>& samples,
                                    const HeadMask* mask) {
    return compute_perplexity(model, samples, mask, SlidingWindow{});
}

PerplexityResult compute_masked_perplexity(const Model& model,
                                           const std::vector<std::vector<int32_t>>& samples,
                                           const MaskedLmOptions& options, const HeadMask* mask) {
    return compute_masked_perplexity(model, samples, options, mask, SampleDone{});
}

PerplexityResult compute_masked_perplexity(const Model& model,
                                           const std::vector<std::vector<int32_t>>& samples,
                                           const MaskedLmOptions& options, const HeadMask* mask,
                                           const SampleDone& done) {
    const ModelConfig& c = model.config();
    if (c.is_vision() || c.causal)
        throw UnsupportedError(model.path.string(), "masked-LM pseudo-perplexity of " +
                                                        c.architecture + " (not an encoder)");
    if (!(options.rate > 0.0 && options.rate < 1.0))
        throw UsageError("masking rate must be in (0, 1)");
    const MaskedLmVocabulary vocab = masked_lm_vocabulary(model);
    // One sample's summed NLL and scored positions (its masking follows from k alone), on
    // whichever thread; summed below in sample order.
    auto score = [&](int64_t k) {
        const PredictionTask task = masked_lm_task(samples[size_t(k)], vocab, options, size_t(k));
        if (task.rows.empty()) return std::pair<double, int64_t>{0.0, 0};
        const int64_t n = int64_t(task.rows.size());
        const at::Tensor logp = scored_log_probs(model, task, mask, at::kDouble);
        return std::pair<double, int64_t>{mean_nll(logp, task.targets).item<double>() * double(n),
                                          n};
    };
    PerplexityResult out = score_samples(c, samples, -1, score, done);
    if (out.n_tokens == 0) throw UsageError("pseudo-perplexity: no sample has a maskable token");
    out.perplexity = std::exp(out.mean_nll);
    return out;
}

}  // namespace sinkscope::model
