// sinkscope inspect / dump end to end on the decoder zoo models (GPT-2, GPT-NeoX, Phi): the
// exact parameter count, and dumped attention equal to the zoo's golden attention; inspect of the
// RoPE-scaled Llamas.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/npy.hpp"
#include "testing.hpp"
#include "zoo_golden.hpp"

using namespace sinkscope;
using testutil::run_cli;
namespace fs = std::filesystem;

namespace {

struct ZooDecoder {
    const char* dir;
    const char* architecture;
    const char* n_params;  // zoo README "params" column
};

class CliDecoders : public ::testing::TestWithParam<ZooDecoder> {};

// inspect names the architecture and prints the exact parameter count of the zoo README.
TEST_P(CliDecoders, InspectPrintsArchitectureAndExactParams) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const auto r = run_cli({"inspect", "--model", (shared / "zoo" / GetParam().dir).string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(std::string("architecture  ") + GetParam().architecture + "\n"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find(std::string("parameters    ") + GetParam().n_params + "\n"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("blocks.0.attn.hook_pattern"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("ln_final.hook_normalized"), std::string::npos) << r.out;
}

// dump of the golden `fox` text writes attention (1, L, H, T, T) equal to the golden
// attentions.npy up to float32 summation order, and the golden token ids.
TEST_P(CliDecoders, DumpAttentionMatchesGolden) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path model = shared / "zoo" / GetParam().dir;
    const auto manifest = nlohmann::json::parse(read_file(model / "golden/manifest.json"));
    std::string text;
    for (const auto& in : manifest.at("inputs"))
        if (in.at("name") == "fox") text = in.at("text").get<std::string>();
    ASSERT_FALSE(text.empty());
    testutil::ScratchDir tmp;
    std::ofstream(tmp / "data.txt") << text << "\n";
    const fs::path out = tmp / "out";
    const auto r =
        run_cli({"dump", "--model", model.string(), "--data", (tmp / "data.txt").string(),
                 "--hooks", "blocks.*.attn.hook_pattern", "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const io::NpyArray got = io::read_npy(out / "attention.npy");
    const io::NpyArray want = io::read_npy(model / "golden/fox/attentions.npy");
    std::vector<int64_t> shape{1};
    shape.insert(shape.end(), want.shape.begin(), want.shape.end());
    ASSERT_EQ(got.shape, shape);
    const auto g = got.to_f64(), w = want.to_f64();
    double worst = 0;
    for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - w[i]));
    // the golden is float32 too: two float32 evaluations (zoo_tolerances)
    EXPECT_ERROR_WITHIN(worst, testutil::zoo_tolerances(sinkscope::model::config_from_hf_dir(model),
                                                        model / "golden/fox")
                                   .attention);
    EXPECT_EQ(io::read_npy(out / "tokens.npy").to_i64(),
              io::read_npy(model / "golden/fox/input_ids.npy").to_i64());
}

INSTANTIATE_TEST_SUITE_P(Zoo, CliDecoders,
                         ::testing::Values(ZooDecoder{"gpt2", "gpt2", "1637792"},
                                           ZooDecoder{"pythia", "gpt_neox", "1156864"},
                                           ZooDecoder{"phi", "phi", "1484736"}),
                         [](const auto& info) { return std::string(info.param.dir); });

// inspect prints the RoPE scaling in use: config.json rope_scaling of an HF directory, the
// rope_freqs divisors of a Llama-3 GGUF, "none" for a plain rotary model.
TEST(CliRopeScaling, InspectPrintsTheScaling) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"llama3_rope",
         "rope_scaling  llama3 (factor 8, low_freq_factor 1, high_freq_factor 4, "
         "original context 64)\n"},
        {"llama_linear_rope", "rope_scaling  linear (factor 4)\n"},
        {"llama_dynamic_rope", "rope_scaling  dynamic (factor 2)\n"},
        {"llama_yarn_rope",
         "rope_scaling  yarn (factor 4, original context 32, beta_fast 32, "
         "beta_slow 1, attention factor 1.13863)\n"},
        {"gguf/llama3_rope.gguf",
         "rope_scaling  rope_freqs [1, 1.29398, 7.66739, 8, 8, 8, 8, 8]\n"},
        {"qwen2", "rope_scaling  none\n"},
    };
    for (const auto& [model, line] : cases) {
        const auto r = run_cli({"inspect", "--model", (shared / "zoo" / model).string()});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
    }
}

// An unknown rope_scaling type stops the command with one line naming config.json and the type.
TEST(CliRopeScaling, UnknownTypeIsOneLineError) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const fs::path dir = tmp / "m";
    fs::create_directories(dir);
    for (const auto& e : fs::directory_iterator(shared / "zoo" / "llama3_rope"))
        if (e.is_regular_file()) fs::copy_file(e.path(), dir / e.path().filename());
    auto config = nlohmann::json::parse(read_file(dir / "config.json"));
    config["rope_scaling"] = {{"rope_type", "ntk-by-parts"}, {"factor", 2.0}};
    std::ofstream(dir / "config.json", std::ios::trunc) << config.dump();
    const auto r = run_cli({"inspect", "--model", dir.string()});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(r.err, "sinkscope: error: " + (dir / "config.json").string() +
                         ": not supported: rope_scaling type 'ntk-by-parts'\n");
}

}  // namespace
