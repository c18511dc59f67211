// Head distance matrices (spec 2): one input of T = 128 causal rows through HeadAccumulator for
// 144 heads (12 x 12) and 1,024 heads (32 x 32), 144 heads at T = 1,024, and the 144 heads at
// T = 128 on each SIMD target the pair
// kernels can dispatch to. Counters: rows/s (one row = one head's query row) and GFLOP/s under
// the flop model below (a nominal rate: the same model before and after the kernels changed).
#include <benchmark/benchmark.h>

#include "sinkscope/metrics/head.hpp"
#include "sinkscope/metrics/simd.hpp"
#include "synthetic_attention.hpp"

using namespace sinkscope::metrics;

namespace {

// [L, H, T, T] causal rows softmax(N(0, 1) + 3 on key 0).
AttentionInput make_input(int64_t n_layers, int64_t n_heads, int64_t t) {
    return sinkscope::testutil::causal_sink_attention(n_layers, n_heads, t, {.sink_boost = 3.0},
                                                      42);
}

// Flops per query row set with D parts and n heads (log counted as one flop):
//   Aitchison Gram updates (clr D, content D-1, balance 1): n^2 * 2D   (symmetric half, 2/MAC)
//   classical Grams (p D, pi D-1):                          n^2 * (2D - 1)
//   Jensen-Shannon pairs (keep D, drop D-1), 5 flops/part:  n^2 / 2 * 5 (2D - 1)
double flops_per_input(int64_t n, int64_t t, int64_t min_parts) {
    double f = 0;
    for (int64_t d = min_parts; d <= t; ++d)
        f += double(n) * double(n) * (2.0 * d + (2.0 * d - 1) + 2.5 * (2.0 * d - 1));
    return f;
}

void BM_HeadDistances(benchmark::State& state) {
    const int64_t n = state.range(0), t = state.range(1);
    HeadOptions options;
    options.n_threads = static_cast<int>(state.range(2));
    const int64_t n_layers = n == 144 ? 12 : 32, n_heads = n / n_layers;
    const AttentionInput x = make_input(n_layers, n_heads, t);
    for (auto _ : state) {
        HeadAccumulator acc(n_layers, n_heads, options);
        acc.add(x);
        HeadResults r = acc.finish();
        benchmark::DoNotOptimize(r.distances.at("js_keep").data());
    }
    const double iters = double(state.iterations());
    state.counters["rows/s"] =
        benchmark::Counter(double(n * t) * iters, benchmark::Counter::kIsRate);
    state.counters["GFLOP/s"] =
        benchmark::Counter(flops_per_input(n, t, 3) * 1e-9 * iters, benchmark::Counter::kIsRate);
}

// The same on SIMD target number range(0) of simd::available_targets() (best first).
void BM_HeadDistancesPerTarget(benchmark::State& state) {
    const auto targets = simd::available_targets();
    const auto index = static_cast<size_t>(state.range(0));
    if (index >= targets.size()) {
        state.SkipWithError("no such SIMD target on this CPU");
        return;
    }
    simd::force_target(targets[index].bits);
    state.SetLabel(targets[index].name);
    const int64_t n_layers = 12, n_heads = 12, t = 128;
    const AttentionInput x = make_input(n_layers, n_heads, t);
    for (auto _ : state) {
        HeadAccumulator acc(n_layers, n_heads);
        acc.add(x);
        HeadResults r = acc.finish();
        benchmark::DoNotOptimize(r.distances.at("js_keep").data());
    }
    simd::force_target(0);
    state.counters["GFLOP/s"] = benchmark::Counter(
        flops_per_input(n_layers * n_heads, t, 3) * 1e-9 * double(state.iterations()),
        benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(BM_HeadDistancesPerTarget)
    ->DenseRange(0, 4)
    ->ArgName("target")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK(BM_HeadDistances)
    ->ArgsProduct({{144, 1024}, {128}, {1, 2}})
    ->Args({144, 1024, 1})  // long rows (the 1,024-head input above has T = 128)
    ->ArgNames({"heads", "T", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
