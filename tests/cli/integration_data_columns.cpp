// Sampled inputs join back to their data: every per-input table and sinks.csv carry the input's
// row in the data file, run.json lists the rows, --keep-columns copies data columns into the
// per-input tables, and --group-by writes per-group means with intervals and a test between the
// groups, checked here against scipy on the per-input values the run wrote.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sinkscope/io/dataset.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace sinkscope;
using testutil::read_json;
using testutil::run_cli;

namespace {

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}
std::string cell(const io::Cell& c) {
    if (auto s = std::get_if<std::string>(&c)) return *s;
    if (auto d = std::get_if<double>(&c)) return io::format_number(*d);
    return std::to_string(std::get<int64_t>(c));
}
size_t column(const io::Table& t, const std::string& name) {
    const auto& c = t.columns();
    const auto it = std::find(c.begin(), c.end(), name);
    EXPECT_NE(it, c.end()) << "no column " << name;
    return size_t(it - c.begin());
}
// A CSV field, quoted when it needs to be.
std::string field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

struct Stem {
    std::vector<std::string> text, field, predictability;
};
Stem read_stem(const fs::path& shared) {
    const auto records =
        io::parse_csv(slurp(shared / "data/stem_sentences.csv"));  // header, then 811 rows
    Stem s;
    for (size_t r = 1; r < records.size(); ++r) {
        s.text.push_back(records[r][0]);
        s.predictability.push_back(records[r][3]);
        s.field.push_back(records[r][4]);
    }
    return s;
}

std::vector<std::string> analyze_args(const fs::path& shared, const fs::path& data,
                                      const fs::path& out) {
    return {"analyze",
            (std::string("--model")),
            (shared / "models/tinystories656K").string(),
            "--data",
            data.string(),
            "--max-tokens",
            "16",
            "--per-input",
            "--no-report",
            "--progress",
            "never",
            "--out",
            out.string()};
}

}  // namespace

// A seeded subset of a CSV whose rows 2 and 5 have no text (so the sample index is not the row):
// each per-input line's `row` is a data row whose `tag` (kept with --keep-columns) names that row,
// run.json lists the rows in input order, sinks.csv carries them too, and analysing exactly those
// rows of the file, in order and without sampling, gives the same per-input values.
TEST(CliDataColumns, SampledRowsJoinBackToTheData) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const Stem stem = read_stem(shared);
    std::string csv = "tag,text,field\n";
    for (int r = 0; r < 14; ++r)
        csv += "r" + std::to_string(r) + "," + (r == 2 || r == 5 ? "" : field(stem.text[r])) + "," +
               stem.field[r] + "\n";
    testutil::write_text(tmp / "data.csv", csv);
    auto args = analyze_args(shared, tmp / "data.csv", tmp / "sampled");
    for (const char* x :
         {"--samples", "5", "--seed", "7", "--analyses", "entropy", "--keep-columns", "tag,field"})
        args.push_back(x);
    const auto r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;

    const json rec = read_json(tmp / "sampled/run.json");
    const std::vector<int64_t> rows = rec["data"]["rows"].get<std::vector<int64_t>>();
    ASSERT_EQ(rows.size(), 5u);
    EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));  // data order
    for (int64_t row : rows) EXPECT_TRUE(row != 2 && row != 5 && row >= 0 && row < 14) << row;
    EXPECT_EQ(rec["data"]["keep_columns"], json({"tag", "field"}));

    const io::Table t = io::Table::read_csv(tmp / "sampled/entropy_per_input.csv");
    const std::vector<std::string> want = {"model", "checkpoint", "input",  "row",
                                           "layer", "head",       "metric", "param",
                                           "value", "weight",     "tag",    "field"};
    ASSERT_EQ(t.columns(), want);
    std::set<int64_t> seen;
    for (const auto& line : t.rows()) {
        const auto input = size_t(std::stoll(cell(line[2])));
        const int64_t row = std::stoll(cell(line[3]));
        ASSERT_LT(input, rows.size());
        EXPECT_EQ(row, rows[input]);
        EXPECT_EQ(cell(line[10]), "r" + std::to_string(row));
        EXPECT_EQ(cell(line[11]), stem.field[size_t(row)]);
        seen.insert(row);
    }
    EXPECT_EQ(seen, std::set<int64_t>(rows.begin(), rows.end()));
    const io::Table sinks = io::Table::read_csv(tmp / "sampled/sinks.csv");
    ASSERT_EQ(sinks.columns(),
              (std::vector<std::string>{"input", "row", "layer", "sink_position"}));
    for (const auto& line : sinks.rows())
        EXPECT_EQ(std::stoll(cell(line[1])), rows[size_t(std::stoll(cell(line[0])))]);

    // Those rows alone, in order: the same inputs, so the same values.
    std::string sub = "text\n";
    for (int64_t row : rows) sub += field(stem.text[size_t(row)]) + "\n";
    testutil::write_text(tmp / "sub.csv", sub);
    auto again = analyze_args(shared, tmp / "sub.csv", tmp / "sub");
    for (const char* x : {"--analyses", "entropy"}) again.push_back(x);
    ASSERT_EQ(run_cli(again).exit_code, 0);
    const io::Table u = io::Table::read_csv(tmp / "sub/entropy_per_input.csv");
    ASSERT_EQ(u.size(), t.size());
    for (size_t i = 0; i < t.size(); ++i)
        for (const char* c : {"input", "layer", "head", "metric", "param", "value", "weight"})
            EXPECT_EQ(cell(t.rows()[i][column(t, c)]), cell(u.rows()[i][column(u, c)]))
                << i << " " << c;
    // Without --keep-columns the row is still there; the row of an unsampled run is the record.
    EXPECT_EQ(read_json(tmp / "sub/run.json")["data"]["rows"], json({0, 1, 2, 3, 4}));
}

