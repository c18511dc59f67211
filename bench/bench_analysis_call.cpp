// The cost of one call of the metrics on in-memory arrays (api::compute_metrics, what the Python
// binding `sinkscope.metrics.analyze` calls): bench/python_call_overhead.py times the same calls
// from Python and reports the difference, the binding's own overhead.
//   BM_ComputeMetricsSmall: attention (1, 2, 2, 8, 8), analyses "compositional".
//   BM_ComputeMetricsExample: the example attention (8, 4, 4, 16, 16), analyses "compositional".
//   BM_ComputeMetricsExampleAll: the example attention, every analysis (the default).
//   BM_ComputeMetricsLarge: attention (16, 4, 4, 64, 64) float32 (4 MiB), analyses "sink_eps".
#include <benchmark/benchmark.h>

#include <vector>

#include "sinkscope/api/metrics.hpp"

using namespace sinkscope;

namespace {

// Uniform causal rows, a[n, l, h, i, j] = 1 / (i + 1) for j <= i (python_call_overhead.py
// builds the same array).
std::vector<float> uniform_causal(int64_t n, int64_t l, int64_t h, int64_t t) {
    std::vector<float> a(size_t(n * l * h * t * t), 0.0f);
    for (int64_t r = 0; r < n * l * h; ++r)
        for (int64_t i = 0; i < t; ++i)
            for (int64_t j = 0; j <= i; ++j) a[size_t((r * t + i) * t + j)] = 1.0f / float(i + 1);
    return a;
}

// `analyses` empty: every analysis (the default).
void run_on(benchmark::State& state, const std::vector<int64_t>& shape, const float* a,
            const std::string& analyses) {
    analysis::AnalysisOptions options;
    if (!analyses.empty()) options.analyses = {analyses};
    options.threads = 1;
    for (auto _ : state) {
        analysis::AttentionArrays arrays;
        arrays.attention = std::make_unique<io::NpyMap>("attention", io::DType::F32, shape, a);
        benchmark::DoNotOptimize(api::compute_metrics(std::move(arrays), {}, options, "array"));
    }
}

void run(benchmark::State& state, std::vector<int64_t> shape, const std::string& analyses) {
    const auto a = uniform_causal(shape[0], shape[1], shape[2], shape[3]);
    shape.push_back(shape[3]);
    run_on(state, shape, a.data(), analyses);
}

// The example of `sinkscope metrics --example` (sinkscope.metrics.example_attention()).
void run_example(benchmark::State& state, const std::string& analyses) {
    const io::NpyArray a = api::make_example_attention();
    run_on(state, a.shape, reinterpret_cast<const float*>(a.data.data()), analyses);
}

}  // namespace

static void BM_ComputeMetricsSmall(benchmark::State& s) {
    run(s, {1, 2, 2, 8}, "compositional");
}
static void BM_ComputeMetricsExample(benchmark::State& s) {
    run_example(s, "compositional");
}
static void BM_ComputeMetricsExampleAll(benchmark::State& s) {
    run_example(s, "");
}
static void BM_ComputeMetricsLarge(benchmark::State& s) {
    run(s, {16, 4, 4, 64}, "sink_eps");
}
BENCHMARK(BM_ComputeMetricsSmall)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ComputeMetricsExample)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ComputeMetricsExampleAll)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ComputeMetricsLarge)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
