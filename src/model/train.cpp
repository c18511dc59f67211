// Training small decoders (model/train.hpp). The model is one of the project's own families
// built from an in-memory weight store, so training differentiates exactly the forward that
// every other command runs; checkpoints are written under the registry's Hugging Face names.
#include "sinkscope/model/train.hpp"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/limits.hpp"
#include "sinkscope/core/random.hpp"
#include "sinkscope/io/safetensors_writer.hpp"
#include "sinkscope/io/weights.hpp"
#include "sinkscope/model/gradients.hpp"
#include "sinkscope/model/registry.hpp"

namespace sinkscope::model {

namespace {

constexpr double kPi = 3.14159265358979323846;

// Host f32 tensors by name: the initial weights handed to the family builder.
class InitStore final : public io::WeightStore {
public:
    struct Entry {
        std::vector<int64_t> shape;
        std::vector<float> values;
    };
    std::map<std::string, Entry> tensors;

    std::vector<std::string> names() const override {
        std::vector<std::string> out;
        for (const auto& kv : tensors) out.push_back(kv.first);
        return out;
    }
    bool has(const std::string& name) const override { return tensors.count(name) != 0; }
    io::TensorView get(const std::string& name) const override {
        const auto it = tensors.find(name);
        if (it == tensors.end()) throw InternalError("train: no initial tensor " + name);
        io::TensorView v;
        v.name = name;
        v.shape = it->second.shape;
        v.data = reinterpret_cast<const uint8_t*>(it->second.values.data());
        v.n_bytes = it->second.values.size() * sizeof(float);
        v.file = "initial weights";
        return v;
    }
    std::vector<std::filesystem::path> files() const override { return {}; }
};

// N(0, 1) from two uniform draws (Box-Muller), the same on every platform.
double normal(Xoshiro256& rng) {
    const double u1 = (static_cast<double>(rng.next() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}

bool is_norm(TensorRole r) {
    return role_info(r).component == Component::Norm;
}
bool is_bias(TensorRole r) {
    const std::string n = role_info(r).name;
    return n.size() > 5 && n.compare(n.size() - 5, 5, "_bias") == 0;
}

// Tensors of the architecture with their shapes (as the HF checkpoint stores them), in a fixed
// order: the family's roles, layer by layer.
struct InitTensor {
    TensorRole role;
    int64_t layer;
    std::vector<int64_t> shape;
};
std::vector<InitTensor> init_layout(const ModelConfig& m) {
    using R = TensorRole;
    const int64_t D = m.d_model, F = m.d_mlp, V = m.d_vocab;
    const int64_t Q = m.n_heads * m.d_head, KV = m.n_kv_heads * m.d_head;
    std::vector<InitTensor> t;
    if (m.architecture == "gpt2") {
        // Conv1D weights are stored [in, out] (transformers GPT2's Conv1D).
        t = {{R::TokenEmbed, -1, {V, D}},
             {R::PosEmbed, -1, {m.n_ctx, D}},
             {R::OutputNorm, -1, {D}},
             {R::OutputNormBias, -1, {D}}};
        for (int64_t l = 0; l < m.n_layers; ++l) {
            const std::vector<InitTensor> block = {
                {R::AttnNorm, l, {D}},       {R::AttnNormBias, l, {D}},
                {R::AttnQKV, l, {D, 3 * D}}, {R::AttnQKVBias, l, {3 * D}},
                {R::AttnO, l, {D, D}},       {R::AttnOBias, l, {D}},
                {R::FfnNorm, l, {D}},        {R::FfnNormBias, l, {D}},
                {R::FfnUp, l, {D, F}},       {R::FfnUpBias, l, {F}},
                {R::FfnDown, l, {F, D}},     {R::FfnDownBias, l, {D}}};
            t.insert(t.end(), block.begin(), block.end());
            if (m.kv_slot) t.insert(t.end(), {{R::AttnSlotK, l, {KV}}, {R::AttnSlotV, l, {KV}}});
        }
        return t;
    }
    t = {{R::TokenEmbed, -1, {V, D}}, {R::OutputNorm, -1, {D}}};
    for (int64_t l = 0; l < m.n_layers; ++l) {
        const std::vector<InitTensor> block = {
            {R::AttnNorm, l, {D}},   {R::AttnQ, l, {Q, D}}, {R::AttnK, l, {KV, D}},
            {R::AttnV, l, {KV, D}},  {R::AttnO, l, {D, Q}}, {R::FfnNorm, l, {D}},
            {R::FfnGate, l, {F, D}}, {R::FfnUp, l, {F, D}}, {R::FfnDown, l, {D, F}}};
        t.insert(t.end(), block.begin(), block.end());
        if (m.kv_slot) t.insert(t.end(), {{R::AttnSlotK, l, {KV}}, {R::AttnSlotV, l, {KV}}});
    }
    return t;
}

std::string tensor_bytes(const at::Tensor& t) {
    const at::Tensor c = t.detach().to(at::kFloat).contiguous().cpu();
    return std::string(static_cast<const char*>(c.data_ptr()),
                       static_cast<size_t>(c.numel()) * sizeof(float));
}
void fill_from(at::Tensor& t, const std::string& bytes, size_t& pos) {
    const size_t n = static_cast<size_t>(t.numel()) * sizeof(float);
    SS_CHECK(pos + n <= bytes.size(), "train state shorter than the model");
    at::Tensor host = at::empty(t.sizes(), at::TensorOptions().dtype(at::kFloat));
    std::memcpy(host.data_ptr(), bytes.data() + pos, n);
    pos += n;
    at::NoGradGuard no_grad;
    t.copy_(host);
}

}  // namespace

std::vector<std::string> train_preset_names() {
    return {"tiny", "tiny-gpt2", "default"};
}

TrainConfig train_preset(const std::string& name) {
    TrainConfig c;
    if (name == "tiny" || name == "tiny-gpt2") {
        // Seconds on one core: for tests and a first look at the command.
        c.architecture = name == "tiny" ? "llama" : "gpt2";
        c.d_model = 32;
        c.n_layers = 2;
        c.n_heads = 2;
        c.d_mlp = name == "tiny" ? 64 : 128;
        c.seq_len = 32;
        c.batch = 4;
        c.steps = 30;
        c.warmup = 5;
        c.lr = 3e-3;
        c.min_lr = 3e-4;
        c.checkpoint_every = 10;
        return c;
    }
    if (name == "default") {
        // The first models/default (2,000 steps on the synthetic corpus of scripts/make_corpus.py,
        // no model-wide sink; models/default/README.md lists it among the runs tried). The model
        // shipped now is scripts/make_default_model.sh's recipe (a --config of its own).
        c.architecture = "llama";
        c.d_model = 64;
        c.n_layers = 4;
        c.n_heads = 4;
        c.d_mlp = 172;
        c.seq_len = 64;
        c.batch = 16;
        c.steps = 2000;
        c.warmup = 50;
        c.lr = 1e-2;
        c.min_lr = 1e-3;
        c.weight_decay = 1.0;
        c.vocab = 512;
        c.checkpoint_every = 500;
        return c;
    }
    std::string known;
    for (const std::string& n : train_preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw UsageError("--preset: unknown preset '" + name + "' (known: " + known + ")");
}

namespace {
// Every key of a training config with its value (train_config_from_json checks types against
// the defaults').
nlohmann::json all_train_keys(const TrainConfig& c) {
    return {{"architecture", c.architecture},
            {"d_model", c.d_model},
            {"n_layers", c.n_layers},
            {"n_heads", c.n_heads},
            {"d_mlp", c.d_mlp},
            {"seq_len", c.seq_len},
            {"batch", c.batch},
            {"steps", c.steps},
            {"warmup", c.warmup},
            {"lr", c.lr},
            {"min_lr", c.min_lr},
            {"weight_decay", c.weight_decay},
            {"beta1", c.beta1},
            {"beta2", c.beta2},
            {"adam_eps", c.adam_eps},
            {"clip", c.clip},
            {"init_std", c.init_std},
            {"vocab", c.vocab},
            {"checkpoint_every", c.checkpoint_every},
            {"attention", attention_function_name(c.attention)},
            {"bos", c.bos},
            {"kv_bias", c.kv_bias}};
}
}  // namespace

nlohmann::json train_config_json(const TrainConfig& c) {
    nlohmann::json j = all_train_keys(c);
    const TrainConfig defaults;
    if (c.attention == defaults.attention) j.erase("attention");
    if (c.bos == defaults.bos) j.erase("bos");
    if (c.kv_bias == defaults.kv_bias) j.erase("kv_bias");
    return j;
}

double train_memory_bytes(const TrainConfig& c, int64_t vocab_size) {
    const double D = double(c.d_model), F = double(c.d_mlp), L = double(c.n_layers);
    const double H = double(c.n_heads), T = double(c.seq_len), B = double(c.batch);
    const double V = double(vocab_size);
    // Parameters (either family, rounded up: untied output, positions, biases).
    const double params = 2 * V * D + T * D + L * (4 * D * D + 3 * D * F + 4 * D + 2 * F) + 2 * D;
    // What autograd keeps for the backward pass per token: about 16 d_model-wide and 4
    // d_mlp-wide values per block, the scores, pattern and its mask per head and key, and the
    // logits with their softmax and gradient.
    const double activations = B * T * (L * (16 * D + 4 * F + 3 * H * T) + 3 * V);
    // float32 weights, gradients and AdamW's two moments; float32 activations.
    return 4.0 * (4 * params + activations);
}

TrainConfig train_config_from_json(const nlohmann::json& j, const std::string& origin) {
    SS_CHECK_INPUT(j.is_object(), origin, "a training config is a JSON object");
    TrainConfig c;
    const nlohmann::json known = all_train_keys(c);
    for (const auto& [key, value] : j.items()) {
        SS_CHECK_INPUT(known.contains(key), origin, "unknown key ", quote(key));
        const nlohmann::json& k = known.at(key);
        const bool ok = k.is_string()           ? value.is_string()
                        : k.is_boolean()        ? value.is_boolean()
                        : k.is_number_integer() ? value.is_number_integer()
                                                : value.is_number();
        SS_CHECK_INPUT(ok, origin, "key ", quote(key), " must be a",
                       k.is_string()           ? " string"
                       : k.is_boolean()        ? " boolean"
                       : k.is_number_integer() ? "n integer"
                                               : " number");
    }
    // Every size is bounded before anything multiplies it (a typo such as 4611686018427387904
    // would overflow a tensor's size); train_memory_bytes() then checks their product.
    auto i64 = [&](const char* key, int64_t& v, int64_t lo, int64_t hi) {
        if (!j.contains(key)) return;
        v = j.at(key).get<int64_t>();
        SS_CHECK_INPUT(v >= lo && v <= hi, origin, "key '", key, "' must be in [", lo, ", ", hi,
                       "], found ", v);
    };
    auto f64 = [&](const char* key, double& v, double lo, double hi) {
        if (!j.contains(key)) return;
        v = j.at(key).get<double>();
        SS_CHECK_INPUT(std::isfinite(v) && v >= lo && v <= hi, origin, "key '", key,
                       "' must be in [", lo, ", ", hi, "]");
    };
    if (j.contains("architecture")) c.architecture = j.at("architecture").get<std::string>();
    if (j.contains("attention")) {
        const std::string name = j.at("attention").get<std::string>();
        const std::optional<AttentionFunction> f = attention_function_from_name(name);
        SS_CHECK_INPUT(f.has_value(), origin, "key 'attention' is ", quote(name), ", not one of ",
                       kAttentionFunctionNames);
        c.attention = *f;
    }
    if (j.contains("bos")) c.bos = j.at("bos").get<bool>();
    if (j.contains("kv_bias")) c.kv_bias = j.at("kv_bias").get<bool>();
    SS_CHECK_INPUT(!c.kv_bias || c.attention == AttentionFunction::Softmax, origin,
                   "key 'kv_bias' needs softmax attention, not ",
                   quote(attention_function_name(c.attention)));
    SS_CHECK_INPUT(c.architecture == "llama" || c.architecture == "gpt2", origin, "architecture ",
                   quote(c.architecture), ": train builds llama or gpt2");
    i64("d_model", c.d_model, 1, kMaxTrainWidth);
    i64("n_layers", c.n_layers, 1, int64_t(limit_value(Limit::Layers)));
    i64("n_heads", c.n_heads, 1, kMaxTrainWidth);
    i64("d_mlp", c.d_mlp, 1, kMaxTrainWidth);
    i64("seq_len", c.seq_len, 2, kMaxTrainTokens);
    i64("batch", c.batch, 1, kMaxTrainTokens);
    i64("steps", c.steps, 1, kMaxTrainSteps);
    i64("warmup", c.warmup, 0, kMaxTrainSteps);
    i64("vocab", c.vocab, 0, int64_t(limit_value(Limit::VocabSize)));
    i64("checkpoint_every", c.checkpoint_every, 0, kMaxTrainSteps);
    f64("lr", c.lr, 0, 10);
    f64("min_lr", c.min_lr, 0, 10);
    f64("weight_decay", c.weight_decay, 0, 10);
    f64("beta1", c.beta1, 0, 0.999999);
    f64("beta2", c.beta2, 0, 0.999999);
    f64("adam_eps", c.adam_eps, 0, 1);
    f64("clip", c.clip, 0, 1e9);
    f64("init_std", c.init_std, 0, 10);
    SS_CHECK_INPUT(c.d_model % c.n_heads == 0, origin, "d_model (", c.d_model,
                   ") is not a multiple of n_heads (", c.n_heads, ")");
    SS_CHECK_INPUT(c.architecture != "llama" || (c.d_model / c.n_heads) % 2 == 0, origin,
                   "RoPE needs an even head size (d_model / n_heads)");
    SS_CHECK_INPUT(c.vocab == 0 || c.vocab >= 257, origin,
                   "key 'vocab' must be 0 (bytes) or >= 257 (256 bytes + BOS)");
    return c;
}

at::Tensor pack_sequences(const std::vector<int32_t>& ids, int64_t seq_len, int32_t bos_id) {
    SS_CHECK(seq_len >= 2, "pack_sequences: seq_len must be >= 2");
    const int64_t lead = bos_id >= 0 ? 1 : 0;
    const int64_t chunk = seq_len - lead;  // corpus ids per sequence
    const int64_t n = static_cast<int64_t>(ids.size()) / chunk;
    at::Tensor seqs = at::empty({n, seq_len}, at::TensorOptions().dtype(at::kLong));
    auto a = seqs.accessor<int64_t, 2>();
    for (int64_t s = 0; s < n; ++s) {
        if (lead) a[s][0] = bos_id;
        for (int64_t t = 0; t < chunk; ++t)
            a[s][t + lead] = ids[static_cast<size_t>(s * chunk + t)];
    }
    return seqs;
}

namespace {
// The family's config.json keys (transformers' LlamaConfig / GPT2Config).
nlohmann::json hf_family_config_json(const TrainConfig& c, int64_t vocab_size, int32_t bos_id) {
    if (c.architecture == "gpt2")
        return {{"architectures", {"GPT2LMHeadModel"}},
                {"model_type", "gpt2"},
                {"n_embd", c.d_model},
                {"n_layer", c.n_layers},
                {"n_head", c.n_heads},
                {"n_inner", c.d_mlp},
                {"n_positions", c.seq_len},
                {"n_ctx", c.seq_len},
                {"vocab_size", vocab_size},
                {"activation_function", "gelu_new"},
                {"layer_norm_epsilon", 1e-5},
                {"tie_word_embeddings", true},
                {"bos_token_id", bos_id},
                {"torch_dtype", "float32"}};
    return {{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"hidden_size", c.d_model},
            {"intermediate_size", c.d_mlp},
            {"num_hidden_layers", c.n_layers},
            {"num_attention_heads", c.n_heads},
            {"num_key_value_heads", c.n_heads},
            {"max_position_embeddings", c.seq_len},
            {"vocab_size", vocab_size},
            {"hidden_act", "silu"},
            {"rms_norm_eps", 1e-5},
            {"rope_theta", 10000.0},
            {"tie_word_embeddings", true},
            {"bos_token_id", bos_id},
            {"torch_dtype", "float32"}};
}
}  // namespace

nlohmann::json hf_config_json(const TrainConfig& c, int64_t vocab_size, int32_t bos_id) {
    nlohmann::json j = hf_family_config_json(c, vocab_size, bos_id);
    if (c.attention != AttentionFunction::Softmax)
        j[kHfAttentionKey] = attention_function_name(c.attention);
    if (c.kv_bias) j[kHfKvSlotKey] = true;
    return j;
}

namespace {
Model initial_model(const TrainConfig& c, const nlohmann::json& hf_config, uint64_t seed) {
    const ModelConfig mc = config_from_hf_json(hf_config, "train");
    InitStore store;
    Xoshiro256 rng(seed);
    // GPT-2's scaled init of the projections into the residual stream (Radford et al. 2019).
    const double resid_std = c.init_std / std::sqrt(2.0 * static_cast<double>(c.n_layers));
    const ArchitectureInfo& arch = find_architecture(mc.architecture);
    for (const InitTensor& t : init_layout(mc)) {
        InitStore::Entry e;
        e.shape = t.shape;
        int64_t n = 1;
        for (int64_t d : t.shape) n *= d;
        e.values.resize(static_cast<size_t>(n));
        const bool resid = t.role == TensorRole::AttnO || t.role == TensorRole::FfnDown;
        // The kv slot starts at 0: the model starts as softmax with one more zero logit.
        const bool zero =
            is_bias(t.role) || t.role == TensorRole::AttnSlotK || t.role == TensorRole::AttnSlotV;
        for (float& x : e.values)
            x = is_norm(t.role) && !is_bias(t.role) ? 1.0f
                : zero                              ? 0.0f
                       : static_cast<float>(normal(rng) * (resid ? resid_std : c.init_std));
        store.tensors[tensor_name(arch, WeightFormat::HuggingFace, t.role, t.layer)] = std::move(e);
    }
    return build_model(mc, WeightSource{&store, WeightFormat::HuggingFace, "train"});
}
}  // namespace

Trainer::Trainer(const TrainConfig& c, const nlohmann::json& hf_config, uint64_t seed)
    : c_(c), hf_config_(hf_config), model_(initial_model(c, hf_config, seed)) {
    for (const Parameter& p : model_.parameters()) {
        m_.push_back(at::zeros_like(p.tensor));
        v_.push_back(at::zeros_like(p.tensor));
    }
}

Trainer::~Trainer() = default;

double Trainer::learning_rate(int64_t step) const {
    if (step < c_.warmup)
        return c_.lr * static_cast<double>(step + 1) / static_cast<double>(c_.warmup);
    const int64_t span = std::max<int64_t>(1, c_.steps - 1 - c_.warmup);
    const double t =
        std::min(1.0, static_cast<double>(step - c_.warmup) / static_cast<double>(span));
    return c_.min_lr + 0.5 * (c_.lr - c_.min_lr) * (1.0 + std::cos(kPi * t));
}

double Trainer::step(const at::Tensor& batch) {
    SS_CHECK(batch.dim() == 2 && batch.size(1) >= 2, "train batch must be [batch, seq_len]");
    GradientScope scope(model_);
    const ForwardResult r = model_.forward(batch);
    const int64_t T = batch.size(1);
    // Position t predicts token t + 1.
    const at::Tensor logits = r.logits.narrow(1, 0, T - 1).reshape({-1, r.logits.size(-1)});
    const at::Tensor targets = batch.narrow(1, 1, T - 1).reshape({-1});
    const at::Tensor loss = at::cross_entropy_loss(logits, targets);
    const double loss_value = loss.item<double>();
    std::vector<at::Tensor> grads = scope.gradients(loss);
    at::NoGradGuard no_grad;
    if (c_.clip > 0) {
        // Global norm over every parameter (torch.nn.utils.clip_grad_norm_).
        at::Tensor sq = at::zeros({}, at::TensorOptions().dtype(at::kDouble));
        for (const at::Tensor& g : grads) sq += g.to(at::kDouble).pow(2).sum();
        const double norm = std::sqrt(sq.item<double>());
        if (norm > c_.clip)
            for (at::Tensor& g : grads) g.mul_(c_.clip / (norm + 1e-6));
    }
    // AdamW (Loshchilov & Hutter 2019): decoupled decay, bias-corrected moments.
    const double lr = learning_rate(step_);
    const double t = static_cast<double>(step_ + 1);
    const double bc1 = 1.0 - std::pow(c_.beta1, t), bc2 = 1.0 - std::pow(c_.beta2, t);
    const std::vector<Parameter>& params = scope.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
        at::Tensor w = params[i].tensor;
        if (c_.weight_decay > 0 && w.dim() >= 2) w.mul_(1.0 - lr * c_.weight_decay);
        m_[i].mul_(c_.beta1).add_(grads[i], 1.0 - c_.beta1);
        v_[i].mul_(c_.beta2).addcmul_(grads[i], grads[i], 1.0 - c_.beta2);
        const at::Tensor denom = (v_[i] / bc2).sqrt_().add_(c_.adam_eps);
        w.addcdiv_(m_[i], denom, -lr / bc1);
    }
    ++step_;
    return loss_value;
}

std::string Trainer::checkpoint_safetensors() const {
    using R = TensorRole;
    const ModelConfig& mc = model_.config();
    const ArchitectureInfo& arch = find_architecture(mc.architecture);
    std::vector<io::TensorBytes> out;
    auto put = [&](R role, int64_t layer, const at::Tensor& t) {
        io::TensorBytes b;
        b.name = tensor_name(arch, WeightFormat::HuggingFace, role, layer);
        b.shape = t.sizes().vec();
        b.bytes = tensor_bytes(t);
        out.push_back(std::move(b));
    };
    // GPT-2 keeps q, k, v in one Conv1D c_attn [in, 3 out] (rows [q; k; v] once transposed).
    std::map<std::pair<int64_t, int>, at::Tensor> qkv;
    for (const Parameter& p : model_.parameters()) {
        const R r = p.role;
        if (!arch.hf_conv1d) {
            put(r, p.layer, p.tensor);
            continue;
        }
        const bool w_part = r == R::AttnQ || r == R::AttnK || r == R::AttnV;
        const bool b_part = r == R::AttnQBias || r == R::AttnKBias || r == R::AttnVBias;
        if (w_part || b_part) {
            const int idx = r == R::AttnQ || r == R::AttnQBias   ? 0
                            : r == R::AttnK || r == R::AttnKBias ? 1
                                                                 : 2;
            qkv[{p.layer, idx + (b_part ? 3 : 0)}] = p.tensor;
            if (idx != 2) continue;
            const int off = b_part ? 3 : 0;
            const at::Tensor fused =
                at::cat({qkv.at({p.layer, off}), qkv.at({p.layer, off + 1}), p.tensor}, 0);
            put(b_part ? R::AttnQKVBias : R::AttnQKV, p.layer, b_part ? fused : fused.t());
            continue;
        }
        const bool conv1d =
            p.tensor.dim() == 2 && r != R::TokenEmbed && r != R::PosEmbed && r != R::Output;
        put(r, p.layer, conv1d ? p.tensor.t() : p.tensor);
    }
    return io::safetensors_file(out, {{"format", "pt"}});
}

std::string Trainer::state_bytes() const {
    std::string s;
    const int64_t step = step_;
    s.append(reinterpret_cast<const char*>(&step), sizeof step);
    for (const Parameter& p : model_.parameters()) s += tensor_bytes(p.tensor);
    for (const at::Tensor& m : m_) s += tensor_bytes(m);
    for (const at::Tensor& v : v_) s += tensor_bytes(v);
    return s;
}

void Trainer::load_state(const std::string& bytes) {
    SS_CHECK(bytes.size() >= sizeof(int64_t), "train state too short");
    std::memcpy(&step_, bytes.data(), sizeof step_);
    size_t pos = sizeof step_;
    for (const Parameter& p : model_.parameters()) {
        at::Tensor t = p.tensor;
        fill_from(t, bytes, pos);
    }
    for (at::Tensor& m : m_) fill_from(m, bytes, pos);
    for (at::Tensor& v : v_) fill_from(v, bytes, pos);
    SS_CHECK(pos == bytes.size(), "train state longer than the model");
}

}  // namespace sinkscope::model
