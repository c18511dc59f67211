// report.html assembly: self-contained (runtime inlined, no external URLs), escaped, and drawn
// without errors by headless Chromium.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/report/report.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::report;
using nlohmann::json;

namespace {

bool require_runtime() {
    if (have_vega_runtime()) return true;
    // CI installs the runtime through scripts/install-deps.sh; a missing one there is a failure.
    if (std::getenv("CI")) ADD_FAILURE() << "Vega runtime missing in CI";
    return false;
}

ReportContent sample_content() {
    ReportContent c;
    c.title = "test <report> & co";
    c.run = {{"sink_policy", "first"}, {"tool", {{"version", "0.1.0"}}}};
    c.notes.push_back("note with </script> inside");
    json cells = json::array(), lines = json::array(), pts = json::array();
    for (int l = 0; l < 3; ++l)
        for (int h = 0; h < 4; ++h)
            cells.push_back({{"layer", l}, {"head", h}, {"value", 0.1 * (l + h)}});
    for (double t : {0.001, 0.01, 0.1})
        lines.push_back({{"threshold", t}, {"density", t * 3}, {"layer", "0"}});
    for (int i = 0; i < 8; ++i)
        pts.push_back({{"x", i},
                       {"y", i * i},
                       {"cluster", std::to_string(i % 2)},
                       {"label", "h"},
                       {"matrix", i < 4 ? "dA" : "dA_perp"}});
    c.figures.push_back({"Sinks", "heat", "a heat map",
                         heatmap_spec(cells, "head", "layer", "value", {"head", "layer", "v"})});
    c.figures.push_back({"Graphs", "lines", "a line",
                         line_spec(lines, "threshold", "density", "layer",
                                   {"threshold", "density", "layer"}, true)});
    c.figures.push_back(
        {"Graphs", "bars", "bars", hbar_spec(lines, "layer", "density", {"density", "layer", ""})});
    c.figures.push_back({"MDS", "points", "scatter",
                         map_spec(pts, "x", "y", "cluster", "matrix", "label", {"x", "y", "c"})});
    return c;
}

}  // namespace

// The document inlines the runtime, escapes user text, and never closes a script early.
TEST(Report, SelfContainedAndEscaped) {
    if (!require_runtime()) GTEST_SKIP() << "Vega runtime not installed (scripts/install-deps.sh)";
    std::string html = render_html(sample_content());
    EXPECT_NE(html.find("test &lt;report&gt; &amp; co"), std::string::npos);
    EXPECT_EQ(html.find("note with </script>"), std::string::npos);
    // No resource is fetched from the network: no src/href to http(s).
    EXPECT_FALSE(std::regex_search(html, std::regex("(src|href)=\"https?:")));
    // Exactly the scripts we emit: 3 runtime + specs + driver.
    size_t n = 0;
    for (size_t p = 0; (p = html.find("</script>", p)) != std::string::npos; ++p) ++n;
    EXPECT_EQ(n, 5u);
}

// Headless Chromium draws every figure with no script or console error.
TEST(Report, RendersInHeadlessChromium) {
    if (!require_runtime()) GTEST_SKIP() << "Vega runtime not installed (scripts/install-deps.sh)";
    if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
        if (std::getenv("CI")) FAIL() << "chromium missing in CI";
        GTEST_SKIP() << "chromium not installed (scripts/install-deps.sh)";
    }
    testutil::ScratchDir tmp;
    write_file_atomic(tmp / "report.html", render_html(sample_content()));
    auto dom = testutil::render_in_chromium(tmp / "report.html", tmp / "shot.png");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(dom, m, std::regex("id=\"status\"[^>]*"))) << dom.substr(0, 2000);
    std::string status = m.str();
    EXPECT_NE(status.find("data-done=\"1\""), std::string::npos) << status;
    EXPECT_NE(status.find("data-figures=\"4\""), std::string::npos) << status;
    EXPECT_NE(status.find("data-drawn=\"4\""), std::string::npos) << status;
    EXPECT_NE(status.find("data-errors=\"0\""), std::string::npos) << status;
    EXPECT_TRUE(std::filesystem::exists(tmp / "shot.png"));
}

