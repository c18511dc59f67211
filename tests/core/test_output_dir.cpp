// Output paths never touch the user's files: an existing non-empty folder is refused unless
// --overwrite, --overwrite replaces only sinkscope's own runs, a failure before or during the
// swap leaves the earlier run intact, and nothing is left behind by a failed run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

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

// A run as sinkscope commits it: run.json and `files` (relative path -> bytes), recorded.
void commit_run(const fs::path& dir, const std::map<std::string, std::string>& files,
                bool overwrite = false) {
    OutputDir out(dir, overwrite);
    write(out.file("run.json"), R"({"tool": {"name": "sinkscope", "version": "0.1.0"}})");
    for (const auto& [name, bytes] : files) write(out.file(name), bytes);
    out.commit();
}

// The files a run recorded as its own, sorted.
std::vector<std::string> recorded_files(const fs::path& dir) {
    const nlohmann::json j = nlohmann::json::parse(read_file(dir / kRunFilesName));
    auto v = j.at("files").get<std::vector<std::string>>();
    std::sort(v.begin(), v.end());
    return v;
}

// What a user adds to a run folder: a note, a folder of figures, a note inside one of
// sinkscope's folders and a link.
void add_users_entries(const fs::path& run) {
    write(run / "notes.md", "my notes\n");
    write(run / "myfigs" / "fig1.png", std::string("\x89PNG\r\n\x1a\n\0\x01", 10));
    write(run / "sub" / "mine.txt", "mine");
    fs::create_symlink("notes.md", run / "link");
}
std::map<std::string, std::string> users_entries_of(const std::map<std::string, std::string>& t) {
    std::map<std::string, std::string> out;
    for (const char* name : {"notes.md", "myfigs/fig1.png", "sub/mine.txt"})
        if (t.count(name)) out[name] = t.at(name);
    return out;
}
std::map<std::string, std::string> users_entries(const fs::path& run) {
    return users_entries_of(snapshot_tree(run));
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

// --overwrite replaces the files an earlier run recorded as its own (run_files.json): those of
// the old run are gone, the new run's are there and recorded, itself included.
TEST(OutputDir, OverwriteReplacesEarlierRun) {
    testutil::ScratchDir tmp;
    const fs::path run = tmp / "run";
    ASSERT_NO_FATAL_FAILURE(commit_run(run, {{"heads.csv", "old\n"}, {"sub/x.npy", "x"}}));
    EXPECT_TRUE(is_sinkscope_run(run));
    EXPECT_NE(usage_error_of([&] { OutputDir out(run, false); }), "");
    ASSERT_NO_FATAL_FAILURE(commit_run(run, {{"new.csv", "new\n"}}, true));
    const auto after = snapshot_tree(run);
    EXPECT_EQ(after.count("heads.csv"), 0u);
    EXPECT_EQ(after.count("sub/x.npy"), 0u);
    EXPECT_FALSE(fs::exists(run / "sub"));
    EXPECT_EQ(after.at("new.csv"), "new\n");
    EXPECT_EQ(recorded_files(run),
              (std::vector<std::string>{"new.csv", "run.json", kRunFilesName}));
    EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1);
}

