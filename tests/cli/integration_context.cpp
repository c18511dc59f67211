// Inputs longer than the model's context, through the CLI on ../shared/models/stories260K: the
// GGUF conversion has context_length 128 (the llama2.c original: seq_len 512). By default such
// inputs are cut to the context with one console note; --over-context refuse makes them an input
// error with nothing written; `perplexity --stride` scores them in sliding windows, checked
// against perplexities of the windows given as samples of their own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/npy.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;
using testutil::run_cli;

namespace {

constexpr int64_t kContext = 128;  // context_length of stories260K.gguf

fs::path gguf(const fs::path& shared) {
    return shared / "models/stories260K/stories260K.gguf";
}

// n token ids: BOS (1), then a fixed pseudo-random walk over the 512-piece vocabulary (ids 3..511,
// no BOS/EOS inside).
std::vector<int64_t> long_ids(size_t n) {
    std::vector<int64_t> ids{1};
    uint64_t x = 12345;
    while (ids.size() < n) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        ids.push_back(3 + int64_t((x >> 33) % 509));
    }
    return ids;
}

// Samples as JSONL lines {"ids": [...]}.
std::string jsonl(const std::vector<std::vector<int64_t>>& samples) {
    std::string s;
    for (const auto& ids : samples) s += nlohmann::json{{"ids", ids}}.dump() + "\n";
    return s;
}

std::vector<int64_t> slice(const std::vector<int64_t>& v, size_t begin, size_t end) {
    return {v.begin() + begin, v.begin() + std::min(end, v.size())};
}

// The "key value" lines of `sinkscope perplexity`.
std::string field(const std::string& out, const std::string& key) {
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(key + " ", 0) == 0) return line.substr(key.size() + 1);
    ADD_FAILURE() << key << " not in\n" << out;
    return "";
}

size_t count_lines(const std::string& s) {
    return size_t(std::count(s.begin(), s.end(), '\n'));
}

struct PerplexityRun {
    testutil::CliResult r;
    double mean_nll = 0;
    int64_t tokens = 0;
};

PerplexityRun perplexity(const fs::path& model, const fs::path& data,
                         std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"perplexity", "--model", model.string(), "--data", data.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    PerplexityRun p{run_cli(args)};
    EXPECT_EQ(p.r.exit_code, 0) << p.r.err;
    if (p.r.exit_code == 0) {
        p.mean_nll = std::stod(field(p.r.out, "mean_nll"));
        p.tokens = std::stoll(field(p.r.out, "tokens"));
    }
    return p;
}

}  // namespace

// Cap (default): the 300-token input is scored as its first 128 tokens, exactly, and one note
// says so. Refuse: exit 3, one line, nothing on stdout.
TEST(CliContext, PerplexityCapsOrRefusesLongInputs) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const auto ids = long_ids(300);
    testutil::write_text(tmp / "long.jsonl", jsonl({ids, slice(ids, 0, 40)}));
    testutil::write_text(tmp / "cut.jsonl", jsonl({slice(ids, 0, kContext), slice(ids, 0, 40)}));

    const PerplexityRun capped = perplexity(gguf(shared), tmp / "long.jsonl");
    const PerplexityRun cut = perplexity(gguf(shared), tmp / "cut.jsonl");
    EXPECT_EQ(capped.tokens, kContext - 1 + 39);
    EXPECT_EQ(field(capped.r.out, "perplexity"), field(cut.r.out, "perplexity"));
    EXPECT_EQ(capped.r.err,
              "sinkscope: note: 1 of 2 inputs was cut to 128 tokens, the model's context "
              "(--over-context refuse makes longer inputs an error)\n");
    EXPECT_EQ(cut.r.err, "");  // nothing cut, nothing said

    const auto refused = run_cli({"perplexity", "--model", gguf(shared).string(), "--data",
                                  (tmp / "long.jsonl").string(), "--over-context", "refuse"});
    EXPECT_EQ(refused.exit_code, 3) << refused.err;
    EXPECT_EQ(refused.out, "");
    EXPECT_EQ(count_lines(refused.err), 1u) << refused.err;
    EXPECT_NE(refused.err.find("sample 0 has 300 tokens, more than the model's context of 128"),
              std::string::npos)
        << refused.err;

    const auto bad = run_cli({"perplexity", "--model", gguf(shared).string(), "--data",
                              (tmp / "long.jsonl").string(), "--over-context", "drop"});
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
}

