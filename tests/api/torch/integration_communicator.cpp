// api::Communicator (distributed.hpp) with every rank a thread of this process, on 127.0.0.1:
// gather delivers each rank's bytes at rank 0 in rank order (sizes differ, one is empty),
// broadcast delivers rank 0's, all_reduce_sum equals the sum in rank order bit for bit, and the
// shards of shard_range tile the items in order.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "free_port.hpp"
#include "sinkscope/api/distributed.hpp"
#include "sinkscope/core/error.hpp"

using namespace sinkscope;

namespace {

// Rank r's bytes: r * 1000 copies of char('a' + r) and a NUL (rank 0 sends nothing).
std::string payload(int64_t r) {
    return r == 0 ? std::string() : std::string(size_t(r) * 1000, char('a' + r)) + '\0';
}

// Rank r's values: magnitudes far apart, so that the order of the additions shows in the bits.
std::vector<double> values(int64_t r) {
    return {1e16 * double(r == 0), 1.0 + double(r), -3.5};
}

}  // namespace

TEST(Communicator, CollectivesOverThreeRanks) {
    constexpr int64_t kWorld = 3;
    const std::string master = "127.0.0.1:" + std::to_string(testutil::free_port());
    std::vector<std::vector<std::string>> gathered(kWorld);
    std::vector<std::string> broadcast(kWorld);
    std::vector<std::vector<double>> reduced(kWorld);
    std::vector<std::thread> ranks;
    for (int64_t r = 0; r < kWorld; ++r)
        ranks.emplace_back([&, r] {
            api::Communicator comm(api::resolve_dist(
                {.world_size = kWorld, .rank = r, .master = master, .timeout_s = 30}));
            gathered[size_t(r)] = comm.gather(payload(r));
            broadcast[size_t(r)] = comm.broadcast(r == 0 ? std::string("from rank 0") : "");
            reduced[size_t(r)] = values(r);
            comm.all_reduce_sum(reduced[size_t(r)]);
            comm.barrier();
            comm.finish();
        });
    for (auto& t : ranks) t.join();

    ASSERT_EQ(gathered[0].size(), size_t(kWorld));
    for (int64_t r = 0; r < kWorld; ++r) EXPECT_EQ(gathered[0][size_t(r)], payload(r)) << r;
    std::vector<double> sum(3, 0.0);
    for (int64_t r = 0; r < kWorld; ++r)
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += values(r)[i];  // rank order
    for (int64_t r = 0; r < kWorld; ++r) {
        if (r > 0) {
            EXPECT_TRUE(gathered[size_t(r)].empty());
        }
        EXPECT_EQ(broadcast[size_t(r)], "from rank 0");
        EXPECT_EQ(reduced[size_t(r)], sum) << r;  // bit for bit
    }
}

TEST(Communicator, OneProcessConnectsNothing) {
    api::Communicator comm(api::resolve_dist({.world_size = 1, .rank = 0, .master = {}}));
    EXPECT_FALSE(comm.distributed());
    EXPECT_EQ(comm.gather("x"), std::vector<std::string>{"x"});
    std::vector<double> v{1.5};
    comm.all_reduce_sum(v);
    EXPECT_EQ(v[0], 1.5);
}

TEST(Communicator, OptionsOutOfRangeAreUsageErrors) {
    EXPECT_THROW(api::resolve_dist({.world_size = 2, .rank = 2, .master = "h:1"}), UsageError);
    EXPECT_THROW(api::resolve_dist({.world_size = 2, .rank = 0, .master = "h"}), UsageError);
    EXPECT_THROW(api::resolve_dist({.world_size = 2, .rank = 0, .master = "h:1", .timeout_s = 1}),
                 UsageError);
}

TEST(Communicator, ShardsTileTheItemsInOrder) {
    for (int64_t n : {0, 1, 7, 60, 400})
        for (int64_t w : {1, 2, 3, 7}) {
            int64_t next = 0;
            for (int64_t r = 0; r < w; ++r) {
                const auto [b, e] = api::shard_range(n, r, w);
                EXPECT_EQ(b, next);
                EXPECT_LE(e - b, n / w + 1);  // balanced: sizes differ by at most one
                EXPECT_GE(e - b, n / w);
                next = e;
            }
            EXPECT_EQ(next, n);
        }
}