// --keep-columns on JSONL takes the objects' fields; a column the file lacks, or a file without
// columns, is one error line naming the file and the column, and nothing is written.
TEST(CliDataColumns, KeptColumnsOfJsonlAndUnknownNames) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    testutil::write_text(tmp / "a.jsonl",
                         "{\"text\": \"Once upon a time there was a cat.\", \"topic\": \"cats\", "
                         "\"score\": 0.5}\n\n{\"text\": \"The dog ran to the park and played.\", "
                         "\"topic\": \"dogs\", \"score\": 2}\n");
    auto args = analyze_args(shared, tmp / "a.jsonl", tmp / "ok");
    for (const char* x : {"--analyses", "entropy", "--keep-columns", "score,topic"})
        args.push_back(x);
    const auto r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const io::Table t = io::Table::read_csv(tmp / "ok/entropy_per_input.csv");
    ASSERT_FALSE(t.empty());
    for (const auto& line : t.rows()) {
        const bool first = cell(line[column(t, "input")]) == "0";
        EXPECT_EQ(cell(line[column(t, "row")]), first ? "0" : "2");  // the blank line counts
        EXPECT_EQ(cell(line[column(t, "topic")]), first ? "cats" : "dogs");
        EXPECT_EQ(cell(line[column(t, "score")]), first ? "0.5" : "2");
    }

    testutil::write_text(tmp / "a.csv", "text,field\nA cat sat on the mat today.,bio\n");
    testutil::write_text(tmp / "a.txt", "A cat sat on the mat today.\n");
    struct Case {
        fs::path data;
        std::string keep, needle;
    };
    for (const Case& c :
         {Case{tmp / "a.csv", "field,nosuch",
               (tmp / "a.csv").string() + ": no column named "
                                          "'nosuch'"},
          Case{tmp / "a.jsonl", "topic,nosuch",
               (tmp / "a.jsonl").string() + ": line 1: no field 'nosuch'"},
          Case{tmp / "a.txt", "field", (tmp / "a.txt").string() + ": --keep-columns needs a CSV"},
          Case{tmp / "a.csv", "field,field", "--keep-columns names 'field' twice"},
          Case{tmp / "a.csv", "value", "'value' is already a column of the per-input tables"}}) {
        SCOPED_TRACE(c.keep);
        auto bad = analyze_args(shared, c.data, tmp / "bad");
        for (const std::string& x : {std::string("--keep-columns"), c.keep}) bad.push_back(x);
        const auto e = run_cli(bad);
        EXPECT_NE(e.exit_code, 0);
        EXPECT_NE(e.err.find(c.needle), std::string::npos) << e.err;
        EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << e.err;
        EXPECT_FALSE(fs::exists(tmp / "bad"));
        EXPECT_FALSE(fs::exists(tmp / "bad.partial"));
    }
}

namespace {

// Checks groups.csv and group_tests.csv of a run against scipy on the run's own per-input
// tables: per (table, layer, head, metric, param) and group, the mean and
// stats.t.interval(level, n - 1, mean, sem) of the finite per-input values of the group's
// inputs; between groups stats.ttest_ind(equal_var=False) for two, stats.f_oneway for more.
// Exit 77 without scipy, 1 with a mismatch (printed), 0 otherwise.
constexpr const char* kCheckScript = R"py(
import csv, glob, math, os, sys
try:
    import numpy as np
    from scipy import stats
except ImportError:
    sys.exit(77)
run, column = sys.argv[1], sys.argv[2]
values = {}
for path in glob.glob(os.path.join(run, "*_per_input.csv")):
    table = os.path.basename(path)[: -len("_per_input.csv")]
    for r in csv.DictReader(open(path)):
        key = (table, int(r["layer"]), int(r["head"]), r["metric"], r["param"])
        v = float(r["value"])
        if math.isfinite(v):
            values.setdefault(key, {}).setdefault(r[column], []).append(v)
bad, checked = 0, 0
def near(a, b):
    a, b = float(a), float(b)
    if math.isnan(b):
        return math.isnan(a)
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))
def key_of(r):
    return (r["table"], int(r["layer"]), int(r["head"]), r["metric"], r["param"])
