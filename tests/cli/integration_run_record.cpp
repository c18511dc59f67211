// What run.json and the console say about a run is what happened: the thread count the command
// computed with (not the machine's core count), the data a dynamics series really read, and a
// --samples larger than the data said on stderr and recorded.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "sinkscope/io/dataset.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace sinkscope;
using testutil::read_json;
using testutil::run_cli;

namespace {

// A --threads value other than the machine's core count, so that a record of the core count
// cannot pass for the thread count asked for.
int other_than_cores() {
    return std::thread::hardware_concurrency() == 1 ? 2 : 1;
}

// Lines of plain text from the STEM sentences (rows first..first+n-1).
fs::path stem_lines(const fs::path& shared, const fs::path& file, size_t first, size_t n) {
    std::ifstream in(shared / "data/stem_sentences.csv", std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    const auto records = io::parse_csv(bytes.str());  // header, then the rows; text first
    std::string text;
    for (size_t r = first + 1; r < first + 1 + n && r < records.size(); ++r)
        text += records[r][0] + "\n";
    testutil::write_text(file, text);
    return file;
}

}  // namespace

// run.json's top-level "threads" is the resolved --threads of analyze, prune, fisher, train and
// dynamics (and 1 for compare, which reads tables on one thread); dynamics also records it in its
// options, and names the built-in prompts as its data when --data is not given.
TEST(CliRunRecord, ThreadsAreTheThreadsUsed) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const std::string n = std::to_string(other_than_cores());
    const std::string model = (shared / "models/tinystories656K").string();
    const fs::path calib = stem_lines(shared, tmp / "calib.txt", 0, 4);
    const fs::path eval = stem_lines(shared, tmp / "eval.txt", 4, 3);
    const std::vector<std::pair<std::string, std::vector<std::string>>> commands = {
        {"analyze",
         {"analyze", "--model", model, "--samples", "3", "--max-tokens", "16", "--analyses",
          "heads", "--no-report"}},
        {"prune",
         {"prune", "--model", model, "--calib", calib.string(), "--eval", eval.string(),
          "--max-tokens", "24"}},
        {"fisher", {"fisher", "--model", model, "--data", eval.string(), "--max-tokens", "16"}},
        {"train",
         {"train", "--preset", "tiny", "--text",
          testutil::write_training_corpus(tmp.path()).string(), "--steps", "10",
          "--checkpoint-every", "5"}}};
    for (const auto& [name, args] : commands) {
        SCOPED_TRACE(name);
        std::vector<std::string> a = args;
        for (const std::string& x :
             {std::string("--threads"), n, std::string("--progress"), std::string("never"),
              std::string("--out"), (tmp / name).string()})
            a.push_back(x);
        const auto r = run_cli(a);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(read_json(tmp / name / "run.json")["threads"], std::stoi(n));
    }
    EXPECT_EQ(read_json(tmp / "analyze/run.json")["options"]["threads"], std::stoi(n));

    const auto dyn =
        run_cli({"dynamics", "--checkpoints", (tmp / "train/manifest.json").string(), "--samples",
                 "3", "--max-tokens", "16", "--analyses", "heads", "--threads", n, "--progress",
                 "never", "--no-report", "--out", (tmp / "dyn").string()});
    ASSERT_EQ(dyn.exit_code, 0) << dyn.err;
    const json d = read_json(tmp / "dyn/run.json");
    EXPECT_EQ(d["threads"], std::stoi(n));
    EXPECT_EQ(d["options"]["threads"], std::stoi(n));
    EXPECT_EQ(d["data"], "built-in prompts");

    const auto cmp = run_cli(
        {"compare", (tmp / "analyze").string(), "--out", (tmp / "cmp").string(), "--no-report"});
    ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
    EXPECT_EQ(read_json(tmp / "cmp/run.json")["threads"], 1);

    // --threads 0 resolves to the machine's core count.
    const auto all = run_cli({"analyze", "--model", model, "--samples", "2", "--max-tokens", "16",
                              "--analyses", "heads", "--no-report", "--threads", "0", "--progress",
                              "never", "--out", (tmp / "all").string()});
    ASSERT_EQ(all.exit_code, 0) << all.err;
    EXPECT_EQ(read_json(tmp / "all/run.json")["threads"],
              std::max(1u, std::thread::hardware_concurrency()));
}

// --samples larger than the data: the run uses every sample, says so in one warning line on
// stderr naming the option, the file and both counts, and records the request in run.json.
TEST(CliRunRecord, MoreSamplesThanTheDataHoldsIsSaid) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const fs::path data = stem_lines(shared, tmp / "five.txt", 0, 5);
    for (const bool seeded : {false, true}) {
        SCOPED_TRACE(seeded);
        const fs::path out = tmp / (seeded ? "seeded" : "first");
        std::vector<std::string> args = {
            "analyze",    "--model",      (shared / "models/tinystories656K").string(),
            "--data",     data.string(),  "--samples",
            "5000",       "--max-tokens", "16",
            "--analyses", "heads",        "--no-report",
            "--progress", "never",        "--out",
            out.string()};
        if (seeded) args.insert(args.end(), {"--seed", "3"});
        const auto r = run_cli(args);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const std::string warning =
            "sinkscope: warning: --samples 5000 asks for more samples "
            "than " +
            data.string() + " holds: all 5 are used\n";
        EXPECT_NE(r.err.find(warning), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find("warning"), r.err.rfind("warning")) << r.err;  // one line
        const json rec = read_json(out / "run.json");
        EXPECT_EQ(rec["data"]["n_samples"], 5);
        EXPECT_EQ(rec["data"]["samples_requested"], 5000);
        EXPECT_EQ(rec["data"]["samples_note"], "--samples 5000 asks for more samples than " +
                                                   data.string() + " holds: all 5 are used");
    }
    // As many as the data holds, or fewer: no warning.
    const auto exact =
        run_cli({"analyze", "--model", (shared / "models/tinystories656K").string(), "--data",
                 data.string(), "--samples", "5", "--max-tokens", "16", "--analyses", "heads",
                 "--no-report", "--progress", "never", "--out", (tmp / "exact").string()});
    ASSERT_EQ(exact.exit_code, 0) << exact.err;
    EXPECT_EQ(exact.err.find("warning"), std::string::npos) << exact.err;
}
