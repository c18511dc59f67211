// What the console tells a user, on ../shared/models/stories260K (GGUF): the per-layer mean sink
// mass at the end of analyze equals the head average of heads.csv; the BOS policy's resolution
// (run.json "bos", console line) matches the token ids dump writes; Ctrl-C says how to continue
// and the printed --resume continues; --resume with nothing to resume says so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;
using testutil::run_cli;

namespace {

std::string gguf(const fs::path& shared) {
    return (shared / "models/stories260K/stories260K.gguf").string();
}

// The line of `text` that starts with `prefix` ("" when none).
std::string line_with(const std::string& text, const std::string& prefix) {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
        if (l.find(prefix) != std::string::npos) return l;
    return "";
}

double number(const io::Cell& c) {
    if (auto d = std::get_if<double>(&c)) return *d;
    if (auto i = std::get_if<int64_t>(&c)) return double(*i);
    ADD_FAILURE() << "not a number: " << std::get<std::string>(c);
    return 0;
}

std::string sig3(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
}

}  // namespace

TEST(CliMessages, SinkMassPerLayerAndBosResolution) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    testutil::write_text(tmp / "data.txt",
                         "Once upon a time there was a cat.\nThe dog ran to the park.\nHi.\n");
    const std::string data = (tmp / "data.txt").string();
    for (const std::string bos : {"default", "never"}) {
        const fs::path out = tmp / ("a_" + bos);
        const auto r = run_cli({"analyze", "--model", gguf(shared), "--data", data, "--bos", bos,
                                "--no-report", "--progress", "never", "--out", out.string()});
        ASSERT_EQ(r.exit_code, 0) << r.err;

        // Per layer, the mean over heads of heads.csv sink_mass, as the console prints it.
        const io::Table heads = io::Table::read_csv(out / "heads.csv");
        std::map<int64_t, std::pair<double, int>> per_layer;
        const auto& cols = heads.columns();
        auto col = [&](const std::string& n) {
            return size_t(std::find(cols.begin(), cols.end(), n) - cols.begin());
        };
        for (const auto& row : heads.rows()) {
            if (std::get<std::string>(row[col("metric")]) != "sink_mass") continue;
            auto& [sum, n] = per_layer[int64_t(number(row[col("layer")]))];
            sum += number(row[col("value")]);
            ++n;
        }
        ASSERT_EQ(per_layer.size(), 5u);  // stories260K: 5 layers
        std::string expected = "  sink mass per layer (heads.csv sink_mass, mean over heads):";
        for (const auto& [layer, s] : per_layer) expected += " " + sig3(s.first / s.second);
        EXPECT_EQ(line_with(r.out, "sink mass per layer"), expected) << r.out;

        // BOS: what dump's token ids show (the same tokenizer path), and run.json says so.
        const fs::path dumped = tmp / ("d_" + bos);
        const auto d = run_cli({"dump", "--model", gguf(shared), "--data", data, "--bos", bos,
                                "--out", dumped.string()});
        ASSERT_EQ(d.exit_code, 0) << d.err;
        const auto tokens = io::read_npy(dumped / "tokens.npy");
        const int64_t t_max = tokens.shape.at(1);
        const auto ids = tokens.to_i64();
        int64_t starting = 0;
        for (size_t k = 0; k < 3; ++k) starting += ids[k * size_t(t_max)] == 1 ? 1 : 0;
        EXPECT_EQ(starting, bos == "default" ? 3 : 0);  // the tokenizer's config adds BOS

        const auto rec = nlohmann::json::parse(read_file(out / "run.json"));
        EXPECT_EQ(rec["bos"]["policy"], bos);
        EXPECT_EQ(rec["bos"]["prepended"], bos == "default");
        EXPECT_EQ(rec["bos"]["token_id"], 1);
        EXPECT_EQ(rec["bos"]["token"], "<s>");
        EXPECT_EQ(rec["bos"]["inputs_starting_with_bos"], starting);
        EXPECT_EQ(rec["sink_policy"]["resolved"], "first");
        // The token at the sink (position 0) of every input, counted.
        std::map<std::string, int> sink_tokens;
        for (const auto& [piece, count] : rec["sink_policy"]["tokens"].items())
            sink_tokens[piece] = count.get<int>();
        int total = 0;
        for (const auto& [piece, count] : sink_tokens) total += count;
        EXPECT_EQ(total, 3);
        if (bos == "default") {
            EXPECT_EQ(sink_tokens["<s>"], 3);
        }
        const std::string line = line_with(r.out, "BOS: ");
        EXPECT_EQ(line.rfind(bos == "default" ? "BOS: prepended, id 1 '<s>'"
                                              : "BOS: not prepended, id 1 '<s>' (--bos never)",
                             0),
                  0u)
            << r.out;
        EXPECT_NE(line.find("; sink: first, token"), std::string::npos) << line;
    }
}

TEST(CliMessages, InterruptSaysHowToResume) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const fs::path out = tmp / "run";
    const std::vector<std::string> args = {
        "analyze",    "--model", gguf(shared),  "--samples",          "4", "--out", out.string(),
        "--progress", "never",   "--no-report", "--checkpoint-every", "1"};

    // --resume with nothing to resume says so (and runs).
    auto fresh = args;
    fresh.push_back("--resume");
    const auto r0 = run_cli(fresh);
    ASSERT_EQ(r0.exit_code, 0) << r0.err;
    EXPECT_NE(r0.out.find("--resume: no interrupted run in"), std::string::npos) << r0.out;
    fs::remove_all(out);

    auto interrupted = args;
    interrupted.insert(interrupted.end(), {"--debug-interrupt-after", "2"});
    const auto r1 = run_cli(interrupted);
    EXPECT_EQ(r1.exit_code, 130) << r1.err;
    const std::string note = line_with(r1.err, "sinkscope: interrupted");
    EXPECT_NE(note.find("run the same command with --resume: "), std::string::npos) << r1.err;
    EXPECT_EQ(note.substr(note.size() - 9), " --resume") << note;
    EXPECT_FALSE(fs::exists(out));

    const auto r2 = run_cli(fresh);
    ASSERT_EQ(r2.exit_code, 0) << r2.err;
    EXPECT_NE(r2.out.find("resuming at input 2 of 4"), std::string::npos) << r2.out;
}
