// Output paths never touch the user's files: an existing non-empty folder is refused unless
// --overwrite, --overwrite replaces only sinkscope's own runs, a failure before or during the
// swap leaves the earlier run intact, and nothing is left behind by a failed run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <stdexcept>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;

namespace {

using testutil::snapshot_tree;
void write(const fs::path& p, const std::string& s) {
    testutil::write_text(p, s);
}

// A finished earlier run as sinkscope writes it (run.json with tool.name = sinkscope).
void make_earlier_run(const fs::path& dir) {
    write(dir / "run.json", R"({"tool": {"name": "sinkscope", "version": "0.1.0"}, "x": [1]})");
    write(dir / "heads.csv", "old\n");
}

std::string usage_error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

// A committed OutputDir appears at the final path; an abandoned one leaves nothing behind,
// not even the parent folders it had to create.
TEST(OutputDir, CommitOrNothing) {
    testutil::ScratchDir tmp;
    {
        OutputDir out(tmp / "a" / "b" / "res", false);
        write(out.file("x.txt"), "x");
    }
    EXPECT_TRUE(fs::is_empty(tmp.path()));
    {
        OutputDir out(tmp / "a" / "b" / "res", false);
        write(out.file("x.txt"), "x");
        out.commit();
    }
    EXPECT_TRUE(fs::exists(tmp / "a" / "b" / "res" / "x.txt"));
    EXPECT_EQ(std::distance(fs::directory_iterator(tmp / "a" / "b"), fs::directory_iterator()), 1);
}

// A non-empty folder that sinkscope did not write survives byte for byte, with and without
// --overwrite, and the error names it and says how to proceed.
TEST(OutputDir, ForeignFolderSurvives) {
    testutil::ScratchDir tmp;
    const fs::path victim = tmp / "victim";
    write(victim / "paper.tex", "\\documentclass{article}\n");
    write(victim / "sub" / "data.txt", "1 2 3\n");
    const auto before = snapshot_tree(victim);
    for (bool overwrite : {false, true}) {
        const std::string msg = usage_error_of([&] { OutputDir out(victim, overwrite); });
        EXPECT_NE(msg.find(victim.string()), std::string::npos) << msg;
        EXPECT_NE(msg.find(overwrite ? "not a sinkscope run" : "--overwrite"), std::string::npos)
            << msg;
        EXPECT_EQ(usage_error_of([&] { OutputDir::resumable(victim, overwrite); }), msg);
        EXPECT_EQ(usage_error_of([&] { check_output_dir(victim, overwrite); }), msg);
    }
    EXPECT_EQ(snapshot_tree(victim), before);
    EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1);
    // A run.json that is not sinkscope's does not make a folder ours.
    write(victim / "run.json", R"({"tool": {"name": "other"}, "name": "sinkscope"})");
    EXPECT_FALSE(is_sinkscope_run(victim));
    EXPECT_NE(usage_error_of([&] { OutputDir out(victim, true); }), "");
}

// An existing regular file is never replaced by a directory, even with --overwrite; an empty
// folder is fine without it.
TEST(OutputDir, FileRefusedEmptyFolderAccepted) {
    testutil::ScratchDir tmp;
    write(tmp / "input.npy", "data");
    for (bool overwrite : {false, true})
        EXPECT_NE(usage_error_of([&] {
                      OutputDir out(tmp / "input.npy", overwrite);
                  }).find("not a directory"),
                  std::string::npos);
    EXPECT_EQ(snapshot_tree(tmp.path()).at("input.npy"), "data");
    fs::create_directory(tmp / "empty");
    OutputDir out(tmp / "empty", false);
    write(out.file("r.txt"), "r");
    out.commit();
    EXPECT_TRUE(fs::exists(tmp / "empty" / "r.txt"));
}

// --overwrite replaces an earlier sinkscope run completely (its old files are gone).
TEST(OutputDir, OverwriteReplacesEarlierRun) {
    testutil::ScratchDir tmp;
    const fs::path run = tmp / "run";
    make_earlier_run(run);
    EXPECT_TRUE(is_sinkscope_run(run));
    EXPECT_NE(usage_error_of([&] { OutputDir out(run, false); }), "");
    {
        OutputDir out(run, true);
        write(out.file("run.json"), R"({"tool": {"name": "sinkscope"}})");
        write(out.file("new.csv"), "new\n");
        out.commit();
    }
    const auto after = snapshot_tree(run);
    EXPECT_EQ(after.count("heads.csv"), 0u);
    EXPECT_EQ(after.at("new.csv"), "new\n");
    EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1);
}

