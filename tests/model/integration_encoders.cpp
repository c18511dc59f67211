// sinkscope inspect / dump / analyze on the zoo encoders (BERT, RoBERTa): exact parameter counts,
// bidirectional attention, dumps equal to the golden attention, sink policy argmax in run.json.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/npy.hpp"
#include "testing.hpp"
#include "zoo_golden.hpp"

using namespace sinkscope;
using testutil::run_cli;
namespace fs = std::filesystem;

// inspect prints the exact stored parameter count (zoo README: bert 1,579,338, roberta 670,149),
// bidirectional attention and no ln_final hook (post-LN encoders have no final norm).
TEST(CliEncoders, InspectShowsExactParametersAndBidirectional) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    for (const auto& [name, params] :
         {std::pair<const char*, const char*>{"bert", "1579338"}, {"roberta", "670149"}}) {
        const auto r =
            run_cli({"inspect", "--model", (shared / "zoo" / name).string(), "--all-hooks"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_NE(r.out.find(std::string("architecture  ") + name + "\n"), std::string::npos)
            << r.out;
        EXPECT_NE(r.out.find(std::string("parameters    ") + params + "\n"), std::string::npos)
            << r.out;
        EXPECT_NE(r.out.find("attention     bidirectional\n"), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("blocks.1.attn.hook_pattern"), std::string::npos) << r.out;
        EXPECT_EQ(r.out.find("ln_final"), std::string::npos) << r.out;
    }
}

// dump of every layer's pattern for two texts: attention.npy (N, L, H, T, T) whose first sample
// is the golden `fox` attention of the zoo bert (the tokenizer adds [CLS] ... [SEP] itself).
TEST(CliEncoders, DumpBertPatternEqualsGolden) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    std::ofstream(tmp / "data.txt")
        << "The quick brown fox jumps over the lazy dog.\nA short one.\n";
    const auto out = tmp / "out";
    const auto r = run_cli({"dump", "--model", (shared / "zoo/bert").string(), "--data",
                            (tmp / "data.txt").string(), "--hooks", "blocks.*.attn.hook_pattern",
                            "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const io::NpyArray a = io::read_npy(out / "attention.npy");
    ASSERT_EQ(a.shape.size(), 5u);
    EXPECT_EQ(a.shape[0], 2);
    EXPECT_EQ(a.shape[1], 2);
    EXPECT_EQ(a.shape[2], 4);
    const int64_t T = a.shape[3];
    const io::NpyArray g =
        io::read_npy(shared / "zoo/bert/golden/fox/attentions.npy");  // [L,H,t,t]
    const int64_t t = g.shape[2];
    ASSERT_EQ(T, t);  // the fox sentence is the longer sample
    const auto v = a.to_f64();
    const auto gv = g.to_f64();
    double worst = 0;
    for (size_t i = 0; i < gv.size(); ++i) worst = std::max(worst, std::abs(v[i] - gv[i]));
    // the golden is float32 too, the dump a padded batch: two float32 evaluations (zoo_tolerances)
    EXPECT_ERROR_WITHIN(
        worst, testutil::zoo_tolerances(sinkscope::model::config_from_hf_dir(shared / "zoo/bert"),
                                        shared / "zoo/bert/golden/fox")
                   .attention);
    EXPECT_EQ(io::read_npy(out / "lengths.npy").to_i64()[0], t);
    EXPECT_TRUE(fs::exists(out / "run.json"));
}

// analyze on 5 built-in prompts completes for the zoo bert and records the sink policy `auto`
// resolved to argmax (spec section 0: encoders).
TEST(CliEncoders, AnalyzeBertResolvesSinkPolicyToArgmax) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const auto out = tmp / "run";
    const auto r = run_cli({"analyze", "--model", (shared / "zoo/bert").string(), "--samples", "5",
                            "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto rec = nlohmann::json::parse(read_file(out / "run.json"));
    EXPECT_EQ(rec.at("sink_policy").at("requested"), "auto");
    EXPECT_EQ(rec.at("sink_policy").at("resolved"), "argmax");
    EXPECT_EQ(rec.at("model").at("architecture"), "bert");
    EXPECT_EQ(rec.at("data").at("n_samples"), 5);
}
