// run.json's record of the process (io::RunRecord): the weight files hashed on a background
// thread (their digests against FIPS 180-4 test vectors, a missing file an error at write time
// with nothing written, the hashing's cancellation) and the environment variables that change
// speed and memory.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/core/sha256.hpp"
#include "sinkscope/io/run_record.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;

TEST(RunRecord, WeightFilesHashedInTheBackground) {
    testutil::ScratchDir tmp;
    testutil::write_text(tmp / "a.bin", "abc");
    testutil::write_text(tmp / "b.bin", "");
    io::RunRecord rec("test", 1);
    rec.set_model_files("the/model", {tmp / "a.bin", tmp / "b.bin"});
    // A caller that replaces "model" after the hashing started keeps its own fields.
    rec.json()["model"] = {{"name", "m"}};
    rec.write(tmp.path());
    const auto j = nlohmann::json::parse(read_file(tmp / "run.json"));
    EXPECT_EQ(j["model"]["name"], "m");
    EXPECT_EQ(j["model"]["path"], "the/model");
    ASSERT_EQ(j["model"]["weight_files"].size(), 2u) << j.dump(2);
    EXPECT_EQ(j["model"]["weight_files"][0]["path"], (tmp / "a.bin").string());
    EXPECT_EQ(j["model"]["weight_files"][0]["sha256"],
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(j["model"]["weight_files"][1]["sha256"],
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

// write() right after set_model_files: the command's thread takes over from the background one
// (which may be stopped in the middle of a file) and every digest is that of the whole file.
TEST(RunRecord, WriteFinishesTheHashingItself) {
    testutil::ScratchDir tmp;
    std::vector<fs::path> files;
    for (int i = 0; i < 4; ++i) {
        files.push_back(tmp / ("w" + std::to_string(i) + ".bin"));
        testutil::write_text(files.back(), std::string(size_t(6 + i) << 20, char('a' + i)));
    }
    io::RunRecord rec("test", 1);
    rec.set_model_files("m", files);
    rec.write(tmp.path());
    const auto j = nlohmann::json::parse(read_file(tmp / "run.json"));
    ASSERT_EQ(j["model"]["weight_files"].size(), files.size()) << j.dump(2);
    for (size_t i = 0; i < files.size(); ++i) {
        EXPECT_EQ(j["model"]["weight_files"][i]["path"], files[i].string());
        EXPECT_EQ(j["model"]["weight_files"][i]["sha256"], sha256_file(files[i])) << i;
    }
}

TEST(RunRecord, UnreadableWeightFileFailsTheWrite) {
    testutil::ScratchDir tmp;
    io::RunRecord rec("test", 1);
    rec.set_model_files("m", {tmp / "missing.bin"});
    try {
        rec.write(tmp.path());
        FAIL() << "write succeeded without the weight file";
    } catch (const IoError& e) {
        EXPECT_NE(std::string(e.what()).find("missing.bin"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(tmp / "run.json"));
}

TEST(RunRecord, HashingStopsWhenCancelled) {
    testutil::ScratchDir tmp;
    testutil::write_text(tmp / "a.bin", std::string(3 << 20, 'x'));
    std::atomic<bool> cancel{true};
    EXPECT_EQ(sha256_file(tmp / "a.bin", &cancel), "");
    cancel = false;
    EXPECT_EQ(sha256_file(tmp / "a.bin", &cancel), sha256_file(tmp / "a.bin"));
    EXPECT_EQ(sha256_file(tmp / "a.bin").size(), 64u);
}

TEST(RunRecord, EnvironmentRecorded) {
    ::setenv("OMP_WAIT_POLICY", "SOMETHING", 1);
    ::unsetenv("GLIBC_TUNABLES");
    const io::RunRecord rec("test", 1);
    EXPECT_EQ(rec.json()["environment"]["OMP_WAIT_POLICY"], "SOMETHING");
    EXPECT_TRUE(rec.json()["environment"]["GLIBC_TUNABLES"].is_null());
    EXPECT_TRUE(rec.json()["environment"].contains("OPENBLAS_THREAD_TIMEOUT"));
    ::unsetenv("OMP_WAIT_POLICY");
}

// "threads" is the count the command says it computes with, not the machine's core count.
TEST(RunRecord, ThreadsAreTheCommands) {
    const int other = std::thread::hardware_concurrency() == 3 ? 5 : 3;
    const io::RunRecord rec("test", other);
    EXPECT_EQ(rec.json()["threads"], other);
}