// A failure while the new run is being written (an exception before commit) leaves the earlier
// run byte for byte, and removes the staging folder.
TEST(OutputDir, FailureDuringOverwriteKeepsEarlierRun) {
    testutil::ScratchDir tmp;
    const fs::path run = tmp / "run";
    make_earlier_run(run);
    const auto before = snapshot_tree(run);
    EXPECT_THROW(
        {
            OutputDir out(run, true);
            write(out.file("run.json"), "{}");
            throw std::runtime_error("injected failure");
        },
        std::runtime_error);
    EXPECT_EQ(snapshot_tree(run), before);
    EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1);
}

// Something put at the final path while the run was working is not replaced at commit: the
// error says so and the new results stay under their temporary name.
TEST(OutputDir, CommitRechecksTheFinalPath) {
    testutil::ScratchDir tmp;
    const fs::path run = tmp / "run";
    OutputDir out(run, false);
    write(out.file("r.txt"), "r");
    write(run / "notes.txt", "mine");
    const std::string msg = usage_error_of([&] { out.commit(); });
    EXPECT_NE(msg.find(out.staging().string()), std::string::npos) << msg;
    EXPECT_EQ(snapshot_tree(run).at("notes.txt"), "mine");
    EXPECT_TRUE(fs::exists(out.staging() / "r.txt"));
}

// A folder that happens to carry the staging name is not taken over or removed.
TEST(OutputDir, StagingNeverReusesAnExistingFolder) {
    testutil::ScratchDir tmp;
    const fs::path res = tmp / "res";
    const fs::path taken = tmp / ("res.partial-" + std::to_string(::getpid()));
    write(taken / "keep.txt", "keep");
    {
        OutputDir out(res, false);
        EXPECT_NE(out.staging(), taken);
    }
    EXPECT_EQ(snapshot_tree(taken).at("keep.txt"), "keep");
    // A resumable staging folder ("res.partial") that sinkscope did not make is refused.
    write(tmp / "res.partial" / "mine.txt", "mine");
    EXPECT_NE(usage_error_of([&] { OutputDir::resumable(res, false); }).find("res.partial"),
              std::string::npos);
    EXPECT_EQ(snapshot_tree(tmp / "res.partial").at("mine.txt"), "mine");
    // So is an empty one: it is left as it was, even when the run fails.
    fs::create_directory(tmp / "empty.partial");
    EXPECT_NE(usage_error_of([&] { OutputDir::resumable(tmp / "empty", false); }), "");
    EXPECT_TRUE(fs::is_directory(tmp / "empty.partial"));
}

// A resumable staging folder made by sinkscope is kept on failure when asked and reused.
TEST(OutputDir, ResumableStagingIsReused) {
    testutil::ScratchDir tmp;
    const fs::path res = tmp / "res";
    {
        OutputDir out = OutputDir::resumable(res, false);
        write(out.file("state.bin"), "s");
        out.keep_on_failure();
    }
    {
        OutputDir out = OutputDir::resumable(res, false);
        EXPECT_EQ(snapshot_tree(out.staging()).at("state.bin"), "s");
        fs::remove(out.file("state.bin"));
        write(out.file("r.txt"), "r");
        out.commit();
    }
    const auto files = snapshot_tree(res);
    EXPECT_EQ(files.size(), 1u) << "the staging marker must not reach the final folder";
    EXPECT_EQ(files.at("r.txt"), "r");
}

// Single output files: an existing file is replaced only with overwrite and only when ours.
TEST(OutputFile, ReplacesOnlyOwnFiles) {
    testutil::ScratchDir tmp;
    const fs::path f = tmp / "report.html";
    auto ours = [](const fs::path& p) { return read_file(p).rfind("ours", 0) == 0; };
    write_output_file(f, "ours 1", false, ours);
    EXPECT_EQ(read_file(f), "ours 1");
    EXPECT_NE(
        usage_error_of([&] { write_output_file(f, "ours 2", false, ours); }).find("--overwrite"),
        std::string::npos);
    write_output_file(f, "ours 2", true, ours);
    EXPECT_EQ(read_file(f), "ours 2");
    write(f, "the user's own page");
    EXPECT_NE(usage_error_of([&] { write_output_file(f, "ours 3", true, ours); }), "");
    EXPECT_EQ(read_file(f), "the user's own page");
    EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1);
}

// The run.json probe stops at a bounded depth: a hostile, deeply nested file is simply "not ours".
TEST(OutputDir, DeeplyNestedRunJsonIsNotOurs) {
    testutil::ScratchDir tmp;
    write(tmp / "run" / "run.json", std::string(200000, '[') + std::string(200000, ']'));
    EXPECT_FALSE(is_sinkscope_run(tmp / "run"));
    write(tmp / "run" / "run.json",
          "{\"tool\": {\"name\": \"sinkscope\"");  // truncated: found first
    EXPECT_TRUE(is_sinkscope_run(tmp / "run"));
}
