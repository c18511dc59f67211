// Prediction tasks of the model's objectives (model/objective.hpp).
#include "sinkscope/model/objective.hpp"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/random.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"

namespace sinkscope::model {

namespace {

at::Tensor long_tensor(const std::vector<int64_t>& v) {
    return at::tensor(v, at::TensorOptions().dtype(at::kLong));
}

}  // namespace

PredictionTask next_token_task(const std::vector<int32_t>& ids) {
    PredictionTask t;
    t.input.ids = long_tensor(std::vector<int64_t>(ids.begin(), ids.end())).view({1, -1});
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
        t.rows.push_back(int64_t(i));
        t.targets.push_back(ids[i + 1]);
    }
    return t;
}

MaskedLmVocabulary masked_lm_vocabulary(const Model& model) {
    MaskedLmVocabulary v;
    const tokenizer::Tokenizer* tok = model.tokenizer();
    if (tok)
        for (int64_t id = 0; id < tok->vocab_size() && v.mask_id < 0; ++id) {
            const std::string p = tok->piece(int32_t(id));
            if (p == "[MASK]" || p == "<mask>") v.mask_id = int32_t(id);
        }
    if (v.mask_id < 0)
        throw UnsupportedError(model.path.string(),
                               "the masked-LM objective needs a mask token ([MASK] or <mask>) in "
                               "the tokenizer");
    for (int32_t id : tok->template_prefix()) v.special.insert(id);
    for (int32_t id : tok->template_suffix()) v.special.insert(id);
    return v;
}

PredictionTask masked_lm_task(const std::vector<int32_t>& ids, const MaskedLmVocabulary& vocab,
                              const MaskedLmOptions& options, size_t sample_index) {
    if (!(options.rate > 0.0 && options.rate < 1.0))
        throw UsageError("masking rate must be in (0, 1)");
    std::vector<int64_t> maskable;
    for (size_t t = 0; t < ids.size(); ++t)
        if (!vocab.special.count(ids[t])) maskable.push_back(int64_t(t));
    std::vector<int64_t> input(ids.begin(), ids.end());
    PredictionTask task;
    if (!maskable.empty()) {
        const auto n_mask =
            std::max<size_t>(1, size_t(std::floor(options.rate * double(maskable.size()) + 0.5)));
        uint64_t state = options.seed ^ (0x9e3779b97f4a7c15ull * (sample_index + 1));
        for (size_t i : sample_indices(maskable.size(), n_mask, splitmix64(state))) {
            const int64_t t = maskable[i];
            task.rows.push_back(t);
            task.targets.push_back(ids[size_t(t)]);
            input[size_t(t)] = vocab.mask_id;
        }
    }
    task.input.ids = long_tensor(input).view({1, -1});
    return task;
}

PredictionTask text_task(const Model& model, const std::vector<int32_t>& ids,
                         const MaskedLmOptions& options, size_t sample_index) {
    const ModelConfig& c = model.config();
    if (c.is_vision())
        throw UnsupportedError(model.path.string(), "a text objective for a vision model");
    if (c.causal) return next_token_task(ids);
    return masked_lm_task(ids, masked_lm_vocabulary(model), options, sample_index);
}

at::Tensor scored_log_probs(const Model& model, const PredictionTask& task, const HeadMask* mask,
                            std::optional<at::ScalarType> dtype) {
    SS_CHECK(!task.rows.empty(), "a prediction task without scored rows");
    const ForwardResult r = model.forward(task.input, {}, mask);
    if (!r.logits.defined())
        throw UnsupportedError(model.path.string(), "the model has no output head (no logits)");
    // Vision: logits [batch, n_labels], one row per image; text: [batch, pos, vocab].
    const at::Tensor logits =
        r.logits.dim() == 2
            ? r.logits
            : r.logits[0].index_select(0, long_tensor(task.rows).to(r.logits.device()));
    return at::log_softmax(dtype ? logits.to(*dtype) : logits, -1);
}

std::vector<int64_t> draw_labels(const at::Tensor& log_probs, uint64_t seed) {
    SS_CHECK(log_probs.dim() == 2, "draw_labels needs [rows, classes]");
    const at::Tensor p = log_probs.detach().to(at::kCPU, at::kDouble).exp().contiguous();
    const int64_t n = p.size(0), k = p.size(1);
    const double* data = p.data_ptr<double>();
    Xoshiro256 rng(seed);
    std::vector<int64_t> labels;
    for (int64_t r = 0; r < n; ++r) {
        const double* row = data + r * k;
        double total = 0;
        for (int64_t j = 0; j < k; ++j) total += row[j];
        // u in [0, 1) with 53 random bits; the first class whose cumulative mass exceeds u x total
        // (normalised by the row's own sum, so rounding in exp cannot run past the last class).
        const double u = double(rng.next() >> 11) * 0x1.0p-53 * total;
        double cum = 0;
        int64_t pick = k - 1;
        for (int64_t j = 0; j < k; ++j) {
            cum += row[j];
            if (u < cum) {
                pick = j;
                break;
            }
        }
        labels.push_back(pick);
    }
    return labels;
}

at::Tensor mean_nll(const at::Tensor& log_probs, const std::vector<int64_t>& labels) {
    SS_CHECK(log_probs.dim() == 2 && log_probs.size(0) == int64_t(labels.size()),
             "mean_nll: one label per row");
    const at::Tensor target = long_tensor(labels).to(log_probs.device()).view({-1, 1});
    return -log_probs.gather(1, target).mean();
}

}  // namespace sinkscope::model
