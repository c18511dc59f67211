// The run-time policy of the commands that run a model (core/allocator.hpp): started without
// OMP_WAIT_POLICY, OPENBLAS_THREAD_TIMEOUT and GLIBC_TUNABLES, `analyze` runs with the three set,
// whether started through the launcher (`sinkscope`, which adds them) or as sinkscope-main
// (which restarts itself with them); run.json's "environment" records what the process ran
// with; the same for `metrics`. Values the user set are kept as they are. Also run.json's
// weight file hashes, computed on a background thread (io::RunRecord::set_model_files), against
// the file's hash computed here.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/sha256.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;

namespace {

// `analyze` of two short inputs on `model` by `exe`, started by `env -u` of the three variables
// and then the assignments in `set`; returns run.json.
nlohmann::json analyze_with_env(const std::vector<std::string>& set, const fs::path& model,
                                const fs::path& dir, const fs::path& exe = testutil::cli_path()) {
    fs::create_directories(dir);
    testutil::write_text(dir / "ids.jsonl",
                         "{\"ids\": [1, 40, 41, 42, 43, 44, 45, 46]}\n"
                         "{\"ids\": [1, 50, 51, 52, 53, 54]}\n");
    std::vector<std::string> argv = {
        "env", "-u", "OMP_WAIT_POLICY", "-u", "OPENBLAS_THREAD_TIMEOUT", "-u", "GLIBC_TUNABLES"};
    argv.insert(argv.end(), set.begin(), set.end());
    argv.insert(argv.end(),
                {exe.string(), "analyze", "--model", model.string(), "--data",
                 (dir / "ids.jsonl").string(), "--no-report", "--out", (dir / "out").string()});
    const auto r = testutil::run_program(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(read_file(dir / "out/run.json"));
}

const nlohmann::json kPolicy = {{"OMP_WAIT_POLICY", "PASSIVE"},
                                {"OPENBLAS_THREAD_TIMEOUT", "4"},
                                {"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}};

fs::path stories(const fs::path& shared) {
    return shared / "models/stories260K/stories260K.gguf";
}

}  // namespace

TEST(RuntimePolicy, AddedWhereUnsetAndWeightsHashed) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const fs::path model = stories(shared);
    const nlohmann::json rec = analyze_with_env({}, model, tmp / "a");
    EXPECT_EQ(rec["environment"], kPolicy) << rec.dump(2);
    ASSERT_EQ(rec["model"]["weight_files"].size(), 1u) << rec["model"].dump(2);
    EXPECT_EQ(rec["model"]["weight_files"][0]["path"], model.string());
    EXPECT_EQ(rec["model"]["weight_files"][0]["sha256"], sha256_file(model));
    EXPECT_EQ(rec["model"]["path"], model.string());
    EXPECT_EQ(rec["model"]["architecture"], "llama");  // set after the hashing started

    // sinkscope-main started directly: its own restart.
    const fs::path main_exe = testutil::cli_path().parent_path() / "sinkscope-main";
    const nlohmann::json direct = analyze_with_env({}, model, tmp / "b", main_exe);
    EXPECT_EQ(direct["environment"], kPolicy) << direct.dump(2);

    // The metric suite gets it too.
    const auto r =
        testutil::run_program({"env", "-u", "OMP_WAIT_POLICY", "-u", "OPENBLAS_THREAD_TIMEOUT",
                               "-u", "GLIBC_TUNABLES", testutil::cli_path().string(), "metrics",
                               "--example", "--no-report", "--out", (tmp / "m").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto m = nlohmann::json::parse(read_file(tmp / "m/run.json"));
    EXPECT_EQ(m["environment"], kPolicy) << m.dump(2);
}

TEST(RuntimePolicy, UserValuesKept) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    // One of the three set: the other two are added, the user's one kept whole.
    const nlohmann::json one =
        analyze_with_env({"GLIBC_TUNABLES=glibc.malloc.arena_max=2"}, stories(shared), tmp / "one");
    nlohmann::json expected = kPolicy;
    expected["GLIBC_TUNABLES"] = "glibc.malloc.arena_max=2";
    EXPECT_EQ(one["environment"], expected) << one.dump(2);
    // All three set, one of them empty: nothing changed.
    const nlohmann::json all =
        analyze_with_env({"OMP_WAIT_POLICY=ACTIVE", "OPENBLAS_THREAD_TIMEOUT=7", "GLIBC_TUNABLES="},
                         stories(shared), tmp / "all");
    EXPECT_EQ(all["environment"], (nlohmann::json{{"OMP_WAIT_POLICY", "ACTIVE"},
                                                  {"OPENBLAS_THREAD_TIMEOUT", "7"},
                                                  {"GLIBC_TUNABLES", ""}}))
        << all.dump(2);
}

// The launcher on its own: beside a stand-in sinkscope-main and sinkscope-lite that print their
// arguments and environment, so sinkscope-main's own restart cannot hide what the launcher passes
// on. The subcommands that run no model go to sinkscope-lite, the others to sinkscope-main.
TEST(RuntimePolicy, LauncherPassesArgumentsAndPolicy) {
    testutil::ScratchDir tmp;
    fs::copy_file(testutil::cli_path(), tmp / "sinkscope");
    testutil::write_text(tmp / "sinkscope-main", "#!/bin/sh\necho \"args: $*\"\nenv\n");
    testutil::write_text(tmp / "sinkscope-lite", "#!/bin/sh\necho \"lite args: $*\"\nenv\n");
    ASSERT_EQ(::chmod((tmp / "sinkscope-main").c_str(), 0755), 0);
    ASSERT_EQ(::chmod((tmp / "sinkscope-lite").c_str(), 0755), 0);
    const std::vector<std::string> unset = {"env",
                                            "-u",
                                            "OMP_WAIT_POLICY",
                                            "-u",
                                            "OPENBLAS_THREAD_TIMEOUT",
                                            "-u",
                                            "GLIBC_TUNABLES",
                                            "OMP_WAIT_POLICY=MINE"};
    auto run = [&](const std::vector<std::string>& args) {
        std::vector<std::string> argv = unset;
        argv.push_back((tmp / "sinkscope").string());
        argv.insert(argv.end(), args.begin(), args.end());
        return testutil::run_program(argv);
    };
    const auto model = run({"analyze", "--out", "a b"});
    ASSERT_EQ(model.exit_code, 0) << model.err;
    EXPECT_NE(model.out.find("args: analyze --out a b\n"), std::string::npos) << model.out;
    EXPECT_NE(model.out.find("\nOMP_WAIT_POLICY=MINE\n"), std::string::npos) << model.out;
    EXPECT_NE(model.out.find("\nOPENBLAS_THREAD_TIMEOUT=4\n"), std::string::npos) << model.out;
    EXPECT_NE(model.out.find("\nGLIBC_TUNABLES=glibc.malloc.hugetlb=1\n"), std::string::npos)
        << model.out;
    const auto other = run({"inspect", "x"});  // no policy for a command that runs no model
    ASSERT_EQ(other.exit_code, 0) << other.err;
    EXPECT_NE(other.out.find("args: inspect x\n"), std::string::npos) << other.out;
    EXPECT_EQ(other.out.find("OPENBLAS_THREAD_TIMEOUT"), std::string::npos) << other.out;
    EXPECT_EQ(other.out.find("GLIBC_TUNABLES"), std::string::npos) << other.out;
    // metrics: sinkscope-lite, with the policy; report: sinkscope-lite, without.
    const auto metrics = run({"metrics", "--attention", "a.npy"});
    ASSERT_EQ(metrics.exit_code, 0) << metrics.err;
    EXPECT_EQ(metrics.out.rfind("lite args: metrics --attention a.npy\n", 0), 0) << metrics.out;
    EXPECT_NE(metrics.out.find("\nGLIBC_TUNABLES=glibc.malloc.hugetlb=1\n"), std::string::npos)
        << metrics.out;
    const auto report = run({"report", "dir"});
    ASSERT_EQ(report.exit_code, 0) << report.err;
    EXPECT_EQ(report.out.rfind("lite args: report dir\n", 0), 0) << report.out;
    EXPECT_EQ(report.out.find("GLIBC_TUNABLES"), std::string::npos) << report.out;
    // A build without sinkscope-lite (no model runtime): everything goes to sinkscope-main.
    fs::remove(tmp / "sinkscope-lite");
    const auto fallback = run({"metrics", "x"});
    ASSERT_EQ(fallback.exit_code, 0) << fallback.err;
    EXPECT_EQ(fallback.out.rfind("args: metrics x\n", 0), 0) << fallback.out;
    // Without sinkscope-main beside it: one line naming the missing file, exit 127.
    fs::remove(tmp / "sinkscope-main");
    const auto missing = run({"analyze"});
    EXPECT_EQ(missing.exit_code, 127);
    EXPECT_EQ(missing.err, "sinkscope: cannot start " + (tmp / "sinkscope-main").string() +
                               ": No such file or directory\n");
}

// sinkscope-lite, as built, loads no library of libtorch (glibc's loader lists what a program
// loads when LD_TRACE_LOADED_OBJECTS is set, and exits), and runs the metric suite.
TEST(RuntimePolicy, LiteLoadsNoLibtorch) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    const fs::path lite = testutil::cli_path().parent_path() / "sinkscope-lite";
    ASSERT_TRUE(fs::exists(lite)) << lite;
    const auto trace = testutil::run_program({"env", "LD_TRACE_LOADED_OBJECTS=1", lite.string()});
    ASSERT_EQ(trace.exit_code, 0) << trace.err;
    EXPECT_NE(trace.out.find("libc.so"), std::string::npos) << trace.out;
    EXPECT_NE(trace.out.find("libblas.so"), std::string::npos) << trace.out;
    EXPECT_EQ(trace.out.find("libtorch"), std::string::npos) << trace.out;
    EXPECT_EQ(trace.out.find("libc10"), std::string::npos) << trace.out;
    testutil::ScratchDir tmp;
    const auto run = testutil::run_program(
        {lite.string(), "metrics", "--example", "--no-report", "--out", (tmp / "out").string()});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_TRUE(fs::exists(tmp / "out" / "distances.csv"));
}
