// All spec-8 analyses on one input (principled, head-averaged graphs): target < 1 s for
// L = 32, H = 32, T = 128 on 2 cores.
#include <benchmark/benchmark.h>

#include "sinkscope/metrics/ref_frame.hpp"
#include "synthetic_attention.hpp"

using namespace sinkscope::metrics;

namespace {
// Causal softmax attention with a sink on key 0: rows softmax(1.5 N(0, 1) + 4 on key 0),
// [L, H, T, T].
AttentionInput make_input(int64_t n_layers, int64_t n_heads, int64_t n) {
    return sinkscope::testutil::causal_sink_attention(n_layers, n_heads, n,
                                                      {.scale = 1.5, .sink_boost = 4.0}, 2025);
}

void run(benchmark::State& state, const std::string& analyses, const std::string& compat,
         int64_t threads = 1) {
    const auto in = make_input(state.range(0), state.range(1), state.range(2));
    RefFrameOptions options;
    options.analyses = analyses;
    options.compat = compat;
    options.threads = threads;
    for (auto _ : state) {
        RefFrameAccumulator acc(options);
        acc.add(in);
        benchmark::DoNotOptimize(acc.finish());
    }
    state.counters["heads/s"] = benchmark::Counter(
        static_cast<double>(state.range(0) * state.range(1)) * state.iterations(),
        benchmark::Counter::kIsRate);
}
}  // namespace

static void BM_P2All(benchmark::State& s) {
    run(s, "graphs,topology,kl,spectra,entropy,tokens,frame", "");
}
static void BM_P2AllTwoThreads(benchmark::State& s) {
    run(s, "graphs,topology,kl,spectra,entropy,tokens,frame", "", 2);
}
static void BM_P2Graphs(benchmark::State& s) {
    run(s, "graphs", "");
}
static void BM_P2Topology(benchmark::State& s) {
    run(s, "topology", "");
}
static void BM_P2Kl(benchmark::State& s) {
    run(s, "kl", "");
}
static void BM_P2Spectra(benchmark::State& s) {
    run(s, "spectra", "");
}
static void BM_P2Rest(benchmark::State& s) {
    run(s, "entropy,tokens,frame", "");
}
static void BM_P2Compat(benchmark::State& s) {
    run(s, "graphs,topology,kl,spectra,entropy,tokens,frame", "ruscio2025");
}

BENCHMARK(BM_P2All)->Args({32, 32, 128})->Args({12, 12, 64})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_P2AllTwoThreads)->Args({32, 32, 128})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_P2Graphs)->Args({32, 32, 128})->Unit(benchmark::kMillisecond);
// Long inputs (issue 19): one layer's head average at T = 1024 and 2048 (sparse graphs, partial
// Laplacian solves; the full sigma^2 spectrum of the spectra analysis).
BENCHMARK(BM_P2Graphs)->Args({1, 4, 1024})->Args({1, 4, 2048})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_P2Topology)->Args({32, 32, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_P2Kl)->Args({32, 32, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_P2Spectra)->Args({32, 32, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_P2Spectra)->Args({1, 4, 1024})->Args({1, 4, 2048})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_P2Rest)->Args({32, 32, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_P2Compat)->Args({32, 32, 128})->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
