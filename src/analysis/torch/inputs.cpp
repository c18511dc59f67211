// Model inputs (inputs.hpp): data file -> token ids or images -> one ModelInput per sample.
#include "sinkscope/analysis/inputs.hpp"

#include <ATen/ATen.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/random.hpp"
#include "sinkscope/core/sha256.hpp"

namespace sinkscope::analysis {

OverContext parse_over_context(const std::string& s) {
    if (s == "cap") return OverContext::Cap;
    if (s == "refuse") return OverContext::Refuse;
    throw UsageError("--over-context must be cap or refuse, got '" + s + "'");
}

void check_loss_max_tokens(int64_t max_tokens) {
    if (max_tokens == 1 || max_tokens < 0)
        throw UsageError("--max-tokens must be >= 2 (0: no cut)");
}

std::string AnalysisInputs::truncation_note() const {
    if (n_truncated == 0) return {};
    std::string s = std::to_string(n_truncated) + " of " + count_of(int64_t(size()), "input") +
                    (n_truncated == 1 ? " was" : " were") + " cut to " +
                    count_of(cut_length, "token");
    if (cut_by_context)
        return s + ", the model's context (--over-context refuse makes longer inputs an error)";
    return s + " (--max-tokens)";
}

std::string AnalysisInputs::samples_note(const std::string& option) const {
    if (!fewer_samples_than_requested()) return {};
    return option + " " + std::to_string(samples_requested) + " asks for more samples than " +
           data_name + " holds: all " + std::to_string(size()) + " are used";
}

int64_t AnalysisInputs::n_tokens(size_t k) const {
    return images ? image_tokens : int64_t(ids[k].size());
}

model::ModelInput AnalysisInputs::model_input(const model::Model& m, size_t k) const {
    if (images) return model::image_input(m, images->get(sample_index[k]));
    std::vector<int64_t> wide(ids[k].begin(), ids[k].end());
    model::ModelInput input;
    input.ids = at::tensor(wide, at::TensorOptions().dtype(at::kLong)).view({1, -1});  // [1, pos]
    return input;
}

std::string inputs_sha256(const AnalysisInputs& in) {
    Sha256 h;
    h.update(in.images_sha256.data(), in.images_sha256.size());  // images: their files
    for (const auto& s : in.ids) {
        uint64_t n = s.size();
        h.update(&n, sizeof n);
        h.update(s.data(), s.size() * sizeof(int32_t));
    }
    return h.hex_digest();
}

namespace {

// Which of n samples are used: the first `samples`, or a seeded random subset.
std::vector<size_t> choose(size_t n, const InputsOptions& o) {
    const size_t k = o.samples > 0 ? std::min(n, size_t(o.samples)) : n;
    if (o.seed) return sample_indices(n, k, *o.seed);
    std::vector<size_t> first(k);
    for (size_t i = 0; i < k; ++i) first[i] = i;
    return first;
}

}  // namespace

AnalysisInputs load_inputs(const model::Model& m, const InputsOptions& o,
                           tokenizer::BosPolicy bos) {
    const auto& cfg = m.config();
    if (o.samples < 0) throw UsageError("--samples must be >= 0");
    if (o.max_tokens < 0) throw UsageError("--max-tokens must be >= 0");
    AnalysisInputs in;
    in.data_name = o.data.empty() ? "built-in prompts" : o.data.string();
    in.samples_requested = o.samples;
    in.kept_columns = o.keep_columns;
    if (!o.keep_columns.empty() && (o.data.empty() || cfg.is_vision()))
        throw UsageError("--keep-columns needs --data naming a CSV or JSONL file (" + in.data_name +
                         (cfg.is_vision() ? " are images" : " have no columns") + ")");
    // Without a seed only the first samples are read; with one, all (then a subset is drawn).
    const int64_t read = o.seed ? 0 : o.samples;
    if (cfg.is_vision()) {
        if (o.data.empty())
            throw UsageError(
                "--data: a vision model needs images (a .png, a directory of .png "
                "files or a .npy image stack)");
        in.kind = "images";
        in.images = io::ImageSet::open(o.data, read);
        in.image_tokens = cfg.n_ctx;
        Sha256 h;
        for (const auto& f : in.images->files()) {
            const std::string d = sha256_file(f);
            h.update(d.data(), d.size());
        }
        in.images_sha256 = h.hex_digest();
        in.sample_index = choose(in.images->size(), o);
        for (size_t k : in.sample_index) {
            in.rows.push_back(int64_t(k));
            (void)m.image_processor()->preprocess(in.images->get(k), cfg.n_channels,
                                                  cfg.image_size);
            in.ids.emplace_back();
        }
        return in;
    }
    std::error_code ec;
    if (!o.data.empty() && std::filesystem::is_directory(o.data, ec))
        throw UsageError(o.data.string() +
                         " is a directory; a text model reads one file (.txt, .jsonl, .csv or "
                         ".npy token ids), and a directory of .png files is for vision models");
    const std::vector<io::Sample> samples =
        o.data.empty() ? io::builtin_prompts(read)
                       : io::load_dataset(o.data, {.text_column = o.text_column,
                                                   .keep_columns = o.keep_columns,
                                                   .max_samples = read});
    if (samples.empty()) throw InputError(in.data_name, "no samples");
    // The one length every input is cut to: max_tokens, or the context when that is shorter and
    // over_context caps.
    // The context is the model's real limit (ModelConfig::context_limit: none for dynamic NTK
    // RoPE, which runs past max_position_embeddings by design).
    const int64_t limit = cfg.context_limit();
    in.context = limit;
    in.cut_length = o.max_tokens;
    if (limit > 0 && o.over_context == OverContext::Cap &&
        (in.cut_length == 0 || limit < in.cut_length)) {
        in.cut_length = limit;
        in.cut_by_context = true;
    }
    in.sample_index = choose(samples.size(), o);
    for (size_t k : in.sample_index) {
        const io::Sample& s = samples[k];
        in.rows.push_back(s.row);
        in.kept.push_back(s.kept);
        std::vector<int32_t> x;
        if (!s.ids.empty()) {
            for (int64_t id : s.ids) {
                SS_CHECK_INPUT(id >= 0 && id < cfg.d_vocab, in.data_name, "sample ", k,
                               " has token id ", id, " outside the vocabulary [0, ", cfg.d_vocab,
                               ")");
                x.push_back(int32_t(id));
            }
        } else {
            x = m.encode(s.text, bos);
        }
        if (in.cut_length > 0 && int64_t(x.size()) > in.cut_length)
            x.resize(size_t(in.cut_length)), ++in.n_truncated;
        if (o.over_context == OverContext::Refuse && limit > 0 && int64_t(x.size()) > limit)
            throw InputError(in.data_name,
                             "sample " + std::to_string(k) + " has " + std::to_string(x.size()) +
                                 " tokens, more than the model's context of " +
                                 std::to_string(limit) +
                                 " (--over-context cap cuts such inputs to the context)");
        if (x.empty())
            throw InputError(in.data_name, "sample " + std::to_string(k) + " has no tokens");
        in.ids.push_back(std::move(x));
    }
    return in;
}

}  // namespace sinkscope::analysis
