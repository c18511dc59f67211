// Results do not depend on --threads (issue 46 item 2): on every architecture family of the zoo
// and the real tinystories656K, analyze's tables and files, perplexity's printed values and
// prune's tables are identical byte for byte with --threads 1, 2 and 3. Every forward runs on
// one libtorch and one BLAS thread and the threads run whole inputs side by side (model.hpp,
// core/parallel.hpp); before, libtorch's and OpenBLAS's split of a product followed the thread
// count (perplexity of tinystories656K 51.04489730234904 with 1 thread, 51.04490110737904 with 2).
#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using sinkscope::read_file;
using sinkscope::testutil::run_cli_batch;

namespace {

namespace io = sinkscope::io;
namespace testutil = sinkscope::testutil;

const std::vector<std::string> kThreads = {"1", "2", "3"};

// Every file under `dir` but run.json (it records the thread count and the wall time) and
// report.html (it shows run.json), by path relative to `dir`.
std::map<std::string, std::string> files_of(const fs::path& dir) {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file() && e.path().filename() != "run.json" &&
            e.path().filename() != "report.html")
            out[fs::relative(e.path(), dir).string()] = read_file(e.path());
    return out;
}

// Sentences [first, first + n) of the shared STEM prompt set, one a line, in dir/name.
fs::path stem_text(const fs::path& shared, const fs::path& dir, const std::string& name,
                   size_t first, size_t n) {
    const io::Table stem = io::Table::read_csv(shared / "data" / "stem_sentences.csv");
    std::string s;
    const auto& c = stem.columns();
    const size_t col = size_t(std::find(c.begin(), c.end(), "text") - c.begin());
    for (size_t i = first; i < first + n; ++i)
        s += std::get<std::string>(stem.rows().at(i).at(col)) + "\n";
    testutil::write_text(dir / name, s);
    return dir / name;
}

}  // namespace

TEST(CliThreads, EveryFamilyGivesTheSameFilesForAnyThreadCount) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const fs::path text = stem_text(shared, tmp.path(), "data.txt", 0, 6);
    const fs::path held_out = stem_text(shared, tmp.path(), "eval.txt", 6, 6);
    // A stack of three 32x32 images for the ViT.
    std::vector<float> px(size_t(3) * 3 * 32 * 32);
    for (size_t i = 0; i < px.size(); ++i) px[i] = float((i * 2654435761u) % 1000u) / 999.0f;
    io::write_npy(tmp / "images.npy", io::make_npy_f32({3, 3, 32, 32}, px));

    std::vector<std::pair<std::string, fs::path>> models = {
        {"tinystories656K", shared / "models" / "tinystories656K"}};
    for (const auto& e : fs::directory_iterator(shared / "zoo"))
        if (e.is_directory() && fs::exists(e.path() / "config.json"))
            models.emplace_back(e.path().filename().string(), e.path());
    ASSERT_GE(models.size(), 10u) << "the zoo holds fewer families than expected";

    std::vector<std::vector<std::string>> commands;
    std::vector<std::string> labels;  // of each command: model/threads
    for (const auto& [name, dir] : models) {
        const std::string data = name == "vit" ? (tmp / "images.npy").string() : text.string();
        for (const std::string& t : kThreads) {
            commands.push_back({"analyze", "--model", dir.string(), "--data", data, "--max-tokens",
                                "40", "--threads", t, "--out",
                                (tmp / ("a_" + name + "_" + t)).string(), "--no-report",
                                "--progress", "never"});
            labels.push_back("analyze " + name + " --threads " + t);
        }
    }
    // Perplexity of the causal models (an encoder or a ViT predicts no next token), and prune's
    // tables, whose unpruned row is that perplexity.
    for (const auto& [name, dir] : models) {
        if (name == "bert" || name == "roberta" || name == "vit") continue;
        for (const std::string& t : kThreads) {
            commands.push_back(
                {"perplexity", "--model", dir.string(), "--data", text.string(), "--threads", t});
            labels.push_back("perplexity " + name + " --threads " + t);
        }
    }
    for (const std::string& t : kThreads) {
        commands.push_back({"prune", "--model", (shared / "models" / "tinystories656K").string(),
                            "--calib", text.string(), "--eval", held_out.string(), "--sparsity",
                            "0.25", "--random-seeds", "1", "--threads", t, "--out",
                            (tmp / ("p_" + t)).string(), "--progress", "never"});
        labels.push_back("prune --threads " + t);
    }
    const auto results = run_cli_batch(commands, tmp / "logs", 2);
    ASSERT_EQ(results.size(), commands.size());
    for (size_t i = 0; i < results.size(); ++i)
        ASSERT_EQ(results[i].exit_code, 0) << labels[i] << "\n" << results[i].err;

    for (const auto& [name, dir] : models) {
        SCOPED_TRACE(name);
        const auto one = files_of(tmp / ("a_" + name + "_1"));
        EXPECT_GE(one.size(), 3u);
        for (const std::string& t : {"2", "3"}) {
            const auto other = files_of(tmp / ("a_" + name + "_" + t));
            ASSERT_EQ(other.size(), one.size()) << "--threads " << t;
            for (const auto& [file, bytes] : one)
                EXPECT_TRUE(other.count(file) && other.at(file) == bytes)
                    << file << " differs with --threads " << t;
        }
    }
    size_t k = models.size() * kThreads.size();
    for (; k + kThreads.size() <= results.size() && labels[k].rfind("perplexity", 0) == 0;
         k += kThreads.size()) {
        SCOPED_TRACE(labels[k]);
        EXPECT_NE(results[k].out.find("perplexity "), std::string::npos) << results[k].out;
        EXPECT_EQ(results[k + 1].out, results[k].out);
        EXPECT_EQ(results[k + 2].out, results[k].out);
    }
    const auto prune_one = files_of(tmp / "p_1");
    EXPECT_GE(prune_one.size(), 2u);
    EXPECT_EQ(files_of(tmp / "p_2"), prune_one);
    EXPECT_EQ(files_of(tmp / "p_3"), prune_one);
}
