// What `analyze --out` and `dump --out` do with paths that already exist, on the real
// tinystories656K model: a folder of the user's survives byte for byte, --overwrite replaces an
// earlier sinkscope run, and a run killed or failing while overwriting leaves the earlier run.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/npy.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;
using testutil::run_cli;
using testutil::snapshot_tree;

namespace {

std::vector<std::string> with(std::vector<std::string> base,
                              const std::vector<std::string>& extra) {
    base.insert(base.end(), extra.begin(), extra.end());
    return base;
}

void make_victim(const fs::path& dir) {
    testutil::write_text(dir / "notes.txt", "three weeks of notes\n");
    testutil::write_text(dir / "sub" / "data.txt", "1 2 3\n");
}

}  // namespace

// analyze: a foreign non-empty folder is refused before the model loads (with or without
// --overwrite); --overwrite replaces an earlier run; a run SIGKILLed while overwriting leaves
// the earlier run byte for byte, and --resume --overwrite then completes the replacement.
TEST(OverwriteAnalyze, ForeignFolderEarlierRunAndKill) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const std::vector<std::string> base = {"analyze",
                                           "--model",
                                           (shared / "models/tinystories656K").string(),
                                           "--max-tokens",
                                           "12",
                                           "--analyses",
                                           "compositional",
                                           "--quiet",
                                           "--no-report",
                                           "--checkpoint-every",
                                           "2"};

    const fs::path victim = tmp / "victim";
    make_victim(victim);
    const auto victim_before = snapshot_tree(victim);
    for (const char* flag : {"--samples", "--overwrite"}) {
        std::vector<std::string> extra = {"--samples", "3", "--out", victim.string()};
        if (std::string(flag) == "--overwrite") extra.push_back("--overwrite");
        const auto r = run_cli(with(base, extra));
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_NE(r.err.find(victim.string()), std::string::npos) << r.err;
        EXPECT_EQ(snapshot_tree(victim), victim_before);
    }

    const fs::path run = tmp / "run";
    auto r = run_cli(with(base, {"--samples", "3", "--out", run.string()}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto first = snapshot_tree(run);
    // A 5-sample run does not quietly replace the finished 3-sample run.
    r = run_cli(with(base, {"--samples", "5", "--out", run.string()}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(snapshot_tree(run), first);
    // Killed after 4 of 5 inputs while overwriting: the earlier run is untouched.
    r = run_cli(with(
        base, {"--samples", "5", "--out", run.string(), "--overwrite", "--debug-kill-after", "4"}));
    EXPECT_EQ(r.exit_code, 128 + 9) << r.err;
    EXPECT_EQ(snapshot_tree(run), first);
    EXPECT_TRUE(fs::exists(tmp / "run.partial" / "state.bin"));
    // Resuming completes the replacement.
    r = run_cli(with(base, {"--samples", "5", "--out", run.string(), "--overwrite", "--resume"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(fs::exists(tmp / "run.partial"));
    const auto second = snapshot_tree(run);
    EXPECT_NE(second.at("heads.csv"), first.at("heads.csv"));
    EXPECT_EQ(second.count(".sinkscope-staging"), 0u);
    EXPECT_NE(second.at("run.json").find("--samples 5"), std::string::npos);
}

// dump: a foreign folder is refused before the model runs; --overwrite replaces an earlier dump;
// a dump that fails (an out-of-vocabulary id in its second input) leaves the earlier dump.
TEST(OverwriteDump, ForeignFolderEarlierRunAndFailure) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const std::string model = (shared / "models/tinystories656K").string();
    testutil::write_text(tmp / "data.txt", "Once upon a time\nThere was a cat\n");
    const std::vector<std::string> base = {"dump", "--model", model, "--data",
                                           (tmp / "data.txt").string()};

    const fs::path victim = tmp / "victim";
    make_victim(victim);
    const auto victim_before = snapshot_tree(victim);
    for (bool overwrite : {false, true}) {
        std::vector<std::string> extra = {"--out", victim.string()};
        if (overwrite) extra.push_back("--overwrite");
        const auto r = run_cli(with(base, extra));
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_NE(r.err.find(victim.string()), std::string::npos) << r.err;
        EXPECT_EQ(snapshot_tree(victim), victim_before);
    }

    const fs::path out = tmp / "out";
    auto r = run_cli(with(base, {"--out", out.string()}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    testutil::write_text(out / "only_in_old_dump.txt", "old");
    const auto first = snapshot_tree(out);
    r = run_cli(with(base, {"--out", out.string()}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(snapshot_tree(out), first);

    io::write_npy(tmp / "bad_ids.npy", io::make_npy_i64({2, 3}, {1, 2, 3, 1, 1 << 30, 3}));
    r = run_cli({"dump", "--model", model, "--data", (tmp / "bad_ids.npy").string(), "--out",
                 out.string(), "--overwrite"});
    EXPECT_NE(r.exit_code, 0) << r.err;
    EXPECT_EQ(snapshot_tree(out), first);

    r = run_cli(with(base, {"--out", out.string(), "--overwrite"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // A file sinkscope did not write is the user's: --overwrite keeps it (issue 46 item 1).
    EXPECT_EQ(read_file(out / "only_in_old_dump.txt"), "old");
    EXPECT_TRUE(fs::exists(out / "attention.npy"));
    for (const auto& e : fs::directory_iterator(tmp.path())) {
        const std::string name = e.path().filename().string();
        EXPECT_TRUE(name == "out" || name == "victim" || name == "data.txt" ||
                    name == "bad_ids.npy")
            << name;
    }
}
