// Progress inside one input (long inputs): the pipeline reports head metrics by visible keys and
// the reference-frame analyses together by layers, each ending at its total, never going backwards.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "sinkscope/analysis/pipeline.hpp"
#include "synthetic_attention.hpp"

using namespace sinkscope;
using namespace sinkscope::analysis;
using sinkscope::metrics::Masking;

TEST(PipelineProgress, StagesRunToTheirTotals) {
    const int64_t L = 3, H = 2, T = 130;
    AnalysisOptions o;
    o.analyses = {"compositional", "graphs", "entropy"};
    AnalysisPipeline pipeline(L, H, resolve(o, {}), "synthetic", "synthetic");
    std::mutex m;
    std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> calls;
    pipeline.set_progress([&](const char* stage, int64_t done, int64_t total) {
        std::lock_guard<std::mutex> lock(m);
        calls[stage].push_back({done, total});
    });
    for (uint64_t seed : {1u, 2u})
        pipeline.add(testutil::random_input(seed, L, H, T, Masking::Causal, true));

    // graphs and entropy run in one pass, under one name.
    ASSERT_EQ(calls.size(), 2u);
    // Head metrics: keys of a causal input, 1 + 2 + ... + T per input; 130 rows -> 3 calls + end.
    const auto& heads = calls.at("head metrics");
    ASSERT_EQ(heads.size(), 2u * 4u);
    for (size_t k = 0; k < heads.size(); ++k) {
        EXPECT_EQ(heads[k].second, T * (T + 1) / 2);
        if (k % 4 != 0) {
            EXPECT_GE(heads[k].first, heads[k - 1].first);
        }
    }
    EXPECT_EQ(heads[0].first, 0);
    EXPECT_EQ(heads[3].first, heads[3].second);
    EXPECT_EQ(heads[7].first, heads[7].second);
    // Section 8: 0, then one call per finished layer (any order of threads, counts 1..L).
    for (const char* stage : {"reference-frame analyses"}) {
        const auto& p2 = calls.at(stage);
        ASSERT_EQ(p2.size(), 2u * size_t(L + 1)) << stage;
        for (size_t k = 0; k < p2.size(); ++k) {
            EXPECT_EQ(p2[k].second, L) << stage;
            EXPECT_EQ(p2[k].first, int64_t(k % size_t(L + 1))) << stage;
        }
    }
}
