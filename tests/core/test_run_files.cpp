// A run's files in memory behave as the same files on disk: what is written is read back, a
// subfolder's files sit under its path, and the same writes give the same tree byte for byte;
// in memory nothing is created on disk.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/run_files.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;

namespace {

// The same writes into any RunFiles: a file, a file in pieces, a subfolder's file, a rewrite.
void write_some(const RunFiles& f) {
    f.write("run.json", "{}\n");
    std::vector<std::string> pieces = {"a,b\n", "1,2\n", "3,4\n"};
    size_t next = 0;
    f.write("heads.csv", [&](std::string& buffer) {
        if (next == pieces.size()) return false;
        buffer = pieces[next++];
        return true;
    });
    f.sub("checkpoints/000_a").write("sinks.csv", "input\n0\n");
    f.write("run.json", "{\"again\": 1}\n");
}

}  // namespace

// In memory: every file by its path from the root, whatever subfolder wrote it.
TEST(RunFiles, InMemoryHoldsWhatWasWritten) {
    const RunFiles f = RunFiles::in_memory();
    write_some(f);
    EXPECT_TRUE(f.is_memory());
    const std::map<std::string, std::string> want = {{"checkpoints/000_a/sinks.csv", "input\n0\n"},
                                                     {"heads.csv", "a,b\n1,2\n3,4\n"},
                                                     {"run.json", "{\"again\": 1}\n"}};
    EXPECT_EQ(f.files(), want);
    const RunFiles sub = f.sub("checkpoints/000_a");
    EXPECT_TRUE(sub.exists("sinks.csv"));
    EXPECT_FALSE(sub.exists("run.json"));
    EXPECT_EQ(sub.read("sinks.csv"), "input\n0\n");
    EXPECT_EQ(&sub.files(), &f.files());  // one folder, shared
    EXPECT_EQ(sub.shown("x.csv"), "<memory>/checkpoints/000_a/x.csv");
    try {
        sub.read("missing.npy");
        FAIL() << "read a missing file";
    } catch (const IoError& e) {
        EXPECT_NE(std::string(e.what()).find("<memory>/checkpoints/000_a/missing.npy"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_THROW(f.dir(), InternalError);  // no path to hand to code that writes files
}

// The same writes on disk give the same tree, byte for byte.
TEST(RunFiles, OnDiskWritesTheSameTree) {
    testutil::ScratchDir tmp;
    const RunFiles disk(tmp / "run");
    write_some(disk);
    const RunFiles memory = RunFiles::in_memory();
    write_some(memory);
    EXPECT_EQ(testutil::snapshot_tree(tmp / "run"), memory.files());
    EXPECT_TRUE(disk.exists("heads.csv"));
    EXPECT_EQ(disk.sub("checkpoints").sub("000_a").read("sinks.csv"), "input\n0\n");
    EXPECT_EQ(disk.shown("heads.csv"), (tmp / "run" / "heads.csv").string());
    EXPECT_THROW(disk.files(), InternalError);
    EXPECT_THROW(disk.read("missing.csv"), IoError);
}
