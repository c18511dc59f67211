// How attention was computed, as `analyze` records it in run.json (model.attention) and
// `inspect` prints it: score scale, soft-caps, sliding window and the layers using it.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "testing.hpp"
#include "tiny_reference.hpp"

using namespace sinkscope;
using namespace sinkscope::testutil;
namespace fs = std::filesystem;

namespace {

int count_lines(const std::string& s) {
    return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

}  // namespace

// Gemma-2 (window 5 on layers 0 and 2, soft-caps 5 and 3, query_pre_attn_scalar 16): run.json and
// inspect say so. The 12-token input is cut to 5 tokens (--max-tokens): within the window, the
// local layers hide nothing, so one visibility rule serves every layer.
TEST(AttentionFacts, Gemma2RunJsonRecordsSoftcapAndWindows) {
    ScratchDir tmp;
    SINKSCOPE_REFERENCE("gemma2", tmp.path());
    const fs::path model = tmp / "model", ids = tmp / "model/golden/long/input_ids.npy";
    const auto r =
        run_cli({"analyze", "--model", model.string(), "--data", ids.string(), "--max-tokens", "5",
                 "--out", (tmp / "run").string(), "--quiet", "--no-report"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto rec = nlohmann::json::parse(read_file(tmp / "run/run.json"));
    const auto& a = rec.at("model").at("attention");
    EXPECT_EQ(a.at("kind"), "causal");
    EXPECT_EQ(a.at("scale").get<double>(), 0.25);  // 16^-0.5
    EXPECT_EQ(a.at("softcap").get<double>(), 5.0);
    EXPECT_EQ(a.at("final_logit_softcap").get<double>(), 3.0);
    EXPECT_EQ(a.at("sliding_window").get<int64_t>(), 5);
    EXPECT_EQ(a.at("window_layers"), nlohmann::json({0, 2}));

    const auto i = run_cli({"inspect", "--model", model.string()});
    ASSERT_EQ(i.exit_code, 0) << i.err;
    EXPECT_NE(i.out.find("window        5 on layers 0 2\n"), std::string::npos) << i.out;
    EXPECT_NE(i.out.find("scores        scale 0.25, soft-cap 5"), std::string::npos) << i.out;
    EXPECT_NE(i.out.find("final logit soft-cap 3"), std::string::npos) << i.out;

    // Longer than the window: the metrics cannot apply a window to some layers only; refused in
    // one line, no output folder.
    const auto l = run_cli({"analyze", "--model", model.string(), "--data", ids.string(), "--out",
                            (tmp / "long").string(), "--quiet", "--no-report"});
    EXPECT_NE(l.exit_code, 0);
    EXPECT_EQ(count_lines(l.err), 1) << l.err;
    EXPECT_NE(l.err.find("sliding window"), std::string::npos) << l.err;
    EXPECT_FALSE(fs::exists(tmp / "long"));
}

// Phi-3: plain 1/sqrt(d_head) scale, no soft-cap, window 10 on every layer; inspect prints the
// longrope scaling.
TEST(AttentionFacts, Phi3RunJsonRecordsWindowOnEveryLayer) {
    ScratchDir tmp;
    SINKSCOPE_REFERENCE("phi3", tmp.path());
    const fs::path model = tmp / "model";
    const auto r = run_cli({"analyze", "--model", model.string(), "--data",
                            (tmp / "model/golden/long/input_ids.npy").string(), "--out",
                            (tmp / "run").string(), "--quiet", "--no-report"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto rec = nlohmann::json::parse(read_file(tmp / "run/run.json"));
    const auto& a = rec.at("model").at("attention");
    EXPECT_DOUBLE_EQ(a.at("scale").get<double>(), 1.0 / std::sqrt(8.0));
    EXPECT_TRUE(a.at("softcap").is_null());
    EXPECT_TRUE(a.at("final_logit_softcap").is_null());
    EXPECT_EQ(a.at("sliding_window").get<int64_t>(), 10);
    EXPECT_EQ(a.at("window_layers"), nlohmann::json({0, 1}));

    const auto i = run_cli({"inspect", "--model", model.string()});
    ASSERT_EQ(i.exit_code, 0) << i.err;
    EXPECT_NE(i.out.find("rope_scaling  longrope (factor 4, original context 8"), std::string::npos)
        << i.out;
}

// Mistral's window (every layer) is recorded too.
TEST(AttentionFacts, MistralRunJsonRecordsItsWindow) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    ScratchDir tmp;
    const auto r = run_cli({"analyze", "--model", (shared / "zoo/mistral").string(), "--samples",
                            "2", "--out", (tmp / "run").string(), "--quiet", "--no-report"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto rec = nlohmann::json::parse(read_file(tmp / "run/run.json"));
    const auto& a = rec.at("model").at("attention");
    EXPECT_EQ(a.at("sliding_window").get<int64_t>(), 8);  // zoo/mistral/config.json
    EXPECT_EQ(a.at("window_layers"), nlohmann::json({0, 1, 2}));
    EXPECT_TRUE(a.at("softcap").is_null());
}
