// `train` as a library function: trains a small decoder (model/train.hpp) on a plain-text
// corpus and writes Hugging Face checkpoints, a manifest of them and a log.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace sinkscope::api {

struct TrainOptions {
    std::string preset;  // a built-in preset (model::train_preset_names), or
    std::string config;  // a JSON file of model::TrainConfig keys
    std::string text;    // the corpus: plain UTF-8 text
    std::string out;
    int64_t steps = 0;               // > 0: overrides the config's steps
    int64_t checkpoint_every = 0;    // > 0: overrides the config's checkpoint_every
    int64_t vocab = -1;              // >= 0: overrides the config's vocab (0: bytes only)
    std::string attention_function;  // not empty: overrides the config's attention function
    bool no_bos = false;             // true: sequences without BOS (overrides the config's bos)
    bool kv_bias = false;            // true: a learnable key/value slot (overrides the config's)
    uint64_t seed = 1;
    int threads = 0;        // torch intra-op threads (0: libtorch's default); results depend on it
    double sink_eps = 0.3;  // Sink_eps recorded per checkpoint (spec 8.q)
    bool resume = false;
    bool overwrite = false;
    std::string progress = "auto";
    std::string command_line;
    // Called after each step with the number of steps done (tests interrupt here).
    std::function<void(int64_t)> after_step;
};

// Writes <out>/{config.json, model.safetensors, tokenizer.json} (the last step),
// <out>/checkpoints/step_NNNNNN/ (the same three files), manifest.json and manifest.csv (step,
// tokens seen, loss, Sink_eps, path per checkpoint), train.log, train_config.json and run.json.
// Staged in <out>.partial, which keeps the state of the last checkpoint for --resume. Returns
// the output directory.
std::string run_train(const TrainOptions& o, std::ostream& log);

}  // namespace sinkscope::api
