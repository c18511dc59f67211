// The run-time policy of the commands that run a model (core/allocator.hpp): started without
// OMP_WAIT_POLICY, OPENBLAS_THREAD_TIMEOUT and GLIBC_TUNABLES, `analyze` restarts itself with
// the three set (run.json's "environment" records what the process ran with); values the user
// set are kept as they are. Also run.json's weight file hashes, computed on a background thread
// (io::RunRecord::set_model_files), against the file's hash computed here.
#include <gtest/gtest.h>

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

// `analyze` of two short inputs on `model`, started by `env -u` of the three variables and then
// the assignments in `set`; returns run.json.
nlohmann::json analyze_with_env(const std::vector<std::string>& set, const fs::path& model,
                                const fs::path& dir) {
    fs::create_directories(dir);
    testutil::write_text(dir / "ids.jsonl",
                         "{\"ids\": [1, 40, 41, 42, 43, 44, 45, 46]}\n"
                         "{\"ids\": [1, 50, 51, 52, 53, 54]}\n");
    std::vector<std::string> launcher = {
        "env", "-u", "OMP_WAIT_POLICY", "-u", "OPENBLAS_THREAD_TIMEOUT", "-u", "GLIBC_TUNABLES"};
    launcher.insert(launcher.end(), set.begin(), set.end());
    const auto r = testutil::run_cli(
        {"analyze", "--model", model.string(), "--data", (dir / "ids.jsonl").string(),
         "--no-report", "--out", (dir / "out").string()},
        launcher);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(read_file(dir / "out/run.json"));
}

fs::path stories(const fs::path& shared) {
    return shared / "models/stories260K/stories260K.gguf";
}

}  // namespace

TEST(RuntimePolicy, AddedWhereUnsetAndWeightsHashed) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const fs::path model = stories(shared);
    const nlohmann::json rec = analyze_with_env({}, model, tmp / "a");
    EXPECT_EQ(rec["environment"], (nlohmann::json{{"OMP_WAIT_POLICY", "PASSIVE"},
                                                  {"OPENBLAS_THREAD_TIMEOUT", "4"},
                                                  {"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}}))
        << rec.dump(2);
    ASSERT_EQ(rec["model"]["weight_files"].size(), 1u) << rec["model"].dump(2);
    EXPECT_EQ(rec["model"]["weight_files"][0]["path"], model.string());
    EXPECT_EQ(rec["model"]["weight_files"][0]["sha256"], sha256_file(model));
    EXPECT_EQ(rec["model"]["path"], model.string());
    EXPECT_EQ(rec["model"]["architecture"], "llama");  // set after the hashing started
}

TEST(RuntimePolicy, UserValuesKept) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    // One of the three set: the other two are added, the user's one kept whole.
    const nlohmann::json one =
        analyze_with_env({"GLIBC_TUNABLES=glibc.malloc.arena_max=2"}, stories(shared), tmp / "one");
    EXPECT_EQ(one["environment"], (nlohmann::json{{"OMP_WAIT_POLICY", "PASSIVE"},
                                                  {"OPENBLAS_THREAD_TIMEOUT", "4"},
                                                  {"GLIBC_TUNABLES", "glibc.malloc.arena_max=2"}}))
        << one.dump(2);
    // All three set, one of them empty: nothing changed.
    const nlohmann::json all =
        analyze_with_env({"OMP_WAIT_POLICY=ACTIVE", "OPENBLAS_THREAD_TIMEOUT=7", "GLIBC_TUNABLES="},
                         stories(shared), tmp / "all");
    EXPECT_EQ(all["environment"], (nlohmann::json{{"OMP_WAIT_POLICY", "ACTIVE"},
                                                  {"OPENBLAS_THREAD_TIMEOUT", "7"},
                                                  {"GLIBC_TUNABLES", ""}}))
        << all.dump(2);
}