for r in csv.DictReader(open(os.path.join(run, "groups.csv"))):
    v = np.array(values[key_of(r)][r["group"]])
    m = np.mean(v)
    lo, hi = stats.t.interval(float(r["level"]), len(v) - 1, loc=m, scale=stats.sem(v))
    # scipy 1.10's t.ppf is off by up to ~3e-9 relative (test_statistics.cpp): the interval ends
    # are compared to 1e-8 of the half-width.
    def end(a, b):
        return abs(float(a) - b) <= 1e-8 * (hi - lo) / 2 + 1e-12 * max(1.0, abs(b))
    ok = int(r["n"]) == len(v) and near(r["mean"], m) and end(r["ci_lo"], lo) and end(r["ci_hi"], hi)
    ok = ok and near(r["sd"], np.std(v, ddof=1))
    if not ok:
        print("groups.csv", r, m, lo, hi); bad += 1
    checked += 1
n_tests = 0
for r in csv.DictReader(open(os.path.join(run, "group_tests.csv"))):
    groups = [np.array(g) for _, g in sorted(values[key_of(r)].items())]
    if len(groups) == 2:
        s, p = stats.ttest_ind(groups[0], groups[1], equal_var=False)
        want = "welch t"
    else:
        s, p = stats.f_oneway(*groups)
        want = "one-way anova F"
    ok = r["test"] == want and int(r["n_groups"]) == len(groups) and near(r["statistic"], s) and near(r["p"], p)
    if not ok:
        print("group_tests.csv", r, s, p); bad += 1
    n_tests += 1
print(checked, n_tests)
sys.exit(1 if bad or checked == 0 or n_tests == 0 else 0)
)py";

// Runs kCheckScript on a run folder: "" when it passed, the script's output otherwise; nullopt
// without Debian's Python with scipy.
std::optional<std::string> check_with_scipy(const fs::path& run, const std::string& column) {
    constexpr const char* kPython = "/usr/bin/python3";
    if (!fs::exists(kPython)) return std::nullopt;
    testutil::ScratchDir dir;
    testutil::write_text(dir / "check.py", kCheckScript);
    const std::string cmd = std::string(kPython) + " '" + (dir / "check.py").string() + "' '" +
                            run.string() + "' '" + column + "' > '" + (dir / "out.txt").string() +
                            "' 2>&1";
    const int status = std::system(cmd.c_str());
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) return std::nullopt;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? std::string()
                                                         : slurp(dir / "out.txt") + "(failed)";
}

}  // namespace

// --group-by field: groups.csv and group_tests.csv equal scipy on the per-input values, with
// four groups (one-way ANOVA) on a seeded subset of the STEM sentences and with two (Welch's
// t-test) on a file of two fields; run.json says how many inputs each group has.
TEST(CliDataColumns, GroupByMatchesScipy) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    auto four = analyze_args(shared, shared / "data/stem_sentences.csv", tmp / "four");
    for (const char* x :
         {"--samples", "24", "--seed", "2", "--analyses", "heads,entropy", "--group-by", "field"})
        four.push_back(x);
    const auto r = run_cli(four);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("groups by field:"), std::string::npos) << r.out;
    const json rec = read_json(tmp / "four/run.json");
    int64_t total = 0;
    for (const auto& [group, n] : rec["statistics"]["groups"]["inputs_per_group"].items())
        total += n.get<int64_t>();
    EXPECT_EQ(total, 24);
    EXPECT_EQ(rec["statistics"]["groups"]["inputs_per_group"].size(), 4u);

    const Stem stem = read_stem(shared);
    std::string csv = "text,field\n";
    for (size_t row = 0, n_physics = 0, n_medicine = 0; row < stem.text.size(); ++row) {
        size_t& n = stem.field[row] == "physics" ? n_physics : n_medicine;
        if ((stem.field[row] != "physics" && stem.field[row] != "medicine") || n == 7) continue;
        ++n;
        csv += field(stem.text[row]) + "," + stem.field[row] + "\n";
    }
    testutil::write_text(tmp / "two.csv", csv);
    auto two = analyze_args(shared, tmp / "two.csv", tmp / "two");
    for (const char* x : {"--analyses", "heads", "--group-by", "field"}) two.push_back(x);
    const auto t = run_cli(two);
    ASSERT_EQ(t.exit_code, 0) << t.err;

    for (const char* run : {"four", "two"}) {
        SCOPED_TRACE(run);
        const auto result = check_with_scipy(tmp / run, "field");
        if (!result) GTEST_SKIP() << "/usr/bin/python3 with numpy and scipy not found";
        EXPECT_EQ(*result, "");
    }
    const io::Table tests = io::Table::read_csv(tmp / "two/group_tests.csv");
    ASSERT_FALSE(tests.empty());
    EXPECT_EQ(cell(tests.rows()[0][column(tests, "test")]), "welch t");
}

// --group-by needs a data column: an attention file (metrics) has none, and is refused in one
// line naming the option.
TEST(CliDataColumns, GroupByWithoutDataIsRefused) {
    testutil::ScratchDir tmp;
    const auto r =
        run_cli({"metrics", "--example", "--group-by", "field", "--out", (tmp / "m").string()});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--group-by"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(tmp / "m"));
}
