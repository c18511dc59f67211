// Analysis inputs (inputs.hpp): data file -> token ids or images -> one ModelInput per sample.
#include "sinkscope/analysis/inputs.hpp"

#include <ATen/ATen.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/sha256.hpp"
#include "sinkscope/io/dataset.hpp"

namespace sinkscope::analysis {

int64_t AnalysisInputs::n_tokens(size_t k) const {
    return images ? image_tokens : int64_t(ids[k].size());
}

model::ModelInput AnalysisInputs::model_input(const model::Model& m, size_t k) const {
    if (images) return model::image_input(m, images->get(k));
    std::vector<int64_t> wide(ids[k].begin(), ids[k].end());
    model::ModelInput input;
    input.ids = at::tensor(wide, at::TensorOptions().dtype(at::kLong)).view({1, -1});  // [1, pos]
    return input;
}

AnalysisInputs load_analysis_inputs(const model::Model& m, const AnalyzeOptions& o,
                                    tokenizer::BosPolicy bos) {
    const auto& cfg = m.config();
    AnalysisInputs in;
    in.data_name = o.data.empty() ? "built-in prompts" : o.data.string();
    if (cfg.is_vision()) {
        if (o.data.empty())
            throw UsageError(
                "--data: a vision model needs images (a .png, a directory of .png "
                "files or a .npy image stack)");
        in.kind = "images";
        in.images = io::ImageSet::open(o.data, o.samples);
        in.image_tokens = cfg.n_ctx;
        Sha256 h;
        for (const auto& f : in.images->files()) {
            const std::string d = sha256_file(f);
            h.update(d.data(), d.size());
        }
        in.images_sha256 = h.hex_digest();
        for (size_t k = 0; k < in.images->size(); ++k) {
            (void)m.image_processor()->preprocess(in.images->get(k), cfg.n_channels,
                                                  cfg.image_size);
            in.ids.emplace_back();
        }
        return in;
    }
    std::vector<io::Sample> samples =
        o.data.empty()
            ? io::builtin_prompts(o.samples)
            : io::load_dataset(o.data, {.text_column = o.text_column, .max_samples = o.samples});
    if (samples.empty()) throw InputError(in.data_name, "no samples");
    for (size_t k = 0; k < samples.size(); ++k) {
        std::vector<int32_t> x;
        if (!samples[k].ids.empty()) {
            for (int64_t id : samples[k].ids) {
                if (id >= cfg.d_vocab)
                    throw InputError(in.data_name, "sample " + std::to_string(k) +
                                                       " has token id " + std::to_string(id) +
                                                       " >= vocabulary size " +
                                                       std::to_string(cfg.d_vocab));
                x.push_back(int32_t(id));
            }
        } else {
            x = m.encode(samples[k].text, bos);
        }
        if (int64_t(x.size()) > o.max_tokens) x.resize(size_t(o.max_tokens)), ++in.n_truncated;
        if (x.empty())
            throw InputError(in.data_name, "sample " + std::to_string(k) + " has no tokens");
        in.ids.push_back(std::move(x));
    }
    return in;
}

}  // namespace sinkscope::analysis
