// Training small decoders from scratch (`sinkscope train`): a Llama-style (RoPE, RMSNorm,
// SwiGLU) or GPT-2-style (learned positions, LayerNorm, GELU) model built by the project's own
// families from seeded random weights, trained with AdamW, linear warm-up + cosine decay and
// global gradient-norm clipping on next-token cross-entropy, and saved as Hugging Face
// checkpoints that load_model reads back. The forward is the families' own (Model::forward
// inside a GradientScope), so a saved checkpoint is exactly the model that was trained.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "sinkscope/model/config.hpp"
#include "sinkscope/model/model.hpp"

namespace sinkscope::model {

struct TrainConfig {
    std::string architecture = "llama";  // "llama" | "gpt2"
    int64_t d_model = 64;
    int64_t n_layers = 2;
    int64_t n_heads = 4;
    int64_t d_mlp = 172;
    int64_t seq_len = 64;  // tokens per training sequence, BOS included (= the model's context)
    int64_t batch = 8;     // sequences per step
    int64_t steps = 100;
    int64_t warmup = 10;        // steps of linear warm-up from 0 to lr
    double lr = 1e-3;           // peak learning rate
    double min_lr = 1e-4;       // reached by the cosine at the last step
    double weight_decay = 0.1;  // AdamW, decoupled, on matrices (embeddings included) only
    double beta1 = 0.9;
    double beta2 = 0.95;
    double adam_eps = 1e-8;
    double clip = 1.0;             // global gradient-norm clipping (<= 0: none)
    double init_std = 0.02;        // N(0, std) for matrices; output projections std / sqrt(2 L)
    int64_t vocab = 0;             // byte-level BPE vocabulary size (0: bytes only, 257 ids)
    int64_t checkpoint_every = 0;  // 0: steps / 4
    // The switches that test why sinks form (Gu et al. 2025; docs/user_guide.md): the attention
    // function (config.json "sinkscope_attention" when not softmax), and whether each packed
    // sequence starts with BOS (false: seq_len corpus tokens, the first one arbitrary; the
    // tokenizer written beside the checkpoint then adds no BOS by default).
    AttentionFunction attention = AttentionFunction::Softmax;
    bool bos = true;
    // A learnable key/value slot in every layer (ModelConfig::kv_slot; config.json
    // "sinkscope_kv_bias"): k* and v* start at 0 (the model starts as softmax with one more zero
    // logit), are not weight-decayed (vectors, as the biases), softmax only.
    bool kv_bias = false;
};

// Upper bounds of a training config's sizes (train_config_from_json; n_layers and vocab take the
// limits layers and vocab_size of core/limits.hpp): far above what one machine can train, low
// enough that no product of them overflows before train_memory_bytes() refuses it.
inline constexpr int64_t kMaxTrainWidth = int64_t(1) << 17;   // d_model, d_mlp, n_heads
inline constexpr int64_t kMaxTrainTokens = int64_t(1) << 20;  // seq_len, batch
inline constexpr int64_t kMaxTrainSteps = int64_t(1) << 40;   // steps, warmup, checkpoint_every

// About how many bytes training `c` with a vocabulary of `vocab_size` needs (float32 weights,
// gradients and AdamW moments, and the activations one step keeps for its backward pass): checked
// against the available memory before anything is allocated.
double train_memory_bytes(const TrainConfig& c, int64_t vocab_size);

// Built-in presets: "tiny" and "tiny-gpt2" (tests: seconds), "default" (the shipped model).
TrainConfig train_preset(const std::string& name);  // UsageError naming the unknown preset
std::vector<std::string> train_preset_names();
// The config as JSON (every field; "attention", "bos" and "kv_bias" only when they differ from the
// defaults,
// so a run without the switches writes the files it wrote before they existed), and back: keys
// of TrainConfig, missing keys keep the defaults above; unknown keys or values out of range are
// an InputError naming `origin`.
nlohmann::json train_config_json(const TrainConfig& c);
TrainConfig train_config_from_json(const nlohmann::json& j, const std::string& origin);

// The corpus ids packed into training sequences [n, seq_len] int64: with bos_id >= 0 each is BOS
// then seq_len - 1 consecutive corpus ids, with bos_id < 0 seq_len consecutive corpus ids (the
// first one wherever the packing cuts the corpus); n = ids / (ids per sequence), the tail that
// fills no sequence is left out (n may be 0).
at::Tensor pack_sequences(const std::vector<int32_t>& ids, int64_t seq_len, int32_t bos_id);

// config.json of the trained model (transformers' LlamaConfig / GPT2Config keys; plus
// "sinkscope_attention" when c.attention is not softmax and "sinkscope_kv_bias" with c.kv_bias,
// which transformers does not read).
nlohmann::json hf_config_json(const TrainConfig& c, int64_t vocab_size, int32_t bos_id);

// The optimizer's state beside the model: AdamW moments of every parameter, and the step.
class Trainer {
public:
    // A model of `c` with seeded random weights (the same on every platform: core/random.hpp).
    Trainer(const TrainConfig& c, const nlohmann::json& hf_config, uint64_t seed);
    ~Trainer();
    Trainer(const Trainer&) = delete;
    Trainer& operator=(const Trainer&) = delete;

    // One optimizer step on `batch` [batch, seq_len] int64 ids: the mean next-token
    // cross-entropy over every position but the last, its gradients, clipping, AdamW at the
    // learning rate of the current step. Returns the loss before the update.
    double step(const at::Tensor& batch);
    int64_t steps_done() const { return step_; }
    double learning_rate(int64_t step) const;  // schedule at 0-based `step`

    const Model& model() const { return model_; }
    // The weights under their Hugging Face names, f32 (model.safetensors bytes).
    std::string checkpoint_safetensors() const;
    // Everything a resumed run needs (weights, moments, step) as bytes, and back. load_state
    // expects bytes of the same config (InternalError otherwise; the caller checks the run's
    // fingerprint first).
    std::string state_bytes() const;
    void load_state(const std::string& bytes);

private:
    TrainConfig c_;
    nlohmann::json hf_config_;
    Model model_;
    std::vector<at::Tensor> m_, v_;
    int64_t step_ = 0;
};

}  // namespace sinkscope::model
