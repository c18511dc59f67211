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

// What happens to a text input longer than the model's context (ModelConfig::context_limit():
// config max_position_embeddings, GGUF context_length, llama2.c seq_len; 0 = unknown or, for
// dynamic NTK RoPE, none, no limit): a model run past the positions it was trained on gives
// numbers that mean nothing, so by default such inputs are cut to the context.
enum class OverContext {
    Cap,     // cut to n_ctx tokens and counted
    Refuse,  // an InputError naming the first such sample
    Keep,    // left whole: the caller runs them in windows (perplexity --stride)
};
// "cap" | "refuse"; UsageError naming --over-context otherwise.
OverContext parse_over_context(const std::string& s);
// --max-tokens of a command that scores each input's loss (prune, fisher): 0 (no cut) or at
// least 2 tokens; UsageError otherwise.
void check_loss_max_tokens(int64_t max_tokens);

struct InputsOptions {
    std::filesystem::path data;        // empty: the built-in prompt set (text models only)
    std::string text_column = "text";  // CSV column
    int64_t max_tokens = 0;            // text inputs are cut to this many tokens (0: no limit)
    OverContext over_context = OverContext::Cap;
    int64_t samples = 0;  // 0: every sample
    // Unset: the first `samples` samples; set: `samples` samples drawn without replacement with
    // this seed (kept in data order).
    std::optional<uint64_t> seed;
    // Data columns carried along (io::DatasetOptions::keep_columns): CSV or JSONL data only.
    std::vector<std::string> keep_columns{};
};

struct AnalysisInputs {
    std::string data_name;                  // the data file, or "built-in prompts"
    std::string kind = "text";              // "text" | "images"
    std::vector<std::vector<int32_t>> ids;  // per sample: token ids (images: empty)
    std::vector<size_t> sample_index;       // per input: its sample's index in the data
    // Per input: its 0-based row in the data file (io::Sample::row; images: the image's index
    // in the set), what joins a per-input table back to the data.
    std::vector<int64_t> rows;
    std::vector<std::string> kept_columns;       // InputsOptions::keep_columns
    std::vector<std::vector<std::string>> kept;  // per input: its values of kept_columns
    int64_t samples_requested = 0;               // InputsOptions::samples (0: every sample)
    int64_t n_truncated = 0;                     // text samples cut to cut_length tokens
    int64_t cut_length = 0;                      // what they were cut to (0: no cut applies)
    bool cut_by_context = false;         // cut_length is the model's context, not max_tokens
    int64_t context = 0;                 // the model's context limit (0: unknown or none)
    std::optional<io::ImageSet> images;  // vision models: decoded on demand
    int64_t image_tokens = 0;            // vision models: 1 + patches per image
    std::string images_sha256;           // vision models: hash of the image files

    size_t size() const { return ids.size(); }
    // One console line saying how many inputs were cut and to what length, and why; empty when
    // none was cut.
    std::string truncation_note() const;
    // One line saying that `option` (e.g. "--samples") asked for more samples than the data
    // holds and how many are used instead; empty when it did not.
    std::string samples_note(const std::string& option) const;
    bool fewer_samples_than_requested() const {
        return samples_requested > 0 && int64_t(size()) < samples_requested;
    }
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
// apply), each decoded and preprocessed once here so a bad image fails before any output. Text
// inputs are cut to max_tokens, then handled by over_context when still longer than the model's
// context.
AnalysisInputs load_inputs(const model::Model& m, const InputsOptions& o, tokenizer::BosPolicy bos);

}  // namespace sinkscope::analysis
