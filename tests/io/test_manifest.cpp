// Checkpoint manifests (io/manifest.hpp): the JSON `sinkscope train` writes, a user's CSV, and
// every malformed series refused with one line naming the manifest before any model is read.
#include <gtest/gtest.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/manifest.hpp"
#include "testing.hpp"

using namespace sinkscope;
namespace fs = std::filesystem;
using testutil::write_text;

namespace {

// The InputError of reading `file`, or "" when it reads.
std::string manifest_error(const fs::path& file) {
    try {
        io::read_manifest(file);
    } catch (const InputError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(Manifest, TrainJsonSortedByStepWithRelativePaths) {
    testutil::ScratchDir tmp;
    fs::create_directories(tmp / "checkpoints/a");
    fs::create_directories(tmp / "checkpoints/b");
    write_text(tmp / "manifest.json",
               R"({"checkpoints": [{"step": 20, "path": "checkpoints/b", "loss": 1.5},
                                   {"step": 10, "path": "checkpoints/a"}]})");
    const auto m = io::read_manifest(tmp / "manifest.json");
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0].step, 10);
    EXPECT_EQ(m[0].label, "10");
    EXPECT_EQ(m[0].path, tmp / "checkpoints/a");
    EXPECT_EQ(m[1].step, 20);
    EXPECT_EQ(m[1].path, tmp / "checkpoints/b");
}

TEST(Manifest, CsvWithLabelsKeepsFileOrder) {
    testutil::ScratchDir tmp;
    fs::create_directories(tmp / "x");
    write_text(tmp / "m.csv",
               "label,path,comment\nlate," + (tmp / "x").string() + ",abs path\nearly,x,\n");
    const auto m = io::read_manifest(tmp / "m.csv");
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0].label, "late");
    EXPECT_FALSE(m[0].step.has_value());
    EXPECT_EQ(m[1].label, "early");
    EXPECT_EQ(m[1].path, tmp / "x");
}

TEST(Manifest, MalformedSeriesAreOneLineInputErrors) {
    testutil::ScratchDir tmp;
    fs::create_directories(tmp / "a");
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"({"checkpoints": []})", "lists no checkpoints"},
        {R"({"runs": []})", "no \"checkpoints\" list"},
        {R"([{"step": 1, "path": "missing"}])",
         "'" + (tmp / "missing").string() + "' does not exist"},
        {R"([{"step": 1, "path": "a"}, {"step": 1, "path": "a"}])", "step 1 appears twice"},
        {R"([{"label": "x", "path": "a"}, {"label": "x", "path": "a"}])",
         "label 'x' appears twice"},
        {R"([{"path": "a"}])", "neither a step nor a label"},
        {R"([{"step": 1}])", "has no path"},
        {R"([{"step": -3, "path": "a"}])", "not a whole number >= 0"},
        {R"([{"step": 1.5, "path": "a"}])", "not a whole number >= 0"},
        {R"([{"step": "1", "path": "a"}])", "\"step\" must be a number"},
        {R"([{"step": 1, "path": 7}])", "\"path\" must be a string"},
        {R"([3])", "must be an object"},
        {R"({"checkpoints": 3})", "must be a list"},
    };
    for (const auto& [text, phrase] : cases) {
        SCOPED_TRACE(text);
        write_text(tmp / "m.json", text);
        const std::string e = manifest_error(tmp / "m.json");
        EXPECT_EQ(e.rfind((tmp / "m.json").string() + ": ", 0), 0u) << e;
        EXPECT_NE(e.find(phrase), std::string::npos) << e;
        EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    }
    write_text(tmp / "m.csv", "step,where\n1,a\n");
    EXPECT_NE(manifest_error(tmp / "m.csv").find("no 'path' column"), std::string::npos);
    write_text(tmp / "m.csv", "step,path\nlate,a\n");
    EXPECT_NE(manifest_error(tmp / "m.csv").find("'late' is not a number"), std::string::npos);
    EXPECT_NE(manifest_error(tmp / "none.json").find("no such manifest file"), std::string::npos);
}
