// Model: forward wrappers, head masks, the fp64 hand-over to the metrics, greedy generation,
// perplexity and mean-z for mean ablation.
#include "sinkscope/model/model.hpp"

#include <cmath>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/model/registry.hpp"
#include "tensor_load.hpp"

namespace sinkscope::model {

const char* device_name(DeviceKind d) { return d == DeviceKind::Cuda ? "cuda" : "cpu"; }

const char* compute_dtype_name(ComputeDType t) {
    switch (t) {
        case ComputeDType::Float32: return "float32";
        case ComputeDType::BFloat16: return "bfloat16";
        case ComputeDType::Float16: return "float16";
    }
    return "?";
}

DeviceKind parse_device(const std::string& s) {
    if (s == "cpu") return DeviceKind::Cpu;
    if (s == "cuda") return DeviceKind::Cuda;
    throw UsageError("--device must be cpu or cuda, got '" + s + "'");
}

ComputeDType parse_compute_dtype(const std::string& s) {
    if (s == "float32") return ComputeDType::Float32;
    if (s == "bfloat16") return ComputeDType::BFloat16;
    if (s == "float16") return ComputeDType::Float16;
    throw UsageError("--dtype must be float32, bfloat16 or float16, got '" + s + "'");
}

HeadMask::HeadMask(Kind k, int64_t layers, int64_t heads)
    : kind(k), n_layers(layers), n_heads(heads),
      ablated(static_cast<size_t>(layers * heads), 0) {}

void HeadMask::ablate(int64_t layer, int64_t head) {
    if (layer < 0 || layer >= n_layers || head < 0 || head >= n_heads)
        throw UsageError("head mask: (layer " + std::to_string(layer) + ", head " +
                         std::to_string(head) + ") is outside the model");
    ablated[static_cast<size_t>(layer * n_heads + head)] = 1;
}

void HeadMask::ablate_layer(int64_t layer) {
    for (int64_t h = 0; h < n_heads; ++h) ablate(layer, h);
}

bool HeadMask::is_ablated(int64_t layer, int64_t head) const {
    return ablated[static_cast<size_t>(layer * n_heads + head)] != 0;
}

bool HeadMask::any_in_layer(int64_t layer) const {
    for (int64_t h = 0; h < n_heads; ++h)
        if (is_ablated(layer, h)) return true;
    return false;
}

Model::Model(ModelConfig config, std::unique_ptr<Transformer> net, RuntimeOptions runtime)
    : config_(std::move(config)), net_(std::move(net)), runtime_(runtime) {}
Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

void Model::set_tokenizer(std::unique_ptr<tokenizer::Tokenizer> t) { tokenizer_ = std::move(t); }

int64_t Model::n_params() const { return net_->n_params(); }

int64_t ModelInput::batch_size() const {
    return ids.defined() ? ids.size(0) : pixel_values.defined() ? pixel_values.size(0) : 0;
}

ForwardResult Model::forward(const at::Tensor& ids, const CaptureSpec& capture,
                             const HeadMask* mask) const {
    ModelInput input;
    input.ids = ids;
    return forward(input, capture, mask);
}

ForwardResult Model::forward(const ModelInput& input, const CaptureSpec& capture,
                             const HeadMask* mask) const {
    try {
        return net_->forward(input, capture, mask);
    } catch (const c10::Error& e) {  // one line, without libtorch's backtrace
        throw InternalError(std::string("libtorch: ") + e.what_without_backtrace());
    }
}

ForwardResult Model::forward(const std::vector<int32_t>& ids, const CaptureSpec& capture,
                             const HeadMask* mask) const {
    if (ids.empty()) throw UsageError("empty token sequence");
    std::vector<int64_t> wide(ids.begin(), ids.end());
    const at::Tensor t =  // [1, pos] on the model's device
        at::tensor(wide, at::TensorOptions().dtype(at::kLong)).view({1, -1}).to(
            detail::device_of(runtime_));
    return forward(t, capture, mask);
}

std::vector<int32_t> Model::encode(const std::string& text, tokenizer::BosPolicy bos) const {
    if (!tokenizer_)
        throw UnsupportedError(path.string(), "no tokenizer found for this model (give token ids)");
    return tokenizer_->encode_with_policy(text, bos);
}

Model build_model(const ModelConfig& config, const WeightSource& weights,
                  const RuntimeOptions& runtime) {
    validate_config(config, weights.origin);
    if (runtime.device == DeviceKind::Cuda && !at::hasCUDA())
        throw UnsupportedError("--device cuda: this build of libtorch has no usable CUDA device");
    if (runtime.device == DeviceKind::Cpu && runtime.dtype == ComputeDType::Float16) {
        // Older libtorch CPU builds have no float16 matmul; probe instead of guessing by version.
        try {
            const at::Tensor probe = at::ones({2, 2}, at::TensorOptions().dtype(at::kHalf));
            (void)at::mm(probe, probe);
        } catch (const c10::Error&) {
            throw UnsupportedError(
                "--dtype float16 on --device cpu: this libtorch has no CPU float16 matmul "
                "(use bfloat16 or cuda)");
        }
    }
    if (runtime.n_threads < 0) throw UsageError("--threads must be >= 0");
    if (runtime.n_threads > 0) at::set_num_threads(runtime.n_threads);
    const ArchitectureInfo& arch = find_architecture(config.architecture);
    return Model(config, arch.build(config, weights, runtime), runtime);
}

ModelInput image_input(const Model& model, const io::Image& image) {
    const ModelConfig& c = model.config();
    const io::ImageProcessor* proc = model.image_processor();
    if (!proc) throw UnsupportedError(model.path.string(), "images as input of a text model");
    std::vector<float> px = proc->preprocess(image, c.n_channels, c.image_size);  // [C, H, W]
    ModelInput input;
    input.pixel_values = at::from_blob(px.data(), {1, c.n_channels, c.image_size, c.image_size},
                                       at::TensorOptions().dtype(at::kFloat))
                             .to(detail::device_of(model.runtime()), at::kFloat, false, true);
    return input;
}

at::Tensor compute_mean_z(const Model& model, const std::vector<std::vector<int32_t>>& inputs) {
    const ModelConfig& c = model.config();
    const CaptureSpec spec({hook_glob(HookPoint::Z)});
    at::Tensor sum = at::zeros({c.n_layers, c.n_heads, c.d_head}, at::kDouble);  // host
    int64_t n = 0;
    for (const auto& ids : inputs) {
        const ForwardResult r = model.forward(ids, spec);
        for (int64_t l = 0; l < c.n_layers; ++l)  // hook_z [1, pos, H, d_head]
            sum[l] += r.captured.at(hook_name(HookPoint::Z, l))[0].to(at::kCPU, at::kDouble).sum(0);
        n += static_cast<int64_t>(ids.size());
    }
    SS_CHECK(n > 0, "compute_mean_z needs at least one token");
    return (sum / static_cast<double>(n)).to(at::kFloat);
}

std::vector<int32_t> generate_greedy(const Model& model, std::vector<int32_t> prompt,
                                     int64_t n_new, int32_t stop_token) {
    // Full recomputation per step (no KV cache): generation is for parity checks on small models.
    for (int64_t step = 0; step < n_new; ++step) {
        const ForwardResult r = model.forward(prompt);
        const int32_t next = static_cast<int32_t>(r.logits[0][-1].argmax().item<int64_t>());
        if (stop_token >= 0 && next == stop_token) break;
        prompt.push_back(next);
    }
    return prompt;
}

PerplexityResult compute_perplexity(const Model& model,
                                    const std::vector<std::vector<int32_t>>& samples) {
    PerplexityResult out;
    double total = 0;
    for (const auto& ids : samples) {
        if (ids.size() < 2) {  // nothing to predict
            out.sample_nll.push_back(std::nan(""));
            out.sample_tokens.push_back(0);
            continue;
        }
        const ForwardResult r = model.forward(ids);
        const int64_t T = static_cast<int64_t>(ids.size());
        // [pos - 1, d_vocab] f64 log-probabilities of the next token
        const at::Tensor logp = at::log_softmax(r.logits[0].narrow(0, 0, T - 1).to(at::kDouble), -1);
        std::vector<int64_t> next(ids.begin() + 1, ids.end());
        const at::Tensor target =
            at::tensor(next, at::TensorOptions().dtype(at::kLong)).to(logp.device()).view({-1, 1});
        const double nll = -logp.gather(1, target).sum().item<double>();
        out.sample_nll.push_back(nll / static_cast<double>(T - 1));
        out.sample_tokens.push_back(T - 1);
        total += nll;
        out.n_tokens += T - 1;
    }
    if (out.n_tokens == 0) throw UsageError("perplexity: no sample has two or more tokens");
    out.mean_nll = total / static_cast<double>(out.n_tokens);
    out.perplexity = std::exp(out.mean_nll);
    return out;
}

}  // namespace sinkscope::model
