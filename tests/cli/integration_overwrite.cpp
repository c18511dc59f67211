// What `metrics --out` and `report --run` do with paths that already exist: a non-empty folder of
// the user's survives byte for byte (with or without --overwrite), --overwrite replaces an earlier
// sinkscope run, and a run that fails while overwriting leaves the earlier one intact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "sinkscope/io/npy.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;
using testutil::run_cli;
using testutil::snapshot_tree;

namespace {

// Nothing but `keep` is left in `dir` (no staging folder, no moved-aside old run).
void expect_only(const fs::path& dir, const std::vector<std::string>& keep) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    std::vector<std::string> want = keep;
    std::sort(want.begin(), want.end());
    EXPECT_EQ(names, want);
}

// A folder of the user's: a paper and a nested data file.
void make_victim(const fs::path& dir) {
    testutil::write_text(dir / "paper.tex", "\\documentclass{article}\n");
    testutil::write_text(dir / "sub" / "data.txt", "1 2 3\n");
}

// (N=2, L=1, H=2, T=4, T=4) causal rows with a sink on key 0; the second input's last row holds
// a NaN, which metrics finds only when it reaches that input (after staging has begun).
fs::path attention_with_late_nan(const fs::path& dir) {
    const int64_t n = 2, h = 2, t = 4;
    std::vector<float> a(size_t(n * h * t * t), 0.0f);
    for (int64_t s = 0; s < n; ++s)
        for (int64_t k = 0; k < h; ++k)
            for (int64_t i = 0; i < t; ++i) {
                float* row = &a[size_t(((s * h + k) * t + i) * t)];
                double z = 0;
                for (int64_t j = 0; j <= i; ++j) z += std::exp(j == 0 ? 2.0 + k : 0.1 * double(j));
                for (int64_t j = 0; j <= i; ++j)
                    row[j] = float(std::exp(j == 0 ? 2.0 + k : 0.1 * double(j)) / z);
            }
    a[a.size() - 1] = NAN;
    const fs::path file = dir / "late_nan.npy";
    io::write_npy(file, io::make_npy_f32({n, 1, h, t, t}, a));
    return file;
}

// A quick metrics run on the built-in example (section 1-2 quantities only).
std::vector<std::string> example_args(const fs::path& out, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"metrics",       "--example", "--analyses",
                                     "compositional", "--out",     out.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
}

void earlier_run(const fs::path& out) {
    const auto r = run_cli(example_args(out));
    ASSERT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace

// `metrics --out` on a non-empty folder that sinkscope did not write: refused in one line naming
// the folder (exit 2), with and without --overwrite, and every byte of it is unchanged.
TEST(OverwriteCli, MetricsLeavesForeignFolder) {
    testutil::ScratchDir tmp;
    const fs::path victim = tmp / "victim";
    make_victim(victim);
    const auto before = snapshot_tree(victim);
    for (bool overwrite : {false, true}) {
        std::vector<std::string> args = {"metrics", "--example", "--out", victim.string()};
        if (overwrite) args.push_back("--overwrite");
        const auto r = run_cli(args);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_NE(r.err.find(victim.string()), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_EQ(snapshot_tree(victim), before);
    }
    expect_only(tmp.path(), {"victim"});
    // The input file itself is never replaced by a directory.
    const fs::path input = attention_with_late_nan(tmp.path());
    const auto r = run_cli({"metrics", "--example", "--out", input.string(), "--overwrite"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(fs::is_regular_file(input));
}

// --overwrite replaces an earlier metrics run (files only the old run had are gone); without it
// the earlier run is refused and kept.
TEST(OverwriteCli, MetricsOverwriteReplacesEarlierRun) {
    testutil::ScratchDir tmp;
    const fs::path run = tmp / "run";
    ASSERT_NO_FATAL_FAILURE(earlier_run(run));
    testutil::write_text(run / "only_in_old_run.txt", "old");
    const auto before = snapshot_tree(run);
    auto r = run_cli(example_args(run));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--overwrite"), std::string::npos) << r.err;
    EXPECT_EQ(snapshot_tree(run), before);
    r = run_cli(example_args(run, {"--overwrite"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(fs::exists(run / "only_in_old_run.txt"));
    EXPECT_TRUE(fs::exists(run / "run.json"));
    EXPECT_TRUE(fs::exists(run / "heads.csv"));
    expect_only(tmp.path(), {"run"});
}

// A metrics run that fails half way (a NaN in its last input) while overwriting an earlier run
// exits non-zero and leaves the earlier run byte for byte, with no staging folder behind.
TEST(OverwriteCli, MetricsFailureKeepsEarlierRun) {
    testutil::ScratchDir tmp;
    const fs::path run = tmp / "run";
    ASSERT_NO_FATAL_FAILURE(earlier_run(run));
    const auto before = snapshot_tree(run);
    const fs::path bad = attention_with_late_nan(tmp.path());
    auto r = run_cli({"metrics", "--attention", bad.string(), "--analyses", "compositional",
                      "--out", run.string(), "--overwrite"});
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.err.find("late_nan.npy"), std::string::npos) << r.err;
    EXPECT_EQ(snapshot_tree(run), before);
    expect_only(tmp.path(), {"run", "late_nan.npy"});
}

// `report --run`: refuses a folder that is not a sinkscope run; refuses to replace report.html
// without --overwrite; with it replaces sinkscope's report but never a page of the user's; a
// failing re-render leaves the earlier report as it was.
TEST(OverwriteCli, ReportRules) {
    testutil::ScratchDir tmp;
    const fs::path victim = tmp / "victim";
    make_victim(victim);
    const auto victim_before = snapshot_tree(victim);
    auto r = run_cli({"report", "--run", victim.string(), "--overwrite"});
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.err.find("not a sinkscope run"), std::string::npos) << r.err;
    EXPECT_EQ(snapshot_tree(victim), victim_before);

    const fs::path run = tmp / "run";
    // Without its own report.html (metrics writes one by default), so `report` writes the first.
    r = run_cli(example_args(run, {"--no-report"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run_cli({"report", "--run", run.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run_cli({"report", "--run", run.string()});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--overwrite"), std::string::npos) << r.err;
    r = run_cli({"report", "--run", run.string(), "--overwrite"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(run / "report.html"));

    // A failure while re-rendering (a table that cannot be read) keeps the earlier report.
    const auto before = snapshot_tree(run);
    fs::remove(run / "heads.csv");
    fs::create_directory(run / "heads.csv");
    r = run_cli({"report", "--run", run.string(), "--overwrite"});
    EXPECT_NE(r.exit_code, 0) << r.err;
    EXPECT_EQ(snapshot_tree(run).at("report.html"), before.at("report.html"));
    fs::remove(run / "heads.csv");

    // A report.html the user wrote is not replaced, even with --overwrite.
    testutil::write_text(run / "report.html", "<html>my own notes</html>");
    r = run_cli({"report", "--run", run.string(), "--overwrite"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(snapshot_tree(run).at("report.html"), "<html>my own notes</html>");
}
