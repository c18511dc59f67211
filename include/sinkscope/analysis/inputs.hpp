// The inputs of a model run and how one sample becomes a model::ModelInput: token ids for text
// models (text encoded with the model's tokenizer, or ids given in the data), images for vision
// models (PNG / .npy through the model's image processor). The one sample loader of every model
// command (analyze, dump, perplexity).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sinkscope/io/dataset.hpp"
#include "sinkscope/io/image.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"

namespace sinkscope::analysis {

struct InputsOptions {
    std::filesystem::path data;        // empty: the built-in prompt set (text models only)
    std::string text_column = "text";  // CSV column
    int64_t max_tokens = 0;            // text inputs are cut to this many tokens (0: no limit)
    int64_t samples = 0;               // 0: every sample
    // Unset: the first `samples` samples; set: `samples` samples drawn without replacement with
    // this seed (kept in data order).
    std::optional<uint64_t> seed;
};

struct AnalysisInputs {
    std::string data_name;                  // the data file, or "built-in prompts"
    std::string kind = "text";              // "text" | "images"
    std::vector<std::vector<int32_t>> ids;  // per sample: token ids (images: empty)
    std::vector<size_t> sample_index;       // per input: its sample's index in the data
    int64_t n_truncated = 0;                // text samples cut to max_tokens
    std::optional<io::ImageSet> images;     // vision models: decoded on demand
    int64_t image_tokens = 0;               // vision models: 1 + patches per image
    std::string images_sha256;              // vision models: hash of the image files

    size_t size() const { return ids.size(); }
    int64_t n_tokens(size_t k) const;
    // Input k as the model reads it (batch of 1, on the model's device).
    model::ModelInput model_input(const model::Model& m, size_t k) const;
};

// sha256 of what the inputs are (token ids with their lengths; images: their files): a resumed
// run must see the same value.
std::string inputs_sha256(const AnalysisInputs& in);

// Loads the data for model `m`: text models get token ids (ids beyond the vocabulary or negative
// and samples without tokens are InputErrors naming the data file); vision models get the images
// of the data (a .png, a directory of .png files or a .npy image / stack; max_tokens does not
// apply), each decoded and preprocessed once here so a bad image fails before any output.
AnalysisInputs load_inputs(const model::Model& m, const InputsOptions& o, tokenizer::BosPolicy bos);

}  // namespace sinkscope::analysis
