// Forward throughput of the model runtime on a random-weight ~125M-parameter Llama (d_model 768,
// 12 layers, 12 heads, d_mlp 3072, vocab 32000): tokens/s and GFLOP/s without capture, with every
// layer's scores + pattern captured, and with the fp64 host hand-over to the metrics.
#include <map>
#include <random>
#include <vector>

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include "sinkscope/analysis/capture.hpp"
#include "sinkscope/io/weights.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
using sinkscope::analysis::to_attention_input;

namespace {

// Every tensor is a view of one shared random buffer: enough for timing, 100 MB instead of 500.
class RandomStore {
public:
    explicit RandomStore(int64_t max_numel) : buf_(static_cast<size_t>(max_numel)) {
        std::mt19937 rng(1);
        std::normal_distribution<float> n(0.0f, 0.02f);
        for (auto& v : buf_) v = n(rng);
        for (size_t i = 0; i < 4096 && i < buf_.size(); ++i) buf_[i] = 1.0f;  // norm weights
    }
    const float* data() const { return buf_.data(); }

private:
    std::vector<float> buf_;
};

// HF tensor names and shapes of the config, all viewing the random buffer.
class ShapedStore : public io::WeightStore {
public:
    ShapedStore(const ModelConfig& c, const RandomStore& r) : c_(c), r_(r) {
        const auto& arch = find_architecture(c.architecture);
        const int64_t D = c.d_model, q = c.n_heads * c.d_head, kv = c.n_kv_heads * c.d_head;
        auto put = [&](TensorRole role, int64_t l, std::vector<int64_t> s) {
            shapes_[tensor_name(arch, WeightFormat::HuggingFace, role, l)] = s;
        };
        put(TensorRole::TokenEmbed, -1, {c.d_vocab, D});
        put(TensorRole::OutputNorm, -1, {D});
        put(TensorRole::Output, -1, {c.d_vocab, D});
        for (int64_t l = 0; l < c.n_layers; ++l) {
            put(TensorRole::AttnNorm, l, {D});
            put(TensorRole::AttnQ, l, {q, D});
            put(TensorRole::AttnK, l, {kv, D});
            put(TensorRole::AttnV, l, {kv, D});
            put(TensorRole::AttnO, l, {D, q});
            put(TensorRole::FfnNorm, l, {D});
            put(TensorRole::FfnGate, l, {c.d_mlp, D});
            put(TensorRole::FfnUp, l, {c.d_mlp, D});
            put(TensorRole::FfnDown, l, {D, c.d_mlp});
        }
    }
    std::vector<std::string> names() const override { return {}; }
    bool has(const std::string& n) const override { return shapes_.count(n) != 0; }
    io::TensorView get(const std::string& n) const override {
        io::TensorView v;
        v.name = n;
        v.shape = shapes_.at(n);
        int64_t numel = 1;
        for (auto d : v.shape) numel *= d;
        v.data = reinterpret_cast<const uint8_t*>(r_.data());
        v.n_bytes = static_cast<size_t>(numel) * sizeof(float);
        return v;
    }
    std::vector<std::filesystem::path> files() const override { return {}; }

private:
    const ModelConfig& c_;
    const RandomStore& r_;
    std::map<std::string, std::vector<int64_t>> shapes_;
};

ModelConfig config_125m() {
    ModelConfig c;
    c.architecture = "llama";
    c.n_layers = 12;
    c.n_heads = 12;
    c.n_kv_heads = 12;
    c.d_model = 768;
    c.d_head = 64;
    c.d_mlp = 3072;
    c.d_vocab = 32000;
    c.n_ctx = 2048;
    return c;
}

const Model& model_125m() {
    static const ModelConfig c = config_125m();
    static const RandomStore random(c.d_vocab * c.d_model);
    static const ShapedStore store(c, random);
    static const Model m = build_model(c, WeightSource{&store, WeightFormat::HuggingFace, "random"});
    return m;
}

// Matmul FLOPs of one eager forward of T tokens (attention computed on the full T x T square).
double forward_flops(const ModelConfig& c, int64_t T) {
    const double per_token = 2.0 * (c.d_model * c.d_head * (2 * c.n_heads + 2 * c.n_kv_heads) +
                                    3.0 * c.d_model * c.d_mlp) * c.n_layers +
                             2.0 * c.d_vocab * c.d_model;
    const double attn = 4.0 * c.n_layers * c.n_heads * double(T) * double(T) * c.d_head;
    return per_token * double(T) + attn;
}

// mode 0: no capture; 1: scores + pattern of every layer kept; 2: also converted to fp64 host
// AttentionInput (what the analysis module consumes).
void BM_Forward125M(benchmark::State& state) {
    at::set_num_threads(2);
    const Model& m = model_125m();
    const int64_t T = state.range(0);
    const int64_t mode = state.range(1);
    std::vector<int32_t> ids(static_cast<size_t>(T));
    for (int64_t i = 0; i < T; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % 32000);
    const CaptureSpec spec = mode == 0 ? CaptureSpec() : CaptureSpec::attention();
    for (auto _ : state) {
        ForwardResult r = m.forward(ids, spec);
        if (mode == 2) benchmark::DoNotOptimize(to_attention_input(r, m.config(), ids));
        benchmark::DoNotOptimize(r.logits.data_ptr());
    }
    state.counters["tokens/s"] =
        benchmark::Counter(double(T) * state.iterations(), benchmark::Counter::kIsRate);
    state.counters["GFLOP/s"] = benchmark::Counter(
        forward_flops(m.config(), T) * 1e-9 * state.iterations(), benchmark::Counter::kIsRate);
    state.counters["params_M"] = double(m.n_params()) * 1e-6;
}
BENCHMARK(BM_Forward125M)
    ->ArgsProduct({{128, 512}, {0, 1, 2}})
    ->ArgNames({"T", "capture"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