namespace {

bool have_chromium() {
    if (std::system("command -v chromium >/dev/null 2>&1") == 0) return true;
    if (std::getenv("CI")) ADD_FAILURE() << "chromium missing in CI";
    return false;
}

std::string render_dom(const ReportContent& c, const testutil::ScratchDir& tmp) {
    write_file_atomic(tmp / "report.html", render_html(c));
    return testutil::render_in_chromium(tmp / "report.html");
}

json titled(const char* x, const char* y) {
    return {{"x", {{"field", "x"}, {"type", "quantitative"}, {"title", x}}},
            {"y", {{"field", "y"}, {"type", "quantitative"}, {"title", y}}}};
}

}  // namespace

// The layout properties the page checks on its own SVG (html.cpp driver) hold for the figure
// builders: no empty panel, titled axes, integer layer ticks, no text outside a figure.
TEST(Report, LayoutPropertiesHold) {
    if (!require_runtime()) GTEST_SKIP() << "Vega runtime not installed (scripts/install-deps.sh)";
    if (!have_chromium()) GTEST_SKIP() << "chromium not installed (scripts/install-deps.sh)";
    testutil::ScratchDir tmp;
    write_file_atomic(tmp / "report.html", render_html(sample_content()));
    testutil::expect_clean_report_layout(tmp / "report.html", 1);
}

// Each check fails on a figure made to break it (and only that check): a panel whose only
// points have no y value, an axis without a title, a layer axis with Vega's default ticks over
// [0, 1] (0, 0.1, ...), a figure without room for its axis labels (autosize none, padding 0),
// two layers joined by a line, and two texts at one place.
TEST(Report, EachLayoutCheckCanFail) {
    if (!require_runtime()) GTEST_SKIP() << "Vega runtime not installed (scripts/install-deps.sh)";
    if (!have_chromium()) GTEST_SKIP() << "chromium not installed (scripts/install-deps.sh)";
    const json schema = "https://vega.github.io/schema/vega-lite/v6.json";
    const json pts = json::array({{{"x", 0}, {"y", 1}}, {{"x", 1}, {"y", 2}}});
    const json empty = {{"$schema", schema},
                        {"data", {{"values", json::array({{{"x", 1}, {"y", nullptr}}})}}},
                        {"mark", "point"},
                        {"encoding", titled("x", "y")}};
    json untitled = {{"$schema", schema},
                     {"data", {{"values", pts}}},
                     {"mark", "point"},
                     {"encoding", titled("x", "y")}};
    untitled["encoding"]["x"]["title"] = nullptr;
    json layers = {{"$schema", schema},
                   {"data", {{"values", pts}}},
                   {"mark", "point"},
                   {"encoding", titled("layer", "y")}};
    // Layers 0 and 1 (integer ticks) joined by a line.
    json joined = layers;
    joined["mark"] = "line";
    joined["encoding"]["x"]["axis"] = {{"values", {0, 1}}, {"format", "d"}};
    // Two labels printed at the same place.
    json overlapping = {{"$schema", schema},
                        {"data",
                         {{"values", json::array({{{"x", 0}, {"y", 1}, {"t", "first"}},
                                                  {{"x", 0}, {"y", 1}, {"t", "second"}}})}}},
                        {"mark", "text"},
                        {"encoding", titled("x", "y")}};
    overlapping["encoding"]["text"] = {{"field", "t"}};
    json clipped = {{"$schema", schema},  {"data", {{"values", pts}}},
                    {"mark", "point"},    {"encoding", titled("x", "y")},
                    {"autosize", "none"}, {"padding", 0},
                    {"width", 100},       {"height", 100}};
    const std::vector<std::pair<std::string, json>> cases = {
        {"empty-panels", empty}, {"untitled-axes", untitled},
        {"layer-ticks", layers}, {"clipped-labels", clipped},
        {"layer-lines", joined}, {"overlapping-labels", overlapping}};
    for (const auto& [attribute, spec] : cases) {
        ReportContent c;
        c.title = attribute;
        c.figures.push_back({"s", attribute, "made to fail one check", spec});
        testutil::ScratchDir tmp;
        const std::string dom = render_dom(c, tmp);
        ASSERT_EQ(testutil::status_attribute(dom, "drawn"), "1") << attribute;
        for (const auto& [other, unused] : cases) {
            const std::string v = testutil::status_attribute(dom, other);
            if (other == attribute)
                EXPECT_NE(v, "0") << attribute << " not detected";
            else
                EXPECT_EQ(v, "0") << other << " reported on the " << attribute << " figure";
        }
    }
}

