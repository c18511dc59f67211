// Work splitting of the pairwise head loops (head.cpp, clark2019.cpp): tasks taken by up to
// n threads, each writing its own outputs, so results do not depend on the thread count.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "metrics/pair_kernels.hpp"

namespace sinkscope::metrics {

// Runs fn(task) for every task in [0, n_tasks) on up to `n_threads` threads (the caller's
// included), each thread taking the next task not yet taken, so a thread that shares its core
// (with the row composition of HeadAccumulator::add) takes fewer. Every task writes its own
// outputs, so the results do not depend on the thread count or on who ran which task.
template <typename Fn>
inline void parallel_tasks(int64_t n_tasks, int n_threads, const Fn& fn) {
    const int k = static_cast<int>(std::min<int64_t>(n_threads, n_tasks));
    std::atomic<int64_t> next{0};
    auto run = [&fn, &next, n_tasks] {
        for (int64_t t = next++; t < n_tasks; t = next++) fn(t);
    };
    if (k <= 1) {
        run();
        return;
    }
    std::vector<std::thread> pool;
    try {
        for (int t = 1; t < k; ++t) pool.emplace_back(run);
    } catch (...) {  // could not start them all: the threads that did (and this one) do the rest
    }
    run();
    for (auto& th : pool) th.join();
}

// Column blocks of the pair kernels over n heads; fn(b_begin, b_end).
template <typename Fn>
inline void for_pair_blocks(int64_t n, int n_threads, const Fn& fn) {
    const int64_t block = kernels::kPairBlock;
    parallel_tasks((n + block - 1) / block, n_threads,
                   [&](int64_t t) { fn(t * block, std::min(n, (t + 1) * block)); });
}

}  // namespace sinkscope::metrics
