// The pipeline's streamed tables (sinks.csv, <table>_per_input.csv) and its outputs written into a
// run's files in memory are the bytes the same run writes on disk, and a shard's streamed rows
// read the same from either.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "sinkscope/analysis/pipeline.hpp"
#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/core/run_files.hpp"
#include "synthetic_attention.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::analysis;
using sinkscope::metrics::Masking;

namespace {

// Three inputs through a pipeline whose streams go to `files`; its outputs written there too.
// Returns the rows streamed before finish() (what a shard sends rank 0).
std::map<std::string, std::string> run(const RunFiles& files) {
    const int64_t L = 2, H = 2, T = 12;
    AnalysisOptions o;
    o.analyses = {"compositional", "sink_eps", "entropy_rows"};
    o.per_input = true;
    o.threads = 1;
    AnalysisPipeline pipeline(L, H, resolve(o, {}), "synthetic", "synthetic");
    pipeline.open_streams(files);
    for (uint64_t seed : {1u, 2u, 3u})
        pipeline.add(testutil::random_input(seed, L, H, T, Masking::Causal, true));
    std::map<std::string, std::string> rows = pipeline.stream_rows();
    const PipelineResults results = pipeline.finish();
    for (const auto& [name, out] : results.outputs) write_output(out, files);
    return rows;
}

}  // namespace

TEST(PipelineStreams, InMemoryEqualsOnDisk) {
    testutil::ScratchDir tmp;
    const auto disk_rows = run(RunFiles(tmp.path()));
    const RunFiles memory = RunFiles::in_memory();
    const auto memory_rows = run(memory);
    EXPECT_EQ(memory.files(), testutil::snapshot_tree(tmp.path()));
    EXPECT_EQ(memory_rows, disk_rows);
    // Every kind of file is there: the streams, a table, an array.
    for (const char* f : {"sinks.csv", "heads_per_input.csv", "heads.csv", "entropy_rows.npy"})
        EXPECT_TRUE(memory.exists(f)) << f;
    // The sinks of 3 inputs: a header, then per input the model-wide row and one per layer.
    const std::string& sinks = memory.files().at("sinks.csv");
    EXPECT_EQ(std::count(sinks.begin(), sinks.end(), '\n'), 1 + 3 * (1 + 2));
    EXPECT_FALSE(memory_rows.at("sinks").empty());
}
