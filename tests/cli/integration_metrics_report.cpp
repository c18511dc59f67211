// `sinkscope metrics` writes report.html like analyze (skipped with --no-report), and the page
// draws every figure in headless Chromium with the layout properties its driver checks (no empty
// panel, titled axes, integer layer ticks, no text outside a figure).
#include <gtest/gtest.h>

#include <cstdlib>

#include "sinkscope/core/output_dir.hpp"
#include "testing.hpp"

using namespace sinkscope;
namespace fs = std::filesystem;

TEST(MetricsReport, WrittenByDefaultAndSkippedOnRequest) {
    testutil::ScratchDir dir;
    auto r = testutil::run_cli({"metrics", "--example", "--out", (dir / "with").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const fs::path page = dir / "with" / "report.html";
    if (r.out.find("no Vega runtime") != std::string::npos) {
        if (std::getenv("CI")) FAIL() << "Vega runtime missing in CI";
        GTEST_SKIP() << "this build has no Vega runtime: " << r.out;
    }
    ASSERT_TRUE(fs::exists(page)) << r.out;
    EXPECT_NE(sinkscope::read_file(page).find("<meta name=\"generator\" content=\"sinkscope"),
              std::string::npos);

    r = testutil::run_cli(
        {"metrics", "--example", "--no-report", "--out", (dir / "without").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(dir / "without" / "heads.csv"));
    EXPECT_FALSE(fs::exists(dir / "without" / "report.html"));

    if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
        if (std::getenv("CI")) FAIL() << "chromium missing in CI";
        GTEST_SKIP() << "chromium not installed (scripts/install-deps.sh)";
    }
    testutil::expect_clean_report_layout(page, 10);  // every analysis of the example
}
