// The inputs of an analysis run and how one sample becomes a model::ModelInput: token ids for
// text models (text encoded with the model's tokenizer, or ids given in the data), images for
// vision models (PNG / .npy through the model's image processor).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sinkscope/analysis/analyze.hpp"
#include "sinkscope/io/image.hpp"
#include "sinkscope/model/model.hpp"

namespace sinkscope::analysis {

struct AnalysisInputs {
    std::string data_name;                  // the data file, or "built-in prompts"
    std::string kind = "text";              // "text" | "images"
    std::vector<std::vector<int32_t>> ids;  // per sample: token ids (images: empty)
    int64_t n_truncated = 0;                // text samples cut to --max-tokens
    std::optional<io::ImageSet> images;     // vision models: decoded on demand
    int64_t image_tokens = 0;               // vision models: 1 + patches per image
    std::string images_sha256;              // vision models: hash of the image files

    size_t size() const { return ids.size(); }
    int64_t n_tokens(size_t k) const;
    // Sample k as the model reads it (batch of 1, on the model's device).
    model::ModelInput model_input(const model::Model& m, size_t k) const;
};

// Loads --data (or the built-in prompts) for model `m`: text models get token ids truncated to
// --max-tokens; vision models get the images of --data (a .png, a directory of .png files or a
// .npy image / stack; --max-tokens does not apply), each decoded and preprocessed once here so a
// bad image fails before any output. Errors name the data file.
AnalysisInputs load_analysis_inputs(const model::Model& m, const AnalyzeOptions& o,
                                    tokenizer::BosPolicy bos);

}  // namespace sinkscope::analysis
