// What the commands do with paths that already exist: a non-empty folder of the user's survives
// byte for byte (with or without --overwrite); --overwrite replaces the files an earlier
// sinkscope run recorded (run_files.json) and keeps, byte for byte, what the user added there, for
// every command that writes a folder; a run that fails while overwriting leaves the earlier one
// intact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
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

// The files and folders a run recorded as its own (run_files.json).
std::vector<std::string> recorded(const fs::path& run, const char* key = "files") {
    return nlohmann::json::parse(read_file(run / kRunFilesName))
        .at(key)
        .get<std::vector<std::string>>();
}
bool has(const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
}

// What a user adds to a run folder (a note, a folder of figures, and a note inside the first
// folder sinkscope wrote there, when it wrote one), as relative path -> bytes.
std::map<std::string, std::string> add_users_files(const fs::path& run) {
    std::map<std::string, std::string> files = {
        {"notes.md", "# my notes\nlayer 3 looks odd\n"},
        {"myfigs/fig1.png", std::string("\x89PNG\r\n\x1a\n\0\x01\x02", 11)}};
    const auto folders = recorded(run, "folders");
    if (!folders.empty()) files[folders.front() + "/mine.txt"] = "mine";
    for (const auto& [name, bytes] : files) testutil::write_text(run / name, bytes);
    return files;
}
void expect_users_files(const fs::path& run, const std::map<std::string, std::string>& files) {
    const auto now = snapshot_tree(run);
    for (const auto& [name, bytes] : files) {
        ASSERT_TRUE(now.count(name)) << name << " is gone";
        EXPECT_EQ(now.at(name), bytes) << name;
    }
}

// `args` writes the run folder `run`: run once, the user adds files, run again with --overwrite;
// the user's files are there byte for byte and not in the new run's record, which lists the
// run's own files; nothing is left beside `run`.
void overwrite_keeps_users_files(std::vector<std::string> args, const fs::path& run) {
    auto r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto files = add_users_files(run);
    const auto beside = [&] {
        std::vector<std::string> names;
        for (const auto& e : fs::directory_iterator(run.parent_path()))
            names.push_back(e.path().filename().string());
        std::sort(names.begin(), names.end());
        return names;
    };
    const auto beside_before = beside();
    args.push_back("--overwrite");
    r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_users_files(run, files);
    const auto own = recorded(run);
    EXPECT_TRUE(has(own, "run.json"));
    for (const auto& [name, bytes] : files) EXPECT_FALSE(has(own, name)) << name;
    for (const std::string& name : own) EXPECT_TRUE(fs::exists(run / name)) << name;
    EXPECT_EQ(beside(), beside_before);
}

