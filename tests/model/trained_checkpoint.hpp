// A trained model's checkpoint written as `sinkscope train` writes it (config.json and
// model.safetensors) and read back by load_model, for the tests of what training saves.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/train.hpp"

namespace sinkscope::testutil {

// load_model of a model folder without a tokenizer.
inline model::Model load_weights_only(const std::filesystem::path& dir) {
    model::LoadOptions lo;
    lo.load_tokenizer = false;
    return model::load_model(dir, lo);
}

// Writes `hf` as config.json and t's weights as model.safetensors into `dir`, then loads the
// folder (without a tokenizer).
inline model::Model save_and_load(const model::Trainer& t, const nlohmann::json& hf,
                                  const std::filesystem::path& dir) {
    write_file_atomic(dir / "config.json", hf.dump());
    write_file_atomic(dir / "model.safetensors", t.checkpoint_safetensors());
    return load_weights_only(dir);
}

}  // namespace sinkscope::testutil
