// Model: runtime options, forward wrappers, build_model and image input. Head masks:
// head_mask.cpp; perplexity, generation, mean z: evaluation.cpp. The hand-over to the metrics is
// analysis/capture.hpp.
#include "sinkscope/model/model.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/system.hpp"
#include "sinkscope/model/registry.hpp"
#include "tensor_load.hpp"

namespace sinkscope::model {

const char* device_name(DeviceKind d) {
    return d == DeviceKind::Cuda ? "cuda" : "cpu";
}

const char* compute_dtype_name(ComputeDType t) {
    switch (t) {
        case ComputeDType::Float32:
            return "float32";
        case ComputeDType::BFloat16:
            return "bfloat16";
        case ComputeDType::Float16:
            return "float16";
        case ComputeDType::Float64:
            return "float64";
    }
    return "?";
}

int compute_dtype_bytes(ComputeDType t) {
    switch (t) {
        case ComputeDType::Float32:
            return 4;
        case ComputeDType::BFloat16:
        case ComputeDType::Float16:
            return 2;
        case ComputeDType::Float64:
            return 8;
    }
    return 4;
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
    if (s == "float64") return ComputeDType::Float64;
    throw UsageError("--dtype must be float32, bfloat16, float16 or float64, got '" + s + "'");
}

Model::Model(ModelConfig config, std::unique_ptr<Transformer> net, RuntimeOptions runtime)
    : config_(std::move(config)), net_(std::move(net)), runtime_(runtime) {}
Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

void Model::set_tokenizer(std::unique_ptr<tokenizer::Tokenizer> t) {
    tokenizer_ = std::move(t);
}

int64_t Model::n_params() const {
    return net_->n_params();
}

std::vector<Parameter> Model::parameters() const {
    // A family may hand out one tensor twice (a tied output matrix is the embedding).
    std::vector<Parameter> out;
    for (Parameter& p : net_->parameters()) {
        const bool seen = std::any_of(out.begin(), out.end(), [&](const Parameter& q) {
            return q.tensor.unsafeGetTensorImpl() == p.tensor.unsafeGetTensorImpl();
        });
        if (!seen) out.push_back(std::move(p));
    }
    return out;
}

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
        at::tensor(wide, at::TensorOptions().dtype(at::kLong))
            .view({1, -1})
            .to(detail::device_of(runtime_));
    return forward(t, capture, mask);
}

std::vector<int32_t> Model::encode(const std::string& text, tokenizer::BosPolicy bos) const {
    if (!tokenizer_)
        throw UnsupportedError(path.string(), "no tokenizer found for this model (give token ids)");
    std::vector<int32_t> ids = tokenizer_->encode_with_policy(text, bos);
    // A tokenizer file can hold ids the model has no embedding for: name the file here, before
    // the id reaches the forward (whose check cannot know where it came from).
    for (int32_t id : ids)
        if (id < 0 || id >= config_.d_vocab)
            throw InputError(tokenizer_->origin().empty() ? path.string() : tokenizer_->origin(),
                             "the tokenizer gives token id " + std::to_string(id) +
                                 (id >= 0 && id < tokenizer_->vocab_size()
                                      ? " (" + quote(tokenizer_->piece(id)) + ")"
                                      : std::string()) +
                                 " outside the model's vocabulary [0, " +
                                 std::to_string(config_.d_vocab) + ")");
    return ids;
}

namespace {

// The registry row's forward (ArchitectureInfo::forward) -> the family's builder.
std::unique_ptr<Transformer> build_family(const ArchitectureInfo& arch, const ModelConfig& config,
                                          const WeightSource& weights,
                                          const RuntimeOptions& runtime) {
    switch (arch.forward) {
        case ForwardFamily::Llama:
            return build_llama_family(config, weights, runtime);
        case ForwardFamily::Gemma2:
            return build_gemma2_family(config, weights, runtime);
        case ForwardFamily::Phi3:
            return build_phi3_family(config, weights, runtime);
        case ForwardFamily::Gpt2:
            return build_gpt2_family(config, weights, runtime);
        case ForwardFamily::GptNeox:
            return build_gpt_neox_family(config, weights, runtime);
        case ForwardFamily::Phi:
            return build_phi_family(config, weights, runtime);
        case ForwardFamily::Bert:
            return build_bert_family(config, weights, runtime);
        case ForwardFamily::Roberta:
            return build_roberta_family(config, weights, runtime);
        case ForwardFamily::Vit:
            return build_vit_family(config, weights, runtime);
        case ForwardFamily::None:
            break;
    }
    throw UnsupportedError(weights.origin, "architecture " + std::string(arch.name) +
                                               " has no forward implementation in this build");
}

}  // namespace

Model build_model(const ModelConfig& config, const WeightSource& weights,
                  const RuntimeOptions& runtime) {
    validate_config(config, weights.origin);
    if (runtime.device == DeviceKind::Cuda && !at::hasCUDA())
        throw UnsupportedError("--device cuda: this build of libtorch has no usable CUDA device");
    if (runtime.device == DeviceKind::Cuda) {
        // float32 is IEEE float32 on the GPU too: libtorch lets cuDNN convolutions (the ViT patch
        // embedding) run in TF32 (10-bit significand) by default, and cuBLAS products when
        // TORCH_ALLOW_TF32_CUBLAS_OVERRIDE is set; either would put the results far outside the
        // float32 bounds the golden tests hold them to (tests/model/golden_cuda.cpp).
        at::globalContext().setAllowTF32CuDNN(false);
        at::globalContext().setAllowTF32CuBLAS(false);
    }
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
    set_compute_threads(runtime.n_threads);
    const ArchitectureInfo& arch = find_architecture(config.architecture);
    return Model(config, build_family(arch, config, weights, runtime), runtime);
}

namespace {
std::atomic<int> g_compute_threads{1};
}

int set_compute_threads(int n) {
    if (n < 0) throw UsageError("--threads must be >= 0");
    const int threads =
        n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    // Every forward on one libtorch and one BLAS thread: how those split a product or a sum
    // follows their thread count, so the last bits of a forward would follow --threads and the
    // machine's cores (issue 46). The threads run whole inputs, samples or windows at once
    // instead (core/parallel.hpp), each the same computation on whichever thread it runs.
    set_intra_op_threads(1);
    g_compute_threads.store(threads);
    return threads;
}

int compute_threads() {
    return g_compute_threads.load();
}

namespace {
thread_local int t_forward_workers = 0;  // 0: not set on this thread
}

int forward_workers() {
    return t_forward_workers > 0 ? t_forward_workers : compute_threads();
}

ForwardWorkers::ForwardWorkers(int n) : previous_(t_forward_workers) {
    t_forward_workers = std::max(1, n);
}

ForwardWorkers::~ForwardWorkers() {
    t_forward_workers = previous_;
}

int forward_share(int64_t side_by_side) {
    return int(std::max<int64_t>(1, compute_threads() / std::max<int64_t>(1, side_by_side)));
}

void set_intra_op_threads(int n) {
    if (at::get_num_threads() != n) at::set_num_threads(n);
    set_blas_threads(n);
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

}  // namespace sinkscope::model
