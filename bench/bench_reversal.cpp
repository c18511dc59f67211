// Exact reversal rates (spec 3): every comparison of the head analyses (3 flip, 3 vs_content,
// dA vs dA_perp, the dA_perp check) on n random heads; the target is n = 1,024 in < 30 s.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "sinkscope/metrics/head_analyses.hpp"
#include "sinkscope/metrics/reversal.hpp"
#include "synthetic_attention.hpp"

namespace {

// n x n head distance matrix with entries ~ U(0.1, 1) (the counting cost does not depend on
// the values).
Eigen::MatrixXd random_distances(int n, std::mt19937_64& rng) {
    return sinkscope::testutil::random_distance_matrix(n, rng, 0.1, 1.0);
}

// Arguments: number of heads, threads.
void BM_ReversalExactAll(benchmark::State& state) {
    const int n = static_cast<int>(state.range(0));
    const int n_threads = static_cast<int>(state.range(1));
    std::mt19937_64 rng(7);
    // cosine/js/euclidean keep+drop, dA, dA_perp
    std::vector<Eigen::MatrixXd> mats;
    for (int i = 0; i < 8; ++i) mats.push_back(random_distances(n, rng));
    std::vector<const Eigen::MatrixXd*> ptrs;
    for (auto& m : mats) ptrs.push_back(&m);
    const std::vector<sinkscope::metrics::MatrixPair> pairs = {
        {0, 1}, {2, 3}, {4, 5},  // flip
        {0, 7}, {2, 7}, {4, 7},  // vs_content
        {6, 7},                  // dA vs dA_perp
        {7, 7},                  // dA_perp keep vs drop check
    };
    for (auto _ : state) {
        auto counts = sinkscope::metrics::count_reversals_exact(ptrs, pairs, {}, n_threads);
        benchmark::DoNotOptimize(counts);
    }
    const double triples = static_cast<double>(sinkscope::metrics::count_triples(n));
    state.counters["triples_per_comparison"] = triples;
    state.counters["triple_comparisons_per_s"] = benchmark::Counter(
        triples * static_cast<double>(pairs.size()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ReversalExactAll)
    ->ArgsProduct({{128, 256, 1024}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

// The whole driver (exact reversal at model scope + within-layer flips for the regime, k
// selection, MDS and clustering of 8 matrices, ARI) on n heads in layers of 32. Arguments:
// number of heads, threads.
void BM_RunHeadAnalyses(benchmark::State& state) {
    const int n = static_cast<int>(state.range(0));
    std::mt19937_64 rng(11);
    std::map<std::string, Eigen::MatrixXd> mats;
    for (const std::string& name : sinkscope::metrics::clustered_matrix_names())
        mats[name] = random_distances(n, rng);
    std::vector<std::pair<int, int>> labels;
    for (int i = 0; i < n; ++i) labels.emplace_back(i / 32, i % 32);
    std::vector<double> layer_rho(static_cast<size_t>((n + 31) / 32), 0.3);
    sinkscope::metrics::HeadAnalysisOptions opts;
    opts.n_threads = static_cast<int>(state.range(1));
    for (auto _ : state) {
        auto res = sinkscope::metrics::run_head_analyses(mats, labels, layer_rho, 0.3, opts);
        benchmark::DoNotOptimize(res);
    }
}
BENCHMARK(BM_RunHeadAnalyses)
    ->ArgsProduct({{256, 1024}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
