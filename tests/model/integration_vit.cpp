// sinkscope inspect / dump / analyze on the zoo ViT with images as data: PNGs made from the golden
// image.npy (8-bit levels) and .npy stacks give the golden attention; bad images are one-line
// errors with no output.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/image.hpp"
#include "sinkscope/io/npy.hpp"
#include "testing.hpp"
#include "zoo_golden.hpp"

using namespace sinkscope;
using testutil::run_cli;
namespace fs = std::filesystem;

namespace {

const char* const kInputs[] = {"img0", "img1", "img2"};

int count_lines(const std::string& s) {
    return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

// Writes <dir>/<input>.png for each golden image: round(image.npy * 255) as 8-bit RGB.
void write_golden_pngs(const fs::path& vit, const fs::path& dir) {
    fs::create_directories(dir);
    for (const char* name : kInputs) {
        io::Image img = io::read_npy_images(vit / "golden" / name / "image.npy").at(0);
        for (float& v : img.data) v = std::round(v * 255.0f);
        img.range = io::Image::Range::Levels;
        io::write_png(dir / (std::string(name) + ".png"), img);
    }
}

// Max |a - b| between attention.npy's sample n and a golden attentions.npy [L, H, T, T].
double attention_diff(const io::NpyArray& got, int64_t n, const fs::path& golden) {
    const std::vector<double> g = got.to_f64();
    const std::vector<double> want = io::read_npy(golden).to_f64();
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, std::abs(g[size_t(n) * want.size() + i] - want[i]));
    return worst;
}

}  // namespace

// inspect names the architecture, image geometry, labels, bidirectional attention and the
// exact stored parameter count (114,698 in the zoo manifest).
TEST(CliVit, Inspect) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const auto r = run_cli({"inspect", "--model", (shared / "zoo/vit").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* want : {"architecture  vit", "image_size    32", "patch_size    8",
                             "n_tokens      17 (CLS + 16 patches)", "attention     bidirectional",
                             "labels        10: airplane automobile", "parameters    114698",
                             "tokenizer     none (images)", "ln_final.hook_normalized"})
        EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
}

// dump on a directory of PNGs writes attention (N, L, H, T, T) = (3, 3, 4, 17, 17) equal to the
// golden attentions (up to float32 summation order), lengths 17 and no token ids; a .npy stack
// gives the same attention.
TEST(CliVit, DumpImagesMatchesGolden) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path vit = shared / "zoo/vit";
    testutil::ScratchDir tmp;
    write_golden_pngs(vit, tmp / "pngs");
    const auto r =
        run_cli({"dump", "--model", vit.string(), "--data", (tmp / "pngs").string(), "--hooks",
                 "blocks.*.attn.hook_pattern", "--out", (tmp / "out").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const io::NpyArray a = io::read_npy(tmp / "out/attention.npy");
    EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 3, 4, 17, 17}));
    // the goldens are float32 too: two float32 evaluations (zoo_tolerances)
    const sinkscope::model::ModelConfig c = sinkscope::model::config_from_hf_dir(vit);
    auto tol = [&](int64_t n) {
        return testutil::zoo_tolerances(c, vit / "golden" / kInputs[n]).attention;
    };
    for (int64_t n = 0; n < 3; ++n)
        EXPECT_ERROR_WITHIN(attention_diff(a, n, vit / "golden" / kInputs[n] / "attentions.npy"),
                            tol(n))
            << n;
    EXPECT_EQ(io::read_npy(tmp / "out/lengths.npy").to_i64(), (std::vector<int64_t>{17, 17, 17}));
    EXPECT_FALSE(fs::exists(tmp / "out/tokens.npy"));

    std::vector<float> stack;
    for (const char* name : kInputs) {
        const auto v = io::read_npy(vit / "golden" / name / "image.npy").to_f64();
        stack.insert(stack.end(), v.begin(), v.end());
    }
    io::write_npy(tmp / "stack.npy", io::make_npy_f32({3, 3, 32, 32}, stack));
    const auto r2 = run_cli({"dump", "--model", vit.string(), "--data",
                             (tmp / "stack.npy").string(), "--out", (tmp / "out2").string()});
    ASSERT_EQ(r2.exit_code, 0) << r2.err;
    const io::NpyArray b = io::read_npy(tmp / "out2/attention.npy");
    for (int64_t n = 0; n < 3; ++n)
        EXPECT_ERROR_WITHIN(attention_diff(b, n, vit / "golden" / kInputs[n] / "attentions.npy"),
                            tol(n))
            << n;
    // one PNG file is one sample
    const auto r3 = run_cli({"dump", "--model", vit.string(), "--data",
                             (tmp / "pngs/img1.png").string(), "--out", (tmp / "out3").string()});
    ASSERT_EQ(r3.exit_code, 0) << r3.err;
    EXPECT_ERROR_WITHIN(attention_diff(io::read_npy(tmp / "out3/attention.npy"), 0,
                                       vit / "golden/img1/attentions.npy"),
                        tol(1));
}

// analyze on a directory of PNGs completes with images as data: sink policy auto resolves to
// argmax (bidirectional, spec section 0), no tokenizer, 17 tokens per image.
TEST(CliVit, AnalyzeImages) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path vit = shared / "zoo/vit";
    testutil::ScratchDir tmp;
    write_golden_pngs(vit, tmp / "pngs");
    const auto r = run_cli({"analyze", "--model", vit.string(), "--data", (tmp / "pngs").string(),
                            "--out", (tmp / "run").string(), "--quiet", "--no-report", "--analyses",
                            "compositional,heads,entropy"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto run = nlohmann::json::parse(read_file(tmp / "run/run.json"));
    EXPECT_EQ(run["sink_policy"]["resolved"], "argmax") << run["sink_policy"];
    EXPECT_EQ(run["data"]["kind"], "images");
    EXPECT_EQ(run["data"]["n_samples"], 3);
    EXPECT_EQ(run["data"]["n_tokens"], 3 * 17);
    EXPECT_EQ(run["tokenizer"], "none (images)");
    EXPECT_TRUE(fs::exists(tmp / "run/sinks.csv"));
}

// A corrupt PNG among the images: exit 3, one stderr line naming the file, no output folder
// (dump and analyze).
TEST(CliVit, CorruptImageIsOneLineError) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path vit = shared / "zoo/vit";
    testutil::ScratchDir tmp;
    write_golden_pngs(vit, tmp / "pngs");
    const std::string good = read_file(tmp / "pngs/img1.png");
    std::ofstream(tmp / "pngs/img1.png", std::ios::binary) << good.substr(0, good.size() / 2);
    const auto d = run_cli({"dump", "--model", vit.string(), "--data", (tmp / "pngs").string(),
                            "--out", (tmp / "out").string()});
    EXPECT_EQ(d.exit_code, 3) << d.err;
    EXPECT_EQ(count_lines(d.err), 1) << d.err;
    EXPECT_NE(d.err.find("img1.png"), std::string::npos) << d.err;
    EXPECT_FALSE(fs::exists(tmp / "out"));
    const auto a = run_cli({"analyze", "--model", vit.string(), "--data", (tmp / "pngs").string(),
                            "--out", (tmp / "run").string(), "--quiet", "--no-report"});
    EXPECT_EQ(a.exit_code, 3) << a.err;
    EXPECT_EQ(count_lines(a.err), 1) << a.err;
    EXPECT_NE(a.err.find("img1.png"), std::string::npos) << a.err;
    EXPECT_FALSE(fs::exists(tmp / "run"));
}