// A small text file of `n` lines.
fs::path text_file(const fs::path& file, int n, int first = 0) {
    std::string s;
    for (int i = first; i < first + n; ++i)
        s +=
            "Once upon a time there was a little cat named Tom number " + std::to_string(i) + ".\n";
    testutil::write_text(file, s);
    return file;
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

// --overwrite replaces an earlier metrics run (files only the old run wrote are gone) and keeps
// what the user added; without it the earlier run is refused and kept.
TEST(OverwriteCli, MetricsOverwriteReplacesEarlierRun) {
    testutil::ScratchDir tmp;
    const fs::path run = tmp / "run";
    auto r = run_cli(example_args(run, {"--per-input"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto old_files = recorded(run);
    testutil::write_text(run / "notes.md", "mine");
    const auto before = snapshot_tree(run);
    r = run_cli(example_args(run));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--overwrite"), std::string::npos) << r.err;
    EXPECT_EQ(snapshot_tree(run), before);
    r = run_cli(example_args(run, {"--overwrite"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto new_files = recorded(run);
    size_t only_old = 0;
    for (const std::string& f : old_files)
        if (!has(new_files, f)) {
            ++only_old;
            EXPECT_FALSE(fs::exists(run / f)) << f;
        }
    EXPECT_GT(only_old, 0u) << "--per-input writes tables the second run does not";
    EXPECT_EQ(snapshot_tree(run).at("notes.md"), "mine");
    EXPECT_TRUE(fs::exists(run / "run.json"));
    EXPECT_TRUE(fs::exists(run / "heads.csv"));
    expect_only(tmp.path(), {"run"});
}

// The user's files inside an earlier run survive --overwrite of each command that writes a
// folder. Commands without a model first (they are in every build).
TEST(OverwriteCli, UsersFilesSurviveMetricsCompareReport) {
    testutil::ScratchDir tmp;
    ASSERT_NO_FATAL_FAILURE(overwrite_keeps_users_files(example_args(tmp / "m"), tmp / "m"));
    ASSERT_NO_FATAL_FAILURE(earlier_run(tmp / "m2"));
    ASSERT_NO_FATAL_FAILURE(
        overwrite_keeps_users_files({"compare", (tmp / "m").string(), (tmp / "m2").string(),
                                     "--out", (tmp / "c").string(), "--no-report"},
                                    tmp / "c"));
    // report --run: the report it adds is recorded (replaced by the run's next --overwrite).
    const fs::path run = tmp / "r";
    auto r = run_cli(example_args(run, {"--no-report"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto files = add_users_files(run);
    r = run_cli({"report", "--run", run.string()});
    if (r.err.find("no Vega runtime") != std::string::npos) {
        if (std::getenv("CI")) FAIL() << "Vega runtime missing in CI";
        GTEST_SKIP() << "this build has no Vega runtime (scripts/install-deps.sh): " << r.err;
    }
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(has(recorded(run), "report.html"));
    r = run_cli({"report", "--run", run.string(), "--overwrite"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_users_files(run, files);
    r = run_cli(example_args(run, {"--no-report", "--overwrite"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_users_files(run, files);
    EXPECT_FALSE(fs::exists(run / "report.html")) << "recorded by report --run: replaced";
}

// The same for the commands that run a model (the repo's default model, tiny inputs).
TEST(OverwriteCli, UsersFilesSurviveModelCommands) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    testutil::ScratchDir tmp;
    const fs::path text = text_file(tmp / "text.txt", 3);
    const fs::path held_out = text_file(tmp / "eval.txt", 3, 3);  // prune's --eval
    const std::vector<std::string> quiet = {"--progress", "never"};
    auto with = [&](std::vector<std::string> args, const std::vector<std::string>& more) {
        args.insert(args.end(), more.begin(), more.end());
        return args;
    };
    ASSERT_NO_FATAL_FAILURE(overwrite_keeps_users_files(
        with({"analyze", "--data", text.string(), "--samples", "2", "--threads", "1", "--no-report",
              "--out", (tmp / "a").string()},
             quiet),
        tmp / "a"));
    ASSERT_NO_FATAL_FAILURE(
        overwrite_keeps_users_files({"dump", "--data", text.string(), "--samples", "2", "--hooks",
                                     "blocks.0.attn.hook_pattern", "--out", (tmp / "d").string()},
                                    tmp / "d"));
    ASSERT_NO_FATAL_FAILURE(overwrite_keeps_users_files(
        with({"prune", "--calib", text.string(), "--eval", held_out.string(), "--calib-samples",
              "2", "--eval-samples", "2", "--out", (tmp / "p").string()},
             quiet),
        tmp / "p"));
    ASSERT_NO_FATAL_FAILURE(overwrite_keeps_users_files(
        with({"fisher", "--data", text.string(), "--samples", "2", "--out", (tmp / "f").string()},
             quiet),
        tmp / "f"));
    const fs::path corpus = testutil::write_training_corpus(tmp.path());
    ASSERT_NO_FATAL_FAILURE(overwrite_keeps_users_files(
        with({"train", "--preset", "tiny", "--text", corpus.string(), "--steps", "20",
              "--checkpoint-every", "10", "--threads", "1", "--out", (tmp / "t").string()},
             quiet),
        tmp / "t"));
    ASSERT_NO_FATAL_FAILURE(overwrite_keeps_users_files(
        with({"dynamics", "--checkpoints", (tmp / "t" / "manifest.json").string(), "--data",
              text.string(), "--samples", "2", "--threads", "1", "--no-report", "--out",
              (tmp / "y").string()},
             quiet),
        tmp / "y"));
}

// A file of the user's at a name the new run writes is refused in one line naming it (exit 2),
// and the earlier run and the user's files stay byte for byte, with the new results kept beside.
TEST(OverwriteCli, UsersFileAtARunsNameIsRefused) {
    testutil::ScratchDir tmp;
    const fs::path run = tmp / "run";
    auto r = run_cli(example_args(run, {"--no-report"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // heads.csv, which the second run writes, taken out of the first run's record: the user's.
    const fs::path mine = run / "heads.csv";
    testutil::write_text(mine, "my own table\n");
    std::string record = read_file(run / kRunFilesName);
    record.replace(record.find("\"heads.csv\""), 11, "\"other.csv\"");
    testutil::write_text(run / kRunFilesName, record);
    const auto before = snapshot_tree(run);
    r = run_cli(example_args(run, {"--no-report", "--overwrite"}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(mine.string()), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(snapshot_tree(run), before);
}

// A metrics run that fails half way (a NaN in its last input) while overwriting an earlier run
// exits non-zero and leaves the earlier run and the user's files in it byte for byte, with no
// staging folder behind.
TEST(OverwriteCli, MetricsFailureKeepsEarlierRun) {
    testutil::ScratchDir tmp;
    const fs::path run = tmp / "run";
    ASSERT_NO_FATAL_FAILURE(earlier_run(run));
    add_users_files(run);
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
    if (r.err.find("no Vega runtime") != std::string::npos) {
        if (std::getenv("CI")) FAIL() << "Vega runtime missing in CI";
        GTEST_SKIP() << "this build has no Vega runtime (scripts/install-deps.sh): " << r.err;
    }
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
