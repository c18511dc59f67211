// Per-input values and the statistics analysis end to end on `sinkscope metrics --example`:
// the per-input tables aggregate to the summary tables (exactly where the summary is a plain
// mean; to the rounding of a reordered sum where it is weighted by rows), the correlations and
// paired tests equal scipy.stats on the same per-input values, and the bootstrap is seeded.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"
#include "tolerance.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;

namespace {

double num(const io::Cell& c) {
    if (auto d = std::get_if<double>(&c)) return *d;
    if (auto s = std::get_if<std::string>(&c)) {
        if (*s == "nan") return std::nan("");
        if (*s == "inf") return INFINITY;
        if (*s == "-inf") return -INFINITY;
        if (s->empty()) return std::nan("");
    }
    ADD_FAILURE() << "not a number";
    return 0;
}
std::string str(const io::Cell& c) {
    if (auto s = std::get_if<std::string>(&c)) return *s;
    return io::format_number(std::get<double>(c));
}
size_t col(const io::Table& t, const std::string& name) {
    const auto& c = t.columns();
    const auto it = std::find(c.begin(), c.end(), name);
    EXPECT_NE(it, c.end()) << name;
    return size_t(it - c.begin());
}

using Key = std::tuple<int64_t, int64_t, std::string, std::string>;  // layer, head, metric, param

// Per-input rows grouped by key, in input order: (value, weight).
std::map<Key, std::vector<std::pair<double, double>>> per_input(const fs::path& file,
                                                                const char* param_column) {
    const io::Table t = io::Table::read_csv(file);
    std::map<Key, std::vector<std::pair<double, double>>> out;
    for (const auto& r : t.rows())
        out[{int64_t(num(r[col(t, "layer")])), int64_t(num(r[col(t, "head")])),
             str(r[col(t, "metric")]), str(r[col(t, param_column)])}]
            .emplace_back(num(r[col(t, "value")]), num(r[col(t, "weight")]));
    return out;
}

// `sinkscope metrics` into a scratch folder: on the built-in example plus `extra`, or (no
// example) on the inputs `extra` names.
struct MetricsRun {
    testutil::ScratchDir dir;
    fs::path out;
    explicit MetricsRun(const std::vector<std::string>& extra, bool example = true) {
        out = dir / "run";
        std::vector<std::string> args = {"metrics", "--out", out.string()};
        if (example) args.push_back("--example");
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = testutil::run_cli(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
    }
};

}  // namespace

// Section 8 tables keep sum and count of the finite per-input values in input order, so their
// value is exactly the per-input mean computed the same way; heads.csv is the row-weighted mean,
// equal to sum(mean_i n_i) / sum(n_i) up to the rounding of summing R rows in another grouping:
// relative gamma_{R + 2N + 2} for non-negative values.
TEST(PerInput, AggregatesToTheSummaryTables) {
    // The example's inputs cut to different lengths, so heads use different numbers of rows per
    // input and the row weights of heads.csv matter (equal weights would hide a wrong weight).
    MetricsRun example({});
    const fs::path lengths = example.dir / "lengths.npy";
    io::write_npy(lengths, io::make_npy_i64({8}, {16, 12, 9, 16, 5, 14, 11, 7}));
    MetricsRun run({"--attention", (example.out / "attention.npy").string(), "--lengths",
                    lengths.string(), "--per-input"},
                   false);
    for (const char* table : {"graphs", "kl", "entropy", "spectra", "topology"}) {
        const auto values = per_input(run.out / (std::string(table) + "_per_input.csv"), "param");
        const io::Table summary = io::Table::read_csv(run.out / (std::string(table) + ".csv"));
        size_t checked = 0;
        for (const auto& r : summary.rows()) {
            const Key k{int64_t(num(r[col(summary, "layer")])),
                        int64_t(num(r[col(summary, "head")])), str(r[col(summary, "metric")]),
                        str(r[col(summary, "param")])};
            const auto it = values.find(k);
            if (it == values.end()) continue;  // derived at the end (effective, consistency)
            double sum = 0;
            int64_t n = 0;
            for (const auto& [v, w] : it->second)
                if (std::isfinite(v)) sum += v, ++n;
            EXPECT_EQ(int64_t(num(r[col(summary, "n")])), n) << table;
            const double mean = n > 0 ? sum / double(n) : std::nan("");
            const double value = num(r[col(summary, "value")]);
            if (std::isnan(mean))
                EXPECT_TRUE(std::isnan(value));
            else
                EXPECT_EQ(value, mean) << table << " " << std::get<2>(k);
            ++checked;
        }
        EXPECT_GT(checked, 0u) << table;
    }
    const auto heads = per_input(run.out / "heads_per_input.csv", "param");
    const io::Table summary = io::Table::read_csv(run.out / "heads.csv");
    size_t checked = 0;
    for (const auto& r : summary.rows()) {
        const Key k{int64_t(num(r[col(summary, "layer")])), int64_t(num(r[col(summary, "head")])),
                    str(r[col(summary, "metric")]), ""};
        const auto it = heads.find(k);
        if (it == heads.end()) continue;  // n_rows
        double sw = 0, swv = 0;
        for (const auto& [v, w] : it->second) sw += w, swv += v * w;
        const double rows = sw, inputs = double(it->second.size());
        EXPECT_REL_WITHIN(num(r[col(summary, "value")]), swv / sw,
                          testutil::gamma_k(rows + 2 * inputs + 2, testutil::kU64));
        ++checked;
    }
    EXPECT_EQ(checked, 4u * 4u * 7u);  // 16 heads x 7 per-row metrics
}

// correlations.csv and paired_tests.csv against scipy.stats on the per-input values.
TEST(Statistics, EqualScipyOnThePerInputValues) {
    MetricsRun run({"--per-input"});
    testutil::ScratchDir tmp;
    const fs::path script = tmp / "check.py";
    std::ofstream(script) << R"(
import csv, sys, math
try:
    import numpy as np
    from scipy import stats
except ImportError:
    sys.exit(77)
run = sys.argv[1]
def per_input(name):
    out = {}
    for r in csv.DictReader(open(f"{run}/{name}_per_input.csv")):
        out.setdefault((r["layer"], r["head"], r["metric"], r["param"]), {})[int(r["input"])] = float(r["value"])
    return out
def pairs(a, b):
    keys = [i for i in a if i in b and math.isfinite(a[i]) and math.isfinite(b[i])]
    return [a[i] for i in keys], [b[i] for i in keys]
g, kl = per_input("graphs"), per_input("kl")
worst = 0.0
n = 0
near_constant = 0
for r in csv.DictReader(open(f"{run}/correlations.csv")):
    xm, ym = r["x"].split(".")[1], r["y"].split(".")[1]
    x, y = pairs(g[(r["layer"], "-1", xm, r["param"])], g[(r["layer"], "-1", ym, r["param"])])
    res = (stats.pearsonr if r["method"] == "pearson" else stats.spearmanr)(x, y)
    # scipy's "nearly constant" test; such series get NaN in sinkscope (rounding noise only)
    near = lambda v: len(v) == 0 or np.linalg.norm(np.asarray(v) - np.mean(v)) < 1e-13 * abs(np.mean(v))
    if near(x) or near(y):
        res = (math.nan, math.nan)
        near_constant += 1
    for mine, ref in ((float(r["r"]), res[0]), (float(r["p"]), res[1])):
        if math.isnan(ref): ok = math.isnan(mine); d = 0 if ok else 1
        else: d = abs(mine - ref)
        worst = max(worst, d)
    n += 1
for r in csv.DictReader(open(f"{run}/paired_tests.csv")):
    x, y = pairs(kl[(r["layer"], "-1", "kl_before", r["param"])], kl[(r["layer"], "-1", "kl_after", r["param"])])
    t, p = stats.ttest_rel(x, y)
    worst = max(worst, abs(float(r["statistic"]) - t) / max(1.0, abs(t)), abs(float(r["p"]) - p))
    n += 1
print(n, worst, near_constant)
)";
    const fs::path result = tmp / "result.txt";
    // stderr apart: scipy warns about constant inputs (their r is NaN on both sides).
    const fs::path errors = tmp / "stderr.txt";
    const int rc = std::system(("/usr/bin/python3 " + script.string() + " " + run.out.string() +
                                " > " + result.string() + " 2> " + errors.string())
                                   .c_str());
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77)
        GTEST_SKIP() << "/usr/bin/python3 with scipy not found (Debian: python3-scipy)";
    std::ifstream in(result);
    int n = 0, near_constant = 0;
    double worst = 1;
    in >> n >> worst >> near_constant;
    ASSERT_EQ(WEXITSTATUS(rc), 0) << std::ifstream(errors).rdbuf();
    // 4 layers x 7 thresholds x 2 pairs x 2 methods, and 4 layers x 3 percentiles of KL.
    EXPECT_EQ(n, 4 * 7 * 2 * 2 + 4 * 3);
    EXPECT_LE(worst, 1e-10) << "largest difference from scipy over " << n << " rows";
    // The test compares real correlations too, not only NaN against NaN.
    EXPECT_LT(near_constant, n / 2) << "rows with a (nearly) constant series";
}

