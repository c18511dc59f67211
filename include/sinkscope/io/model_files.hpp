// Classifies a user's --model path: a Hugging Face directory, a GGUF file or a llama2.c
// checkpoint, and finds the files that go with it (config, weights, tokenizer).
#pragma once

#include <filesystem>
#include <memory>

#include "sinkscope/io/weights.hpp"

namespace sinkscope::io {

enum class ModelFormat { HfDirectory, Gguf, Llama2c };
const char* model_format_name(ModelFormat f);  // "hf", "gguf", "llama2c"

enum class WeightsFormat { Safetensors, PytorchBin, Gguf, Llama2c };
const char* weights_format_name(WeightsFormat f);  // "safetensors", "pytorch_bin", ...

struct ModelFiles {
    ModelFormat format = ModelFormat::HfDirectory;
    std::filesystem::path root;    // the HF directory, or the GGUF / llama2.c file
    std::filesystem::path config;  // HF: config.json; empty otherwise
    WeightsFormat weights_format = WeightsFormat::Safetensors;
    // HF: model.safetensors.index.json, model.safetensors, pytorch_model.bin.index.json or
    // pytorch_model.bin (first found, in that order); otherwise the file itself.
    std::filesystem::path weights;
    // HF: tokenizer.json, else tokenizer.model or sentencepiece.bpe.model (SentencePiece, XLM-R);
    // llama2.c: tok<vocab>.bin, else tokenizer.bin, beside the checkpoint; GGUF: the file itself
    // (vocabulary in its metadata).
    // Empty when none was found (the caller decides whether that is an error).
    std::filesystem::path tokenizer;
    // HF: preprocessor_config.json (image models) when present; empty otherwise.
    std::filesystem::path preprocessor;
};

// Throws InputError naming `path` when it is none of the three (or does not exist); a .bin
// that is not a valid llama2.c checkpoint gets open_llama2c's error (e.g. truncation).
// A file inside a HF directory (config.json, model.safetensors, ...) resolves to the directory;
// a directory without config.json that holds exactly one .gguf resolves to that file.
ModelFiles locate_model(const std::filesystem::path& path);

// The weights of located model files (PytorchBin: io/torch_pickle.hpp open_pytorch_bin).
std::unique_ptr<WeightStore> open_weights(const ModelFiles& files);

}  // namespace sinkscope::io