// --overwrite keeps, byte for byte, every entry of the earlier run that the run did not record:
// a file, a folder, a file inside one of sinkscope's folders and a link; only the recorded files
// are replaced or removed, and the new record lists only the new run's files.
TEST(OutputDir, OverwriteKeepsTheUsersEntries) {
    testutil::ScratchDir tmp;
    const fs::path run = tmp / "run";
    ASSERT_NO_FATAL_FAILURE(
        commit_run(run, {{"heads.csv", "old\n"}, {"sub/x.npy", "x"}, {"gone/y.npy", "y"}}));
    write(run / "report.html", "old report");
    record_run_file(run, "report.html");  // as `report --run` does
    add_users_entries(run);
    const auto before = users_entries(run);
    ASSERT_EQ(before.size(), 3u);
    ASSERT_NO_FATAL_FAILURE(commit_run(run, {{"heads.csv", "new\n"}, {"sub/z.npy", "z"}}, true));
    EXPECT_EQ(users_entries(run), before);
    EXPECT_EQ(fs::read_symlink(run / "link"), fs::path("notes.md"));
    const auto after = snapshot_tree(run);
    EXPECT_EQ(after.at("heads.csv"), "new\n");
    EXPECT_EQ(after.at("sub/z.npy"), "z");
    for (const char* gone : {"sub/x.npy", "gone/y.npy", "report.html"})
        EXPECT_EQ(after.count(gone), 0u) << gone;
    EXPECT_FALSE(fs::exists(run / "gone"));
    EXPECT_EQ(recorded_files(run),
              (std::vector<std::string>{"heads.csv", "run.json", kRunFilesName, "sub/z.npy"}));
    EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1);
    // A second overwrite keeps them again (they are still not sinkscope's).
    ASSERT_NO_FATAL_FAILURE(commit_run(run, {{"heads.csv", "newer\n"}}, true));
    EXPECT_EQ(users_entries(run), before);
    EXPECT_FALSE(fs::exists(run / "sub" / "z.npy"));
}

// A run written before sinkscope kept run_files.json (or with a record that is not one of ours):
// only the paths the new run writes are replaced; everything else there is kept.
TEST(OutputDir, RunWithoutRecordKeepsWhatTheNewRunDoesNotWrite) {
    const std::vector<std::string> records = {
        "", R"({"sinkscope_run_files": 1, "files": ["../outside"], "folders": []})",
        std::string(100, '[') + std::string(100, ']')};
    for (const std::string& record : records) {
        testutil::ScratchDir tmp;
        const fs::path run = tmp / "run";
        write(tmp / "outside", "outside");
        make_earlier_run(run);
        write(run / "notes.md", "mine");
        if (!record.empty()) write(run / kRunFilesName, record);
        ASSERT_NO_FATAL_FAILURE(commit_run(run, {{"new.csv", "new\n"}}, true));
        const auto after = snapshot_tree(tmp.path());
        EXPECT_EQ(after.at("run/heads.csv"), "old\n");  // not written by the new run: kept
        EXPECT_EQ(after.at("run/notes.md"), "mine");
        EXPECT_EQ(after.at("run/new.csv"), "new\n");
        EXPECT_NE(after.at("run/run.json").find("sinkscope"), std::string::npos);
        EXPECT_EQ(after.at("outside"), "outside");
        EXPECT_EQ(recorded_files(run),
                  (std::vector<std::string>{"new.csv", "run.json", kRunFilesName}));
        EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 2);
    }
}

