// Coarse-grained parallelism with results in a fixed order: items (inputs, samples, windows) are
// produced on worker threads and handed to the calling thread in index order, so that whatever
// the thread count, the caller sees the same results in the same order and every sum it forms
// is added in the same order (results identical bit for bit for any --threads).
//
// Workers block on a condition variable; nothing spins, so a busy machine loses no more than
// the cores it takes (issue 46: a spinning pool was 4x slower than one thread beside a CPU hog).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace sinkscope {

// Calls produce(i) for every i in [0, n) on up to `workers` threads, at most `ahead` results
// produced and not yet consumed (their memory), and consume(i, result) on the calling thread
// for i = 0, 1, ... in order. workers <= 1 or n <= 1: both run on the calling thread, one item
// after the other. An exception from produce(i) is rethrown on the calling thread when item i's
// turn comes (the items before it consumed); one from consume stops the workers after the items
// they are producing. `ahead` below `workers` is raised to it.
template <class Produce, class Consume>
void ordered_parallel(int64_t n, int workers, int64_t ahead, Produce&& produce, Consume&& consume) {
    if (workers <= 1 || n <= 1) {
        for (int64_t i = 0; i < n; ++i) consume(i, produce(i));
        return;
    }
    using Result = decltype(produce(int64_t{}));
    workers = int(std::min<int64_t>(workers, n));
    ahead = std::max<int64_t>(ahead, workers);
    struct Slot {
        std::optional<Result> value;
        std::exception_ptr error;
    };
    std::mutex mutex;
    std::condition_variable changed;
    std::map<int64_t, Slot> ready;  // produced, not yet consumed
    int64_t claimed = 0;            // items handed to a worker
    int64_t consumed = 0;           // items the caller took
    bool stop = false;

    auto work = [&] {
        for (;;) {
            int64_t i;
            {
                std::unique_lock<std::mutex> lock(mutex);
                changed.wait(lock,
                             [&] { return stop || claimed >= n || claimed < consumed + ahead; });
                if (stop || claimed >= n) return;
                i = claimed++;
            }
            Slot slot;
            try {
                slot.value.emplace(produce(i));
            } catch (...) {
                slot.error = std::current_exception();
            }
            {
                const std::lock_guard<std::mutex> lock(mutex);
                ready.emplace(i, std::move(slot));
            }
            changed.notify_all();
        }
    };
    std::vector<std::thread> pool;
    // Stops and joins the workers on every way out, an exception included.
    struct Joiner {
        std::mutex& mutex;
        std::condition_variable& changed;
        bool& stop;
        std::vector<std::thread>& pool;
        ~Joiner() {
            {
                const std::lock_guard<std::mutex> lock(mutex);
                stop = true;
            }
            changed.notify_all();
            for (std::thread& t : pool) t.join();
        }
    } joiner{mutex, changed, stop, pool};
    pool.reserve(size_t(workers));
    for (int w = 0; w < workers; ++w) pool.emplace_back(work);

    for (int64_t i = 0; i < n; ++i) {
        Slot slot;
        {
            std::unique_lock<std::mutex> lock(mutex);
            changed.wait(lock, [&] { return ready.count(i) > 0; });
            auto it = ready.find(i);
            slot = std::move(it->second);
            ready.erase(it);
            ++consumed;
        }
        changed.notify_all();
        if (slot.error) std::rethrow_exception(slot.error);
        consume(i, std::move(*slot.value));
    }
}

// Calls part(i) for every i in [0, n) on up to `workers` threads, the calling thread one of
// them, and returns when all are done. Each part writes its own result, so what the caller
// reads afterwards does not depend on which thread ran which part. The first exception (by
// index) is rethrown on the calling thread after every started part has finished.
template <class Part>
void parallel_parts(int64_t n, int workers, Part&& part) {
    if (workers <= 1 || n <= 1) {
        for (int64_t i = 0; i < n; ++i) part(i);
        return;
    }
    workers = int(std::min<int64_t>(workers, n));
    std::atomic<int64_t> next{0};
    std::vector<std::exception_ptr> errors(size_t(n), nullptr);
    auto work = [&] {
        for (int64_t i; (i = next.fetch_add(1)) < n;) {
            try {
                part(i);
            } catch (...) {
                errors[size_t(i)] = std::current_exception();
            }
        }
    };
    std::vector<std::thread> helpers;
    helpers.reserve(size_t(workers - 1));
    try {
        for (int w = 1; w < workers; ++w) helpers.emplace_back(work);
    } catch (...) {  // no thread to be had: the calling thread does the rest
    }
    work();
    for (std::thread& t : helpers) t.join();
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
}

}  // namespace sinkscope
