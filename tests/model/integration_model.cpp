// sinkscope inspect / generate / perplexity / dump end to end: outputs against the shared
// references, exit codes and one-line errors for bad input, no partial output.
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>

#include "forward_bound.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/model/model.hpp"
#include "testing.hpp"

using namespace sinkscope;
using testutil::run_cli;
namespace fs = std::filesystem;

namespace {
void write_text(const fs::path& p, const std::string& s) {
    std::ofstream(p) << s;
}
int count_lines(const std::string& s) {
    return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}
}  // namespace

// inspect reports the GGUF header's dims (llama, 5 layers, 8/4 heads) and TransformerLens hooks.
TEST(CliModel, InspectStories260K) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const auto r =
        run_cli({"inspect", "--model", (shared / "models/stories260K/stories260K.gguf").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("architecture  llama"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("n_layers      5"), std::string::npos);
    EXPECT_NE(r.out.find("n_kv_heads    4"), std::string::npos);
    EXPECT_NE(r.out.find("blocks.0.attn.hook_pattern"), std::string::npos);
}

// generate's text is llama2.c's greedy stories260K output (its first 40 tokens here; the full
// length is pinned by golden_model GreedyTextByteForByte).
TEST(CliModel, GenerateMatchesLlama2c) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const auto r = run_cli(
        {"generate", "--model", (shared / "models/stories260K/stories260K.bin").string(),
         "--prompt", "Once upon a time", "--max-new", "40", "--stop", "bos", "--bos", "always"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string want =
        read_file(shared / "reference/llama2c_stories260K_greedy_onceupon.txt");
    ASSERT_GT(r.out.size(), 100u);
    ASSERT_EQ(r.out.back(), '\n');
    EXPECT_EQ(want.substr(0, r.out.size() - 1), r.out.substr(0, r.out.size() - 1));
}

// dump writes attention (N, L, H, T, T) whose first sample equals llama2.c's attention dump.
TEST(CliModel, DumpAttentionMatchesReference) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    write_text(tmp / "data.txt", "Once upon a time\nThe cat sat on the mat and\n");
    const auto out = tmp / "out";
    const auto r =
        run_cli({"dump", "--model", (shared / "models/stories260K/stories260K.gguf").string(),
                 "--data", (tmp / "data.txt").string(), "--bos", "always", "--hooks",
                 "blocks.*.attn.hook_pattern,blocks.2.attn.hook_q", "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const io::NpyArray a = io::read_npy(out / "attention.npy");
    ASSERT_EQ(a.shape.size(), 5u);
    EXPECT_EQ(a.shape[0], 2);
    EXPECT_EQ(a.shape[1], 5);
    EXPECT_EQ(a.shape[2], 8);
    const int64_t T = a.shape[3];
    const auto v = a.to_f64();
    // reference: "ATT layer 4 head 3 pos 4 ..." of llama2c_dump_stories260K_onceupon.txt, float32
    // values of llama2.c (9 digits round-trip): two float32 evaluations (forward_bound.hpp)
    const sinkscope::model::Model m =
        sinkscope::model::load_model(shared / "models/stories260K/stories260K.gguf");
    const std::vector<int32_t> ids{1, 403, 407, 261, 378};  // the dump's TOKENS
    const double tol = testutil::attention_tol(
        m.config(), 5,
        testutil::max_abs_scores(m.forward(ids, sinkscope::model::CaptureSpec::attention()),
                                 m.config()));
    double worst = 0;
    std::istringstream in(read_file(shared / "reference/llama2c_dump_stories260K_onceupon.txt"));
    int checked = 0;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("ATT ", 0) != 0) continue;
        std::istringstream ls(line);
        std::string w;
        int64_t l, h, i;
        ls >> w >> w >> l >> w >> h >> w >> i;
        for (int64_t j = 0; j <= i; ++j) {
            double p;
            ls >> p;
            worst = std::max(
                worst,
                std::abs(v[static_cast<size_t>((((0 * 5 + l) * 8 + h) * T + i) * T + j)] - p));
        }
        ++checked;
    }
    EXPECT_ERROR_WITHIN(worst, tol);
    EXPECT_EQ(checked, 5 * 8 * 5);
    EXPECT_EQ(io::read_npy(out / "blocks.2.attn.hook_q.npy").shape,
              (std::vector<int64_t>{2, T, 8, 8}));
    EXPECT_EQ(io::read_npy(out / "lengths.npy").to_i64(), (std::vector<int64_t>{5, T}));
    EXPECT_TRUE(fs::exists(out / "run.json"));
}

// perplexity prints exp(mean NLL) of a finite, plausible value for a trained model.
TEST(CliModel, PerplexityIsExpMeanNll) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    write_text(tmp / "data.txt",
               "Once upon a time, there was a little girl named Lily.\nShe loved to play.\n");
    const auto r =
        run_cli({"perplexity", "--model", (shared / "models/stories260K/stories260K.bin").string(),
                 "--data", (tmp / "data.txt").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    double ppl = 0, nll = 0;
    std::istringstream in(r.out);
    std::string w;
    in >> w >> ppl >> w >> nll;
    // both printed with 10 significant digits (within 5e-10 relative); exp turns nll's rounding
    // (5e-10 |nll|) into a relative error of ppl
    EXPECT_REL_WITHIN(ppl, std::exp(nll), 5e-10 * (1 + std::abs(nll)) + 4 * testutil::kU64);
    EXPECT_GT(ppl, 1.0);
    EXPECT_LT(ppl, 100.0);  // a trained TinyStories model on TinyStories text
}

// Missing model: exit 2 (usage), one line on stderr naming it, no output folder.
TEST(CliModel, MissingModelIsOneLineError) {
    testutil::ScratchDir tmp;
    write_text(tmp / "data.txt", "hello\n");
    const auto r = run_cli({"dump", "--model", (tmp / "nope.gguf").string(), "--data",
                            (tmp / "data.txt").string(), "--out", (tmp / "out").string()});
    EXPECT_EQ(r.exit_code, 2);  // a path on the command line that does not exist: usage
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("nope.gguf"), std::string::npos);
    EXPECT_FALSE(fs::exists(tmp / "out"));
}

// Unknown model_type: exit 4 naming config.json and the type; no output folder.
TEST(CliModel, UnknownModelType) {
    testutil::ScratchDir tmp;
    fs::create_directories(tmp / "m");
    write_text(tmp / "m/config.json", R"({"model_type": "t5", "hidden_size": 8})");
    write_text(tmp / "m/model.safetensors", "");  // never read: the config is refused first
    write_text(tmp / "data.txt", "hello\n");
    const auto r = run_cli({"dump", "--model", (tmp / "m").string(), "--data",
                            (tmp / "data.txt").string(), "--out", (tmp / "out").string()});
    EXPECT_EQ(r.exit_code, 4);
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("config.json"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("t5"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(tmp / "out"));
}

// A truncated GGUF is an input error (exit 3) naming the file; no output folder.
TEST(CliModel, TruncatedGguf) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const std::string bytes = read_file(shared / "models/stories260K/stories260K.gguf");
    write_text(tmp / "cut.gguf", bytes.substr(0, bytes.size() / 2));
    write_text(tmp / "data.txt", "hello\n");
    const auto r = run_cli({"dump", "--model", (tmp / "cut.gguf").string(), "--data",
                            (tmp / "data.txt").string(), "--out", (tmp / "out").string()});
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("cut.gguf"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(tmp / "out"));
}

// A hook pattern that selects nothing is a usage error (exit 2) before any output.
TEST(CliModel, HooksSelectingNothing) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    write_text(tmp / "data.txt", "hello\n");
    const auto r = run_cli(
        {"dump", "--model", (shared / "models/stories260K/stories260K.gguf").string(), "--data",
         (tmp / "data.txt").string(), "--hooks", "blocks.99.*", "--out", (tmp / "out").string()});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_FALSE(fs::exists(tmp / "out"));
}