// An entry of the user's at a path the new run writes is refused in one line naming it, before
// anything moves: the earlier run and the user's entries stay byte for byte, the new results are
// kept under their temporary name.
TEST(OutputDir, UsersEntryAtANewRunPathIsRefused) {
    testutil::ScratchDir tmp;
    const fs::path run = tmp / "run";
    ASSERT_NO_FATAL_FAILURE(commit_run(run, {{"heads.csv", "old\n"}}));
    add_users_entries(run);
    write(run / "new.csv" / "mine.txt", "mine");
    const auto before = snapshot_tree(run);
    OutputDir out(run, true);
    write(out.file("run.json"), R"({"tool": {"name": "sinkscope"}})");
    write(out.file("new.csv"), "new\n");
    const std::string msg = usage_error_of([&] { out.commit(); });
    EXPECT_NE(msg.find((run / "new.csv").string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(out.staging().string()), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_EQ(snapshot_tree(run), before);
    EXPECT_EQ(snapshot_tree(out.staging()).at("new.csv"), "new\n");
    fs::remove_all(out.staging());
    // The same when the new run writes a file named like the user's folder "sub"; a resumable
    // staging folder stays reusable.
    {
        OutputDir res = OutputDir::resumable(run, true);
        write(res.file("run.json"), R"({"tool": {"name": "sinkscope"}})");
        write(res.file("sub"), "a file now");
        const std::string m = usage_error_of([&] { res.commit(); });
        EXPECT_NE(m.find((run / "sub").string() + " was not"), std::string::npos) << m;
    }
    EXPECT_EQ(snapshot_tree(run), before);
    {
        OutputDir res = OutputDir::resumable(run, true);
        EXPECT_EQ(snapshot_tree(res.staging()).at("sub"), "a file now");
    }
    EXPECT_FALSE(fs::exists(tmp / "run.partial"));
}

// A failure injected at each step of an overwrite (before the first or a later move of the
// user's entries, before the swap) leaves the earlier run and every entry of the user's byte for
// byte where they were; no entry of the user's is left in the kept results.
TEST(OutputDir, InjectedFailureMidOverwriteKeepsEverything) {
    struct Reset {
        ~Reset() { set_commit_fault_hook_for_testing(nullptr); }
    } reset;
    const std::vector<std::pair<std::string, int>> faults = {
        {"move", 1}, {"move", 2}, {"move", 3}, {"move", 4}, {"swap", 1}};
    for (const bool resumable : {false, true})
        for (const auto& [step, nth] : faults) {
            SCOPED_TRACE(step + " " + std::to_string(nth) + (resumable ? " resumable" : ""));
            testutil::ScratchDir tmp;
            const fs::path run = tmp / "run";
            ASSERT_NO_FATAL_FAILURE(commit_run(run, {{"heads.csv", "old\n"}, {"sub/x.npy", "x"}}));
            add_users_entries(run);
            const auto before = snapshot_tree(run);
            int seen = 0;
            set_commit_fault_hook_for_testing(
                [&seen, step = step, nth = nth](const std::string& s) {
                    if (s == step && ++seen == nth) throw std::runtime_error("injected failure");
                });
            fs::path staging;
            {
                OutputDir out = resumable ? OutputDir::resumable(run, true) : OutputDir(run, true);
                staging = out.staging();
                write(out.file("run.json"), R"({"tool": {"name": "sinkscope"}})");
                write(out.file("heads.csv"), "new\n");
                try {
                    out.commit();
                    ADD_FAILURE() << "the injected failure did not stop the commit";
                } catch (const IoError& e) {
                    EXPECT_NE(std::string(e.what()).find("injected failure"), std::string::npos);
                    EXPECT_NE(std::string(e.what()).find(staging.string()), std::string::npos);
                }
            }
            set_commit_fault_hook_for_testing(nullptr);
            EXPECT_EQ(snapshot_tree(run), before);
            EXPECT_EQ(fs::read_symlink(run / "link"), fs::path("notes.md"));
            auto kept = snapshot_tree(staging);
            kept.erase(".sinkscope-staging");  // a resumable folder's marker
            EXPECT_EQ(kept.at("heads.csv"), "new\n");
            EXPECT_EQ(kept.size(), 3u) << "run.json, heads.csv and run_files.json only";
            EXPECT_FALSE(fs::exists(fs::symlink_status(staging / "link")));
            EXPECT_FALSE(fs::exists(staging / "sub")) << "a folder made for the user's entries";
            if (resumable) {  // the kept folder is reused by the next run, which succeeds
                OutputDir again = OutputDir::resumable(run, true);
                EXPECT_EQ(again.staging(), staging);
                again.commit();
            } else {
                fs::remove_all(staging);
                ASSERT_NO_FATAL_FAILURE(commit_run(run, {{"heads.csv", "new\n"}}, true));
            }
            EXPECT_EQ(users_entries(run), users_entries_of(before));
            EXPECT_EQ(snapshot_tree(run).at("heads.csv"), "new\n");
            EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()),
                      1);
        }
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
    EXPECT_EQ(files.size(), 2u) << "the staging marker must not reach the final folder";
    EXPECT_EQ(files.at("r.txt"), "r");
    EXPECT_EQ(recorded_files(res), (std::vector<std::string>{"r.txt", kRunFilesName}));
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