// --stride: every token after the first is scored once. stride == context: the windows are the
// non-overlapping chunks [0,128), [128,256), [256,300), each scored like a sample of its own (its
// first token has no context and is not scored), so the result is the perplexity of the chunks as
// three samples: the same forwards, summed in the same order. An input no longer than the context
// is one window: the same as without --stride, exactly.
TEST(CliContext, PerplexityStrideWindows) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const auto ids = long_ids(300);
    testutil::write_text(tmp / "long.jsonl", jsonl({ids}));
    testutil::write_text(tmp / "chunks.jsonl",
                         jsonl({slice(ids, 0, 128), slice(ids, 128, 256), slice(ids, 256, 300)}));
    testutil::write_text(tmp / "short.jsonl", jsonl({slice(ids, 0, 100)}));

    const PerplexityRun chunks = perplexity(gguf(shared), tmp / "chunks.jsonl");
    const PerplexityRun strided =
        perplexity(gguf(shared), tmp / "long.jsonl", {"--stride", std::to_string(kContext)});
    EXPECT_EQ(strided.tokens, 127 + 127 + 43);
    EXPECT_EQ(chunks.tokens, strided.tokens);
    // Three window sums added to 0 in the same order on both sides; a float64 sum of three terms
    // in any order is within gamma_3(2^-53) of the other.
    EXPECT_REL_WITHIN(strided.mean_nll, chunks.mean_nll, testutil::kF64ShortSumRel);
    EXPECT_NE(strided.r.out.find("sliding window 128, stride 128\n"), std::string::npos)
        << strided.r.out;
    EXPECT_EQ(strided.r.err, "");  // with --stride nothing is cut

    // A smaller stride: windows overlap, every token but the first is scored once.
    const PerplexityRun overlapping =
        perplexity(gguf(shared), tmp / "long.jsonl", {"--stride", "50"});
    EXPECT_EQ(overlapping.tokens, 299);

    const PerplexityRun plain = perplexity(gguf(shared), tmp / "short.jsonl");
    const PerplexityRun one_window =
        perplexity(gguf(shared), tmp / "short.jsonl", {"--stride", "50"});
    EXPECT_EQ(field(one_window.r.out, "perplexity"), field(plain.r.out, "perplexity"));

    for (const char* stride : {"-1", "129"}) {
        const auto r = run_cli({"perplexity", "--model", gguf(shared).string(), "--data",
                                (tmp / "long.jsonl").string(), "--stride", stride});
        EXPECT_EQ(r.exit_code, 2) << stride << ": " << r.err;
        EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    }
}

// analyze and dump cap the same way (run.json records it) or refuse with nothing written; prune
// and fisher refuse too.
TEST(CliContext, AnalyzeDumpPruneFisherCapOrRefuse) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const auto ids = long_ids(200);
    testutil::write_text(tmp / "long.jsonl", jsonl({ids, slice(ids, 0, 20)}));
    testutil::write_text(tmp / "other.jsonl", jsonl({slice(ids, 50, 70)}));
    const std::string model = gguf(shared).string();
    const std::string data = (tmp / "long.jsonl").string();

    const auto a = run_cli({"analyze", "--model", model, "--data", data, "--max-tokens", "4000",
                            "--analyses", "compositional", "--no-report", "--progress", "never",
                            "--out", (tmp / "a").string()});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_NE(a.err.find("sinkscope: note: 1 of 2 inputs was cut to 128 tokens, the model's "
                         "context"),
              std::string::npos)
        << a.err;
    const auto rec = nlohmann::json::parse(read_file(tmp / "a/run.json"));
    EXPECT_EQ(rec["data"]["n_truncated"], 1);
    EXPECT_EQ(rec["data"]["truncated_to"], kContext);
    EXPECT_EQ(rec["data"]["model_context"], kContext);
    EXPECT_EQ(rec["data"]["n_tokens"], kContext + 20);

    const auto d =
        run_cli({"dump", "--model", model, "--data", data, "--out", (tmp / "d").string()});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_EQ(io::read_npy(tmp / "d/lengths.npy").to_i64(), (std::vector<int64_t>{kContext, 20}));

    // Refused: exit 3, one line, no output folder.
    const std::vector<std::vector<std::string>> refused = {
        {"analyze", "--model", model, "--data", data, "--max-tokens", "4000", "--out",
         (tmp / "ra").string()},
        {"dump", "--model", model, "--data", data, "--out", (tmp / "rd").string()},
        {"prune", "--model", model, "--calib", data, "--eval", (tmp / "other.jsonl").string(),
         "--max-tokens", "4000", "--out", (tmp / "rp").string()},
        {"fisher", "--model", model, "--data", data, "--max-tokens", "4000", "--out",
         (tmp / "rf").string()},
    };
    for (auto args : refused) {
        args.insert(args.end(), {"--over-context", "refuse"});
        const auto r = run_cli(args);
        EXPECT_EQ(r.exit_code, 3) << args[0] << ": " << r.err;
        EXPECT_EQ(count_lines(r.err), 1u) << r.err;
        EXPECT_NE(r.err.find("more than the model's context of 128"), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(args[args.size() - 3])) << args[0];
    }
    // Nothing was left beside the outputs either (no staging folders).
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(tmp.path()))
        left.push_back(e.path().filename().string());
    std::sort(left.begin(), left.end());
    EXPECT_EQ(left, (std::vector<std::string>{"a", "d", "long.jsonl", "other.jsonl"}));
}