// The bootstrap is seeded (same seed, same file), brackets its estimate, and the seed is recorded.
TEST(Statistics, BootstrapIsSeeded) {
    MetricsRun a({"--bootstrap", "200", "--seed", "5"}), b({"--bootstrap", "200", "--seed", "5"}),
        c({"--bootstrap", "200", "--seed", "6"});
    std::ifstream fa(a.out / "bootstrap.csv"), fb(b.out / "bootstrap.csv"),
        fc(c.out / "bootstrap.csv");
    std::stringstream sa, sb, sc;
    sa << fa.rdbuf();
    sb << fb.rdbuf();
    sc << fc.rdbuf();
    EXPECT_EQ(sa.str(), sb.str());
    EXPECT_NE(sa.str(), sc.str());
    const io::Table t = io::Table::read_csv(a.out / "bootstrap.csv");
    ASSERT_GT(t.size(), 0u);
    for (const auto& r : t.rows()) {
        const double lo = num(r[col(t, "ci_lo")]), hi = num(r[col(t, "ci_hi")]),
                     est = num(r[col(t, "estimate")]);
        if (std::isnan(est)) continue;
        EXPECT_LE(lo, hi);
        EXPECT_EQ(num(r[col(t, "seed")]), 5);
        EXPECT_EQ(num(r[col(t, "n_resamples")]), 200);
    }
    // heads.csv's layer rows (head -1): the estimate is the mean of the layer's per-head
    // estimates (a mean of <= 64 means: kF64ShortSumRel), inside the layer's interval.
    std::map<std::pair<int64_t, std::string>, std::pair<double, int>> per_head;
    std::map<std::pair<int64_t, std::string>, double> layer;
    for (const auto& r : t.rows()) {
        if (str(r[col(t, "table")]) != "heads") continue;
        const auto key = std::make_pair(int64_t(num(r[col(t, "layer")])), str(r[col(t, "metric")]));
        const double est = num(r[col(t, "estimate")]);
        if (num(r[col(t, "head")]) < 0) {
            layer[key] = est;
            EXPECT_LE(num(r[col(t, "ci_lo")]), est);
            EXPECT_GE(num(r[col(t, "ci_hi")]), est);
        } else {
            per_head[key].first += est, ++per_head[key].second;
        }
    }
    ASSERT_FALSE(layer.empty());
    EXPECT_EQ(layer.size(), per_head.size());
    for (const auto& [key, est] : layer)
        EXPECT_REL_WITHIN(est, per_head[key].first / per_head[key].second,
                          testutil::kF64ShortSumRel)
            << key.first << " " << key.second;
}

// Option values that cannot work are refused with the flag's name and no output.
TEST(Statistics, RejectsAbsurdOptions) {
    testutil::ScratchDir dir;
    for (const std::vector<std::string>& bad : {std::vector<std::string>{"--bootstrap", "10"},
                                                {"--bootstrap", "-1"},
                                                {"--confidence", "1.5"},
                                                {"--graph-thresholds", "0.1,2"},
                                                {"--sink-percentiles", "nan"},
                                                {"--effective-density", "0.9,0.1"}}) {
        std::vector<std::string> args = {"metrics", "--example", "--out", (dir / "x").string()};
        args.insert(args.end(), bad.begin(), bad.end());
        const auto r = testutil::run_cli(args);
        EXPECT_EQ(r.exit_code, 2) << bad[0] << ": " << r.err;
        EXPECT_NE(r.err.find(bad[0]), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(dir / "x")) << bad[0];
    }
}
