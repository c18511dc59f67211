// ordered_parallel (core/parallel.hpp): every item produced once, consumed in index order on the
// calling thread, never more than `ahead` results waiting, an item's exception rethrown at its
// turn after the items before it, and a consumer's exception stopping the workers.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "sinkscope/core/parallel.hpp"

namespace {

using sinkscope::ordered_parallel;

TEST(OrderedParallel, ConsumesEveryItemInOrderOnTheCallingThread) {
    for (int workers : {0, 1, 2, 3, 8}) {
        SCOPED_TRACE(workers);
        const int64_t n = 57;
        std::vector<int> produced(size_t(n), 0);
        std::mutex seen_mutex;
        std::set<std::thread::id> producers;
        std::vector<int64_t> order;
        std::vector<int64_t> values;
        const auto caller = std::this_thread::get_id();
        ordered_parallel(
            n, workers, 2,
            [&](int64_t i) {
                {
                    const std::lock_guard<std::mutex> lock(seen_mutex);
                    ++produced[size_t(i)];
                    producers.insert(std::this_thread::get_id());
                }
                // Later items finish first now and then, so order is the helper's doing.
                if (i % 5 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
                return i * i;
            },
            [&](int64_t i, int64_t v) {
                EXPECT_EQ(std::this_thread::get_id(), caller);
                order.push_back(i);
                values.push_back(v);
            });
        ASSERT_EQ(order.size(), size_t(n));
        for (int64_t i = 0; i < n; ++i) {
            EXPECT_EQ(order[size_t(i)], i);
            EXPECT_EQ(values[size_t(i)], i * i);
            EXPECT_EQ(produced[size_t(i)], 1) << "item " << i;
        }
        if (workers <= 1) {  // no thread of its own
            EXPECT_EQ(producers, std::set<std::thread::id>{caller});
        } else {
            EXPECT_EQ(producers.count(caller), 0u);
            EXPECT_LE(producers.size(), size_t(workers));
        }
    }
}

// At most `ahead` items are produced and not consumed: the consumer is slow, the workers fast.
TEST(OrderedParallel, HoldsAtMostAheadResults) {
    for (int64_t ahead : {1, 2, 3, 5}) {
        SCOPED_TRACE(ahead);
        const int workers = 3;
        std::atomic<int64_t> started{0};
        int64_t most = 0;
        int64_t consumed = 0;
        ordered_parallel(
            40, workers, ahead,
            [&](int64_t i) {
                ++started;
                return i;
            },
            [&](int64_t i, int64_t) {
                std::this_thread::sleep_for(std::chrono::microseconds(300));
                // Started but not consumed, this one included.
                most = std::max(most, started.load() - consumed);
                ++consumed;
                EXPECT_EQ(i + 1, consumed);
            });
        // `ahead` waiting (at least one a worker) and the one the consumer holds.
        EXPECT_LE(most, std::max<int64_t>(ahead, workers) + 1);
        EXPECT_GE(most, 1);
    }
}

// produce(i) throws: items before i are consumed, then the exception reaches the caller.
TEST(OrderedParallel, RethrowsAnItemsExceptionAtItsTurn) {
    for (int workers : {1, 2, 4}) {
        SCOPED_TRACE(workers);
        std::vector<int64_t> consumed;
        try {
            ordered_parallel(
                20, workers, workers,
                [](int64_t i) -> int64_t {
                    if (i == 7 || i == 12) throw std::runtime_error("item " + std::to_string(i));
                    return i;
                },
                [&](int64_t i, int64_t) { consumed.push_back(i); });
            ADD_FAILURE() << "no exception";
        } catch (const std::runtime_error& e) {
            EXPECT_STREQ(e.what(), "item 7");
        }
        ASSERT_EQ(consumed.size(), 7u);
        for (int64_t i = 0; i < 7; ++i) EXPECT_EQ(consumed[size_t(i)], i);
    }
}

// consume throws: the call returns with it once the workers stopped; no item past the window
// was started.
TEST(OrderedParallel, ConsumerExceptionStopsTheWorkers) {
    std::atomic<int64_t> started{0};
    EXPECT_THROW(ordered_parallel(
                     1000, 3, 3,
                     [&](int64_t i) {
                         ++started;
                         return i;
                     },
                     [](int64_t i, int64_t) {
                         if (i == 4) throw std::logic_error("stop");
                     }),
                 std::logic_error);
    // Items 0..4 consumed, at most 3 more produced ahead.
    EXPECT_LE(started.load(), 5 + 3);
}

TEST(OrderedParallel, NoItemsNothingCalled) {
    int calls = 0;
    ordered_parallel(
        0, 4, 4, [&](int64_t) { return ++calls; }, [&](int64_t, int) { ++calls; });
    EXPECT_EQ(calls, 0);
}

}  // namespace
