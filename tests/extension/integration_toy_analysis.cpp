// The toy analysis of toy_analysis.cpp, registered from the test tree alone, reaches everything a
// built-in analysis reaches: --help (the analyses list and its option), option checking, its
// table, run.json's options, the report (its figure and the conventions), and the Python
// keywords of the analysis bindings.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sinkscope/io/table.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;

namespace {

testutil::CliResult run_toy(const std::vector<std::string>& args) {
    std::vector<std::string> argv{SINKSCOPE_TOY_EXE};
    argv.insert(argv.end(), args.begin(), args.end());
    return testutil::run_program(argv);
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::vector<double> toy_values(const fs::path& dir) {
    const io::Table t = io::Table::read_csv(dir / "toy.csv");
    std::vector<double> v;
    for (const auto& row : t.rows()) v.push_back(std::get<double>(row.back()));
    return v;
}

}  // namespace

TEST(ToyAnalysis, AppearsInHelpWithItsOption) {
    const auto r = run_toy({"metrics", "--help"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("--toy-scale FLOAT=2"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Factor of the toy analysis' values"), std::string::npos);
    EXPECT_NE(r.out.find("statistics"), std::string::npos);
    EXPECT_NE(r.out.find(", toy, statistics"), std::string::npos)
        << "the toy runs before statistics";
}

TEST(ToyAnalysis, WritesItsTableRecordAndFigure) {
    testutil::ScratchDir tmp;
    const fs::path one = tmp / "one", two = tmp / "two";
    auto r = run_toy(
        {"metrics", "--example", "--analyses", "toy", "--toy-scale", "1", "--out", one.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run_toy({"metrics", "--example", "--analyses", "toy", "--out", two.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;

    // The table: one value per layer of the example (4 layers), a mean attention (in (0, 1]),
    // scaled by the option; doubling is exact in floating point, so the default (2) gives
    // exactly twice the values of --toy-scale 1.
    const std::vector<double> v1 = toy_values(one), v2 = toy_values(two);
    ASSERT_EQ(v1.size(), 4u);
    ASSERT_EQ(v2.size(), v1.size());
    for (size_t l = 0; l < v1.size(); ++l) {
        EXPECT_GT(v1[l], 0);
        EXPECT_LE(v1[l], 1);
        EXPECT_EQ(v2[l], 2 * v1[l]) << "layer " << l;
    }

    // run.json records the option (its value, and the default when not given).
    const auto j1 = nlohmann::json::parse(slurp(one / "run.json"));
    const auto j2 = nlohmann::json::parse(slurp(two / "run.json"));
    EXPECT_EQ(j1["options"]["toy_scale"], 1.0);
    EXPECT_EQ(j2["options"]["toy_scale"], 2.0);
    EXPECT_EQ(j1["options"]["analyses"], nlohmann::json::array({"toy"}));

    // The report: the toy's figure (its registered section) and the option among the
    // conventions.
    const std::string html = slurp(one / "report.html");
    EXPECT_NE(html.find("Toy: scaled first-key attention per layer"), std::string::npos);
    EXPECT_NE(html.find("options.toy_scale"), std::string::npos);
}

TEST(ToyAnalysis, ItsCheckRejectsABadValue) {
    testutil::ScratchDir tmp;
    const auto r = run_toy({"metrics", "--example", "--analyses", "toy", "--toy-scale", "0",
                            "--out", (tmp / "run").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--toy-scale must be a number > 0"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(tmp / "run"));
}

TEST(ToyAnalysis, IsAPythonKeyword) {
#ifndef SINKSCOPE_TOY_PYTHON_DIR
    GTEST_SKIP() << "the Python bindings are not built";
#else
    const char* script =
        "import _sinkscope_toy as s\n"
        "o = s.AnalysisOptions()\n"
        "assert o.toy_scale == 2.0, o.toy_scale\n"
        "o.toy_scale = 3.5\n"
        "d = o.to_dict()\n"
        "assert d['toy_scale'] == 3.5, d\n"
        "assert 'toy' in [n[0] for n in s.analysis_names()]\n"
        "try:\n"
        "    o.toy_scale = 'big'\n"
        "    raise SystemExit('a string was taken')\n"
        "except TypeError:\n"
        "    pass\n"
        "print('ok')\n";
    const auto r =
        testutil::run_program({"env", std::string("PYTHONPATH=") + SINKSCOPE_TOY_PYTHON_DIR,
                               "/usr/bin/python3", "-c", script});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "ok\n") << r.err;
#endif
}