// Found by fuzz_report: a hand-edited run folder (heads.csv without a layer column, a NaN layer,
// a cell that is not UTF-8, run.json fields of the wrong type) still gives a report, with the
// bad cell replaced (U+FFFD) rather than an exception from the JSON writer. Collecting needs no
// Vega runtime and is checked in every build; rendering is checked where the runtime is.
TEST(Report, HandEditedRunFolder) {
    testutil::ScratchDir tmp;
    const std::filesystem::path d = tmp.path();
    auto write = [&](const char* name, const std::string& text) {
        std::ofstream(d / name, std::ios::binary) << text;
    };
    write("heads.csv",
          "model,layer,head,metric,value\nm,nan,0,entropy,1.5\nm,0,0,sink_mass,0.5\n"
          "m\xd4,1,0,sink_mass,0.25\n");
    write("run.json", R"({"tool": {"version": 3}, "started_utc": ["x"]})");
    std::vector<ReportContent> collected;
    ASSERT_NO_THROW(collected.push_back(collect_report(d)));
    write("heads.csv", "model,head,metric,value\nm,0,sink_mass,0.5\n");
    ASSERT_NO_THROW(collected.push_back(collect_report(d)));
    // A compat-mode field that is not a string (the fuzzer's object) is no compat mode.
    write("run.json", R"({"p2": {"mode": {"a": 1}}})");
    ASSERT_NO_THROW(collected.push_back(collect_report(d)));
    write("run.json", R"({"ref_frame": {"mode": {"a": 1}}})");
    ASSERT_NO_THROW(collected.push_back(collect_report(d)));
    // The compat note, from run.json's ref_frame key and from the p2 key of earlier runs.
    write("run.json", R"({"ref_frame": {"mode": "principled"}})");
    const ReportContent principled = collect_report(d);
    EXPECT_FALSE(std::any_of(principled.notes.begin(), principled.notes.end(),
                             [](const std::string& n) { return n.find("ruscio2025") != n.npos; }));
    write("run.json", R"({"p2": {"mode": "ruscio2025"}})");
    const ReportContent compat = collect_report(d);
    EXPECT_TRUE(std::any_of(compat.notes.begin(), compat.notes.end(), [](const std::string& n) {
        return n.find("ruscio2025") != std::string::npos;
    }));
    write("run.json", R"({"ref_frame": {"mode": "ruscio2025"}})");
    const ReportContent compat_now = collect_report(d);
    EXPECT_TRUE(std::any_of(compat_now.notes.begin(), compat_now.notes.end(),
                            [](const std::string& n) { return n.find("ruscio2025") != n.npos; }));
    if (!require_runtime())
        GTEST_SKIP() << "Vega runtime not installed (scripts/install-deps.sh): the collected "
                        "content was checked, its rendering was not";
    const std::string html = render_html(collected[0]);
    EXPECT_NE(html.find("m\xef\xbf\xbd"), std::string::npos);  // U+FFFD for the bad byte
    for (const ReportContent& c : collected) EXPECT_NO_THROW((void)render_html(c));
    EXPECT_NO_THROW((void)render_html(compat));
}
