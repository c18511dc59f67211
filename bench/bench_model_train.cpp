// Training throughput of `sinkscope train` (model/train.hpp) for the default preset: tokens/s of
// optimizer steps on random tokens, against the f32 GEMM rate of the same threads
// (BM_Gemm, a square 512 x 512 x 512 at::mm). GFLOP/s of training counts the matrix products
// only: 6 N flops per token for the N weights of the linear layers (forward 2N, backward 4N;
// Kaplan et al. 2020) plus 12 L T d_model for the attention scores and mixing (forward and
// backward), so train GFLOP/s divided by BM_Gemm's is the fraction of the GEMM rate reached.
//   build/bench/bench_model_train --benchmark_counters_tabular=true
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include "sinkscope/model/train.hpp"

using namespace sinkscope;
using namespace sinkscope::model;

namespace {

void BM_TrainStep(benchmark::State& state) {
    at::set_num_threads(static_cast<int>(state.range(0)));
    const TrainConfig c = train_preset("default");
    const nlohmann::json hf = hf_config_json(c, c.vocab, 256);
    Trainer t(c, hf, 1);
    at::manual_seed(1);
    const at::Tensor batch =
        at::randint(0, c.vocab, {c.batch, c.seq_len}, at::TensorOptions().dtype(at::kLong));
    t.step(batch);  // warm-up: allocations
    for (auto _ : state) benchmark::DoNotOptimize(t.step(batch));
    const double D = double(c.d_model), L = double(c.n_layers), T = double(c.seq_len);
    // Weights of the matrix products per token: q, k, v, o, gate, up, down and the unembedding.
    const double n_linear = L * (4 * D * D + 3 * D * double(c.d_mlp)) + double(c.vocab) * D;
    const double flop_per_token = 6 * n_linear + 12 * L * T * D;
    const double tokens = double(state.iterations()) * double(c.batch * c.seq_len);
    state.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsRate);
    state.counters["GFLOP/s"] =
        benchmark::Counter(tokens * flop_per_token * 1e-9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_TrainStep)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Gemm(benchmark::State& state) {
    at::set_num_threads(static_cast<int>(state.range(0)));
    const int64_t n = 512;
    at::manual_seed(1);
    const at::Tensor a = at::randn({n, n}), b = at::randn({n, n});
    for (auto _ : state) benchmark::DoNotOptimize(at::mm(a, b));
    state.counters["GFLOP/s"] = benchmark::Counter(
        double(state.iterations()) * 2.0 * double(n * n * n) * 1e-9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Gemm)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
