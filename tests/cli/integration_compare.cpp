// `sinkscope compare` end to end: real analyze runs of three zoo models and tinystories656K
// joined into the cross-model tables (values checked against each run's own CSVs, read here),
// the refusal of runs of different conventions, and the regime predictor fitted on some runs and
// applied frozen to others (checked against a brute force over the documented candidate set).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace sinkscope;
using testutil::read_json;
using testutil::run_cli;

namespace {

size_t col(const io::Table& t, const std::string& name) {
    const auto& c = t.columns();
    const auto it = std::find(c.begin(), c.end(), name);
    EXPECT_NE(it, c.end()) << "no column " << name;
    return size_t(it - c.begin());
}
std::string s(const io::Table& t, size_t r, const std::string& name) {
    const io::Cell& v = t.rows().at(r).at(col(t, name));
    if (auto x = std::get_if<std::string>(&v)) return *x;
    if (auto x = std::get_if<double>(&v)) return io::format_number(*x);
    return std::to_string(std::get<int64_t>(v));
}
double d(const io::Table& t, size_t r, const std::string& name) {
    const io::Cell& v = t.rows().at(r).at(col(t, name));
    if (auto x = std::get_if<double>(&v)) return *x;
    if (auto x = std::get_if<int64_t>(&v)) return double(*x);
    return std::numeric_limits<double>::quiet_NaN();
}

// (metric, param) -> value of one model's compare.csv rows.
using Values = std::map<std::pair<std::string, std::string>, double>;

// The model-level numbers of one run, read from its own tables here (the definitions of the
// user guide's compare section).
Values expected_values(const fs::path& run) {
    Values v;
    const io::Table heads = io::Table::read_csv(run / "heads.csv");
    double sum = 0;
    int n = 0;
    for (size_t r = 0; r < heads.size(); ++r)
        if (s(heads, r, "metric") == "sink_mass" && d(heads, r, "layer") >= 0 &&
            d(heads, r, "head") >= 0)
            sum += d(heads, r, "value"), ++n;
    v[{"sink_mass", "mean over heads"}] = sum / n;
    const io::Table eps = io::Table::read_csv(run / "sink_eps.csv");
    for (size_t r = 0; r < eps.size(); ++r)
        if (s(eps, r, "metric") == "sink_eps" && d(eps, r, "layer") == -1)
            v[{"sink_eps", s(eps, r, "convention")}] = d(eps, r, "value");
    const io::Table disp = io::Table::read_csv(run / "dispersion.csv");
    for (size_t r = 0; r < disp.size(); ++r)
        if (s(disp, r, "scope") == "model") v[{"v_b", ""}] = d(disp, r, "v_b");
    const io::Table reg = io::Table::read_csv(run / "regime.csv");
    for (size_t r = 0; r < reg.size(); ++r)
        if (s(reg, r, "scope") == "model") {
            v[{"rho", ""}] = d(reg, r, "rho");
            v[{"flip_rate", "pooled"}] = d(reg, r, "flip_rate");
        }
    const io::Table rev = io::Table::read_csv(run / "reversal.csv");
    for (size_t r = 0; r < rev.size(); ++r)
        if (s(rev, r, "scope") == "model")
            v[{"reversal_rate", s(rev, r, "comparison") + "/" + s(rev, r, "metric")}] =
                d(rev, r, "rate");
    return v;
}

// The number of elements of every tensor in a safetensors file, from its JSON header (8-byte
// little-endian length, then the header): an independent parameter count for these checkpoints,
// which store each weight once and nothing else.
double safetensors_elements(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    unsigned char len[8];
    in.read(reinterpret_cast<char*>(len), 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n * 256 + len[i];
    std::string header(n, '\0');
    in.read(header.data(), std::streamsize(n));
    double total = 0;
    const json h = json::parse(header);
    for (auto it = h.begin(); it != h.end(); ++it) {
        if (it.key() == "__metadata__") continue;
        double e = 1;
        for (const auto& dim : it.value().at("shape")) e *= dim.get<double>();
        total += e;
    }
    return total;
}

// Spec 7 predictor and measurement, written out here.
std::string predict(double rho, double lo, double hi) {
    return rho >= hi ? "classical-unsafe" : rho <= lo ? "classical-safe" : "abstain";
}
std::string measure(double flip) {
    return !std::isfinite(flip) ? "unmeasured"
           : flip >= 0.15       ? "classical-unsafe"
                                : "classical-safe";
}

}  // namespace

// (a) Runs of three zoo models and tinystories656K on the same token ids (a JSONL of ids
// bypasses the tokenizers, so every run has the same inputs hash and no --allow-mixed is needed).
TEST(CliCompare, FourModelsTablesAndFrozenPredictor) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    std::string ids;
    for (int n = 0; n < 4; ++n) {
        ids += "{\"ids\": [";
        for (int t = 0; t < 12; ++t)
            ids += (t ? ", " : "") + std::to_string(1 + (n * 37 + t * 11) % 2000);
        ids += "]}\n";
    }
    testutil::write_text(tmp / "ids.jsonl", ids);
    const std::vector<std::pair<std::string, fs::path>> models = {
        {"gpt2", shared / "zoo/gpt2"},
        {"pythia", shared / "zoo/pythia"},
        {"qwen2", shared / "zoo/qwen2"},
        {"tinystories656K", shared / "models/tinystories656K"}};
    std::vector<std::vector<std::string>> cmds;
    for (const auto& [name, dir] : models)
        cmds.push_back({"analyze", "--model", dir.string(), "--data", (tmp / "ids.jsonl").string(),
                        "--analyses", "compositional,heads,frame,sink_eps", "--out",
                        (tmp / name).string(), "--progress", "never", "--no-report"});
    const auto results = testutil::run_cli_batch(cmds, tmp / "logs");
    for (size_t i = 0; i < results.size(); ++i)
        ASSERT_EQ(results[i].exit_code, 0) << models[i].first << ": " << results[i].err;

    const fs::path out = tmp / "cmp";
    const auto r = run_cli({"compare", (tmp / "gpt2").string(), (tmp / "pythia").string(),
                            (tmp / "qwen2").string(), (tmp / "tinystories656K").string(), "--out",
                            out.string(), "--regime-outcome", "flip_rate", "--fit",
                            (tmp / "gpt2").string(), (tmp / "pythia").string(), "--apply",
                            (tmp / "qwen2").string(), (tmp / "tinystories656K").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;

    // models.csv: every model once, with run.json's parameter count and inputs hash.
    const io::Table m = io::Table::read_csv(out / "models.csv");
    ASSERT_EQ(m.size(), models.size());
    for (size_t i = 0; i < models.size(); ++i) {
        const json rec = read_json(tmp / models[i].first / "run.json");
        EXPECT_EQ(s(m, i, "model"), models[i].first);
        EXPECT_EQ(d(m, i, "n_params"), rec["model"]["n_params"].get<double>());
        EXPECT_EQ(d(m, i, "n_params"),
                  safetensors_elements(models[i].second / "model.safetensors"));
        EXPECT_EQ(s(m, i, "architecture"), rec["model"]["architecture"].get<std::string>());
        EXPECT_EQ(s(m, i, "inputs_sha256"), rec["data"]["inputs_sha256"].get<std::string>());
        EXPECT_EQ(s(m, i, "inputs_sha256").size(), 64u);
    }

    // compare.csv: exactly the numbers read from each run's own tables. Each value is copied,
    // except sink mass, a mean over at most L*H <= 64 heads in [0, 1]: summed in file order by
    // both, but allow the n * 2^-52 bound of a reordered sum.
    const io::Table c = io::Table::read_csv(out / "compare.csv");
    std::map<std::string, Values> got;
    for (size_t i = 0; i < c.size(); ++i)
        got[s(c, i, "model")][{s(c, i, "metric"), s(c, i, "param")}] = d(c, i, "value");
    for (const auto& [name, dir] : models) {
        SCOPED_TRACE(name);
        const Values want = expected_values(tmp / name);
        ASSERT_EQ(got[name].size(), want.size());
        for (const auto& [key, value] : want) {
            ASSERT_TRUE(got[name].count(key)) << key.first << " " << key.second;
            const double g = got[name][key];
            if (std::isnan(value))
                EXPECT_TRUE(std::isnan(g)) << key.first;
            else
                EXPECT_NEAR(g, value, 64 * 0x1p-52) << key.first << " " << key.second;
        }
    }
    // frames.csv: the verdict of each run's frame.json.
    const io::Table f = io::Table::read_csv(out / "frames.csv");
    ASSERT_EQ(f.size(), models.size());
    for (size_t i = 0; i < models.size(); ++i)
        EXPECT_EQ(s(f, i, "frame"),
                  read_json(tmp / models[i].first / "frame.json")["verdict"].get<std::string>());

    // The frozen predictor: the applied rows carry exactly the fitted thresholds of run.json.
    const json rec = read_json(out / "run.json");
    ASSERT_TRUE(rec["regime"]["fitted"].get<bool>());
    const double lo = rec["regime"]["lo"].get<double>(), hi = rec["regime"]["hi"].get<double>();
    const io::Table g = io::Table::read_csv(out / "regime.csv");
    ASSERT_EQ(g.size(), models.size());
    for (size_t i = 0; i < g.size(); ++i) {
        EXPECT_EQ(s(g, i, "role"), i < 2 ? "fit" : "apply");
        EXPECT_EQ(d(g, i, "lo"), lo);
        EXPECT_EQ(d(g, i, "hi"), hi);
        EXPECT_EQ(s(g, i, "predicted"), predict(d(g, i, "rho"), lo, hi));
        EXPECT_EQ(s(g, i, "measured"), measure(d(g, i, "flip_rate")));
    }
}

namespace {

// A minimal analyze run: run.json with the given sink convention, and the model rows of
// dispersion.csv (rho) and regime.csv (rho and the pooled flip rate), as analyze writes them.
void fake_run(const fs::path& dir, double rho, double flip, const std::string& sink = "first") {
    const json rec = {{"tool", {{"name", "sinkscope"}}},
                      {"subcommand", "analyze"},
                      {"model",
                       {{"path", "/models/" + dir.filename().string()},
                        {"architecture", "llama"},
                        {"n_params", 1000}}},
                      {"data", {{"inputs_sha256", std::string(64, 'a')}}},
                      {"options", {{"sink", sink}, {"zeros", "error"}, {"threads", 0}}}};
    testutil::write_text(dir / "run.json", rec.dump());
    testutil::write_text(dir / "regime.csv",
                         "scope,layer,rho,regime_lo,regime_hi,predicted,flip_compared,"
                         "flip_disagree,flip_rate,unsafe_flip_rate,measured,agreement\n"
                         "model,-1," +
                             io::format_number(rho) + ",0.2,0.5,x,1,0," + io::format_number(flip) +
                             ",0.15,x,x\n");
    testutil::write_text(
        dir / "dispersion.csv",
        "scope,layer,c_perp,v_b,rho,n_rows\nmodel,-1,1,1," + io::format_number(rho) + ",10\n");
}

}  // namespace

// (b) Different --sink conventions: refused in one line naming the convention, nothing written;
// with --allow-mixed the difference is listed in run.json.
TEST(CliCompare, MixedSinkConventionsRefused) {
    testutil::ScratchDir tmp;
    fake_run(tmp / "a", 0.3, 0.1, "first");
    fake_run(tmp / "b", 0.4, 0.2, "argmax");
    const auto before = testutil::snapshot_tree(tmp.path());
    const fs::path out = tmp / "cmp";
    const auto r =
        run_cli({"compare", (tmp / "a").string(), (tmp / "b").string(), "--out", out.string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "sinkscope: error: compare: runs differ in the sink convention (--sink): " +
                         (tmp / "a").string() + " has first, " + (tmp / "b").string() +
                         " has argmax; pass --allow-mixed to compare them anyway\n");
    EXPECT_FALSE(fs::exists(out));
    EXPECT_EQ(testutil::snapshot_tree(tmp.path()), before);

    const auto ok = run_cli({"compare", (tmp / "a").string(), (tmp / "b").string(), "--out",
                             out.string(), "--allow-mixed", "--no-report"});
    ASSERT_EQ(ok.exit_code, 0) << ok.err;
    const json rec = read_json(out / "run.json");
    ASSERT_EQ(rec["mixed"].size(), 1u);
    EXPECT_NE(rec["mixed"][0].get<std::string>().find("sink convention (--sink)"),
              std::string::npos);
    EXPECT_EQ(io::Table::read_csv(out / "models.csv").size(), 2u);
}

// (c) --fit A B C D --apply E F G: the fitted thresholds satisfy the documented rule (a brute
// force here over the same candidate set), the applied rows use them unchanged, and the
// confusion counts equal a count of the applied regime.csv rows.
TEST(CliCompare, FittedThresholdsFrozenOnApplied) {
    testutil::ScratchDir tmp;
    // (rho, flip): fit runs with a clean split between 0.25 and 0.4 except one outlier, and one
    // fit run whose flip rate is unmeasured (left out).
    const std::vector<std::tuple<std::string, double, double>> runs = {
        {"A", 0.10, 0.05},         {"B", 0.25, 0.10}, {"C", 0.40, 0.30}, {"D", 0.60, 0.50},
        {"U", 0.30, std::nan("")}, {"E", 0.05, 0.20}, {"F", 0.35, 0.40}, {"G", 0.90, 0.01}};
    std::vector<std::string> args = {"compare"};
    for (const auto& [name, rho, flip] : runs) {
        fake_run(tmp / name, rho, flip);
        args.push_back((tmp / name).string());
    }
    args.push_back("--fit");
    for (const char* n : {"A", "B", "C", "D", "U"}) args.push_back((tmp / n).string());
    args.push_back("--apply");
    for (const char* n : {"E", "F", "G"}) args.push_back((tmp / n).string());
    const fs::path out = tmp / "cmp";
    // The flip-rate criterion, and no least band width: the candidate rule alone.
    args.insert(args.end(), {"--out", out.string(), "--no-report", "--regime-outcome", "flip_rate",
                             "--regime-min-width", "0"});
    const auto r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("has no measured flip rate: left out of fitting"), std::string::npos)
        << r.err;

    // Brute force: candidates 0, 1, 0.2, 0.5 and midpoints of the sorted distinct fit rho;
    // maximise correct, then minimise wrong, then abstentions, then lo, then hi.
    std::vector<double> rho = {0.10, 0.25, 0.40, 0.60};
    std::set<double> cand = {0.0, 1.0, 0.2, 0.5};
    for (size_t i = 1; i < rho.size(); ++i) cand.insert((rho[i - 1] + rho[i]) / 2);
    std::tuple<int, int, int, double, double> best{-1, 0, 0, 0, 0};
    bool first = true;
    for (double lo : cand)
        for (double hi : cand) {
            if (lo > hi) continue;
            int correct = 0, wrong = 0, abstain = 0;
            for (const auto& [name, x, flip] : runs) {
                if (std::string("ABCD").find(name) == std::string::npos) continue;
                const std::string p = predict(x, lo, hi);
                if (p == "abstain")
                    ++abstain;
                else
                    (p == measure(flip) ? correct : wrong)++;
            }
            // Lexicographic: higher correct, lower wrong, lower abstain, lower lo, lower hi.
            const auto key = std::make_tuple(-correct, wrong, abstain, lo, hi);
            const auto cur =
                std::make_tuple(-std::get<0>(best), std::get<1>(best), std::get<2>(best),
                                std::get<3>(best), std::get<4>(best));
            if (first || key < cur) best = {correct, wrong, abstain, lo, hi}, first = false;
        }
    const json rec = read_json(out / "run.json");
    const double lo = rec["regime"]["lo"].get<double>(), hi = rec["regime"]["hi"].get<double>();
    EXPECT_EQ(lo, std::get<3>(best));
    EXPECT_EQ(hi, std::get<4>(best));
    EXPECT_EQ(rec["regime"]["fit_score"]["correct"].get<int>(), std::get<0>(best));
    EXPECT_EQ(rec["regime"]["fit_score"]["n_points"].get<int>(), 4);

    const io::Table g = io::Table::read_csv(out / "regime.csv");
    ASSERT_EQ(g.size(), runs.size());
    std::map<std::pair<std::string, std::string>, int> counted;
    for (size_t i = 0; i < g.size(); ++i) {
        EXPECT_EQ(d(g, i, "lo"), lo);
        EXPECT_EQ(d(g, i, "hi"), hi);
        const std::string role = s(g, i, "role");
        const std::string name = fs::path(s(g, i, "run")).filename().string();
        EXPECT_EQ(role, std::string("EFG").find(name) != std::string::npos ? "apply" : "fit")
            << name;
        EXPECT_EQ(s(g, i, "predicted"), predict(d(g, i, "rho"), lo, hi));
        if (role == "apply") ++counted[{s(g, i, "predicted"), s(g, i, "measured")}];
    }
    const io::Table conf = io::Table::read_csv(out / "regime_confusion.csv");
    EXPECT_EQ(conf.size(), 9u);
    int total = 0;
    for (size_t i = 0; i < conf.size(); ++i) {
        const int n = int(d(conf, i, "count"));
        total += n;
        const auto key = std::make_pair(s(conf, i, "predicted"), s(conf, i, "measured"));
        EXPECT_EQ(n, counted[key]) << s(conf, i, "predicted") << " x " << s(conf, i, "measured");
    }
    EXPECT_EQ(total, 3);
}

// Without --fit the spec 7 defaults are applied to every run.
TEST(CliCompare, DefaultsWithoutFit) {
    testutil::ScratchDir tmp;
    fake_run(tmp / "a", 0.1, 0.05);
    fake_run(tmp / "b", 0.7, 0.3);
    const fs::path out = tmp / "cmp";
    const auto r = run_cli({"compare", (tmp / "a").string(), (tmp / "b").string(), "--out",
                            out.string(), "--no-report", "--regime-outcome", "flip_rate"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const io::Table g = io::Table::read_csv(out / "regime.csv");
    ASSERT_EQ(g.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(d(g, i, "lo"), 0.2);
        EXPECT_EQ(d(g, i, "hi"), 0.5);
        EXPECT_EQ(s(g, i, "role"), "apply");
        EXPECT_EQ(s(g, i, "agreement"), "correct");
    }
}

// A dynamics run stands for its checkpoints' sub-runs, labelled from its "checkpoints" list;
// --fit names the dynamics run as given, which fits on every checkpoint.
TEST(CliCompare, DynamicsRunExpandsIntoCheckpoints) {
    testutil::ScratchDir tmp;
    fake_run(tmp / "dyn/ck/s10", 0.1, 0.05);
    fake_run(tmp / "dyn/ck/s20", 0.6, 0.4);
    fake_run(tmp / "other", 0.7, 0.1);
    const json dyn = {{"tool", {{"name", "sinkscope"}}},
                      {"subcommand", "dynamics"},
                      {"checkpoints",
                       {{{"label", "step-10"}, {"step", 10}, {"path", "ck/s10"}},
                        {{"label", ""}, {"step", 20}, {"path", "ck/s20"}}}}};
    testutil::write_text(tmp / "dyn/run.json", dyn.dump());
    const fs::path out = tmp / "cmp";
    const auto r =
        run_cli({"compare", (tmp / "dyn").string(), (tmp / "other").string(), "--out", out.string(),
                 "--fit", (tmp / "dyn").string(), "--no-report", "--regime-outcome", "flip_rate"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const io::Table m = io::Table::read_csv(out / "models.csv");
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(s(m, 0, "checkpoint"), "step-10");
    EXPECT_EQ(s(m, 1, "checkpoint"), "step 20");  // no label: the step
    EXPECT_EQ(s(m, 0, "model"), "s10");
    const io::Table g = io::Table::read_csv(out / "regime.csv");
    ASSERT_EQ(g.size(), 3u);
    EXPECT_EQ(s(g, 0, "role"), "fit");
    EXPECT_EQ(s(g, 1, "role"), "fit");
    EXPECT_EQ(s(g, 2, "role"), "apply");
    // Fit points (0.1, safe) and (0.6, unsafe): candidates 0, 0.2, 0.35, 0.5, 1; the smallest
    // lo classifying both is 0.2, then the smallest hi >= 0.2 that is <= 0.6: 0.2. That band
    // could never abstain: it is widened about 0.2 to the least width 0.05 (spec 7).
    EXPECT_NEAR(d(g, 2, "lo"), 0.175, 1e-15);
    EXPECT_NEAR(d(g, 2, "hi"), 0.225, 1e-15);
}

namespace {

// fake_run's run.json with the sink_policy analyze records: the flag given and what it resolved.
void fake_resolved_run(const fs::path& dir, const std::string& requested,
                       const std::string& resolved) {
    fake_run(dir, 0.3, 0.1, requested);
    json rec = read_json(dir / "run.json");
    rec["sink_policy"] = {{"requested", requested}, {"resolved", resolved}};
    testutil::write_text(dir / "run.json", rec.dump());
}

}  // namespace

// Runs are compared by the sink convention they resolved (run.json sink_policy.resolved), not by
// the flag: --sink auto that resolved to first agrees with --sink first; different resolved
// conventions are still refused, naming the resolved values.
TEST(CliCompare, ResolvedSinkConventionsCompared) {
    testutil::ScratchDir tmp;
    fake_resolved_run(tmp / "auto", "auto", "first");
    fake_resolved_run(tmp / "first", "first", "first");
    fake_resolved_run(tmp / "argmax", "auto", "argmax");
    const auto ok = run_cli({"compare", (tmp / "auto").string(), (tmp / "first").string(), "--out",
                             (tmp / "cmp").string(), "--no-report"});
    ASSERT_EQ(ok.exit_code, 0) << ok.err;
    EXPECT_TRUE(read_json(tmp / "cmp/run.json")["mixed"].empty());
    const auto refused = run_cli({"compare", (tmp / "auto").string(), (tmp / "argmax").string(),
                                  "--out", (tmp / "cmp2").string(), "--no-report"});
    EXPECT_EQ(refused.exit_code, 2);
    EXPECT_EQ(refused.err,
              "sinkscope: error: compare: runs differ in the sink convention (--sink): " +
                  (tmp / "auto").string() + " has first, " + (tmp / "argmax").string() +
                  " has argmax; pass --allow-mixed to compare them anyway\n");
    EXPECT_FALSE(fs::exists(tmp / "cmp2"));
}

// The same on real runs: analyze --sink auto and --sink first on a causal model write identical
// heads.csv, and compare accepts the pair without --allow-mixed.
TEST(CliCompare, AnalyzeAutoAgainstFirstAccepted) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    for (const char* sink : {"auto", "first"}) {
        const auto r =
            run_cli({"analyze", "--model", (shared / "models/tinystories656K").string(),
                     "--samples", "3", "--max-tokens", "16", "--analyses", "heads", "--sink", sink,
                     "--quiet", "--no-report", "--out", (tmp / sink).string()});
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    const auto r = run_cli({"compare", (tmp / "auto").string(), (tmp / "first").string(), "--out",
                            (tmp / "cmp").string(), "--no-report"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(read_json(tmp / "cmp/run.json")["mixed"].empty());
}

// The frame verdict's rule (--frame-share-first, --frame-max-reference-count) is recorded in
// run.json like every other analysis option, so compare sees two runs that differ in it.
TEST(CliCompare, FrameRuleOptionsRecordedAndCompared) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
        {"default", {}},
        {"share", {"--frame-share-first", "0.5"}},
        {"count", {"--frame-max-reference-count", "2.5"}}};
    for (const auto& [name, extra] : runs) {
        std::vector<std::string> args = {"analyze",
                                         "--model",
                                         (shared / "models/tinystories656K").string(),
                                         "--samples",
                                         "3",
                                         "--max-tokens",
                                         "16",
                                         "--analyses",
                                         "frame",
                                         "--quiet",
                                         "--no-report",
                                         "--out",
                                         (tmp / name).string()};
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = run_cli(args);
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    const json d = read_json(tmp / "default/run.json")["options"];
    EXPECT_EQ(d["frame_share_first"], 0.9);
    EXPECT_EQ(d["frame_max_reference_count"], 1.2);
    EXPECT_EQ(read_json(tmp / "share/run.json")["options"]["frame_share_first"], 0.5);
    EXPECT_EQ(read_json(tmp / "count/run.json")["options"]["frame_max_reference_count"], 2.5);
    for (const auto& [name, flag] :
         {std::pair<std::string, std::string>{"share", "--frame-share-first"},
          {"count", "--frame-max-reference-count"}}) {
        const auto r = run_cli({"compare", (tmp / "default").string(), (tmp / name).string(),
                                "--out", (tmp / ("cmp_" + name)).string(), "--no-report"});
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_NE(r.err.find("(" + flag + ")"), std::string::npos) << r.err;
    }
}

// --fit on runs of one measured class: one warning line saying the other class has no example
// (the fit still runs), recorded in run.json too.
TEST(CliCompare, FitOnOneClassWarns) {
    testutil::ScratchDir tmp;
    fake_run(tmp / "a", 0.1, 0.05);
    fake_run(tmp / "b", 0.3, 0.02);
    fake_run(tmp / "c", 0.7, 0.4);
    const auto r =
        run_cli({"compare", (tmp / "a").string(), (tmp / "b").string(), (tmp / "c").string(),
                 "--fit", (tmp / "a").string(), (tmp / "b").string(), "--out",
                 (tmp / "cmp").string(), "--no-report", "--regime-outcome", "flip_rate"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string needle =
        "sinkscope: warning: every --fit run is measured classical-safe (flip rate < 0.15): with "
        "no classical-unsafe example";
    ASSERT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    const json rec = read_json(tmp / "cmp/run.json");
    ASSERT_EQ(rec["warnings"].size(), 1u);
    EXPECT_NE(rec["warnings"][0].get<std::string>().find("no classical-unsafe example"),
              std::string::npos);
    // Fit runs of both classes: no such warning.
    const auto mixed =
        run_cli({"compare", (tmp / "a").string(), (tmp / "b").string(), (tmp / "c").string(),
                 "--fit", (tmp / "a").string(), (tmp / "c").string(), "--out",
                 (tmp / "cmp2").string(), "--no-report", "--regime-outcome", "flip_rate"});
    ASSERT_EQ(mixed.exit_code, 0) << mixed.err;
    EXPECT_EQ(mixed.err.find("warning"), std::string::npos) << mixed.err;
}

// One run directory spelled two ways (rA and ./rA/, or a symlink to it) is refused like rA rA,
// in one line naming both spellings, and nothing is written.
TEST(CliCompare, SameRunSpelledTwiceRefused) {
    testutil::ScratchDir tmp;
    fake_run(tmp / "rA", 0.3, 0.1);
    fs::create_directory_symlink(tmp / "rA", tmp / "link");
    const std::string a = (tmp / "rA").string();
    for (const std::string& other :
         {a + "/", (tmp / "." / "rA" / "").string(), (tmp / "link").string()}) {
        SCOPED_TRACE(other);
        const auto r =
            run_cli({"compare", a, other, "--out", (tmp / "cmp").string(), "--no-report"});
        EXPECT_EQ(r.exit_code, 2);
        EXPECT_NE(r.err.find("are the same run directory"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find(other), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_FALSE(fs::exists(tmp / "cmp"));
    }
}

// CSV injection (issue 46 item 10): model names from hand-edited run.json files that a
// spreadsheet would run as formulas (=HYPERLINK(...), @SUM(...)) reach every table with a single
// quote before them (OWASP), no cell of any table starts with =, +, @, a tab or a carriage
// return, one that starts with - is a number (layer -1 stays a number), and read_csv gives the
// names back unchanged. They used to be copied into regime.csv as they were.
TEST(CliCompare, FormulaLikeTextIsNeutralisedInEveryTable) {
    testutil::ScratchDir tmp;
    const std::vector<std::string> names = {R"(=HYPERLINK("http://example.com/x","open"))",
                                            "@SUM(1+1)"};
    for (size_t k = 0; k < names.size(); ++k) {
        const fs::path dir = tmp / (k == 0 ? "a" : "b");
        fake_run(dir, 0.3 - 0.2 * double(k), 0.1);
        json rec = read_json(dir / "run.json");
        rec["model"]["name"] = names[k];
        testutil::write_text(dir / "run.json", rec.dump());
    }
    const fs::path out = tmp / "cmp";
    const auto r = run_cli({"compare", (tmp / "a").string(), (tmp / "b").string(), "--out",
                            out.string(), "--no-report"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    size_t quoted = 0;
    for (const auto& e : fs::directory_iterator(out)) {
        if (e.path().extension() != ".csv") continue;
        SCOPED_TRACE(e.path().filename().string());
        // The raw fields, unquoted as a spreadsheet reads them.
        const std::string text = read_file(e.path());
        std::vector<std::string> fields(1);
        bool in_quotes = false;
        for (size_t i = 0; i < text.size(); ++i) {
            const char c = text[i];
            if (in_quotes && c == '"' && i + 1 < text.size() && text[i + 1] == '"')
                fields.back() += '"', ++i;
            else if (c == '"')
                in_quotes = !in_quotes;
            else if (!in_quotes && (c == ',' || c == '\n'))
                fields.emplace_back();
            else
                fields.back() += c;
        }
        for (const std::string& f : fields) {
            if (f.empty()) continue;
            EXPECT_EQ(std::string("=+@\t\r").find(f[0]), std::string::npos) << f;
            if (f[0] == '-') {
                char* end = nullptr;
                std::strtod(f.c_str(), &end);
                EXPECT_EQ(end, f.c_str() + f.size()) << "a text cell starting with -: " << f;
            }
            if (f == "'" + names[0] || f == "'" + names[1]) ++quoted;
        }
    }
    EXPECT_GE(quoted, 4u);  // each name in models.csv and regime.csv at least
    const io::Table regime = io::Table::read_csv(out / "regime.csv");
    ASSERT_EQ(regime.size(), 2u);
    std::set<std::string> got = {s(regime, 0, "model"), s(regime, 1, "model")};
    EXPECT_EQ(got, std::set<std::string>(names.begin(), names.end()));
}

namespace {

// A minimal prune run of `model`: run.json with its calibration set's dispersion
// (regime_inputs), prune.csv (the unpruned baseline and each channel point) and
// prune_random.csv (the random spread per sparsity), as prune writes them.
struct FakePoint {
    std::string method;
    double sparsity, value;
};
struct FakeSpread {
    double sparsity, min, max;
};
void fake_prune_run(const fs::path& dir, const std::string& model, double rho, double v_b,
                    double baseline, const std::vector<FakePoint>& points,
                    const std::vector<FakeSpread>& random) {
    const json rec = {{"tool", {{"name", "sinkscope"}}},
                      {"subcommand", "prune"},
                      {"model", {{"path", "/models/" + model}, {"architecture", "llama"}}},
                      {"options", {{"channels", "js,dA_perp"}, {"sink", "first"}}},
                      {"measure", "perplexity"},
                      {"regime_inputs", {{"rho", rho}, {"v_b", v_b}}}};
    testutil::write_text(dir / "run.json", rec.dump());
    std::string csv =
        "method,seed,sparsity,n_pruned,measure,value,mean_nll,n_scored,change,pruned_heads\n"
        "none,-1,0,0,perplexity," +
        io::format_number(baseline) + ",1,10,0,\n";
    for (const FakePoint& p : points)
        csv += p.method + ",-1," + io::format_number(p.sparsity) + ",1,perplexity," +
               io::format_number(p.value) + ",1,10,0,0.0\n";
    testutil::write_text(dir / "prune.csv", csv);
    std::string rnd = "sparsity,n_pruned,measure,n_seeds,mean,std,min,max\n";
    for (const FakeSpread& r : random)
        rnd += io::format_number(r.sparsity) + ",1,perplexity,3," +
               io::format_number(0.5 * (r.min + r.max)) + ",1," + io::format_number(r.min) + "," +
               io::format_number(r.max) + "\n";
    testutil::write_text(dir / "prune_random.csv", rnd);
}

// Spec 7's pruning regime, written out here: unsafe when at some sparsity js is above the random
// max while dA_perp is not; safe when some sparsity had both and a spread; else unmeasured.
std::string pruning_regime(const std::vector<FakePoint>& points,
                           const std::vector<FakeSpread>& random) {
    std::string out = "unmeasured";
    for (const FakeSpread& r : random) {
        double js = std::nan(""), perp = std::nan("");
        for (const FakePoint& p : points)
            if (p.sparsity == r.sparsity) (p.method == "js" ? js : perp) = p.value;
        if (std::isnan(js) || std::isnan(perp)) continue;
        if (js > r.max && perp <= r.max) return "classical-unsafe";
        out = "classical-safe";
    }
    return out;
}

}  // namespace

// Spec 7 end to end: each analyze run is joined to the prune run of its model, a prune run with
// no analyze run stands for itself (its calibration set's rho), the measured pruning regime
// follows the documented rule (written out above), regime_map.csv holds every pruned point's
// inflation and random spread, and naming a prune run in --fit names its model.
TEST(CliCompare, PruningRegimeJoinsPruneRuns) {
    testutil::ScratchDir tmp;
    const std::vector<FakeSpread> spread = {{0.1, 100, 130}, {0.2, 110, 150}};
    const std::vector<FakePoint> safe = {
        {"js", 0.1, 120}, {"dA_perp", 0.1, 105}, {"js", 0.2, 140}, {"dA_perp", 0.2, 120}};
    const std::vector<FakePoint> unsafe = {
        {"js", 0.1, 125}, {"dA_perp", 0.1, 101}, {"js", 0.2, 900}, {"dA_perp", 0.2, 149}};
    const std::vector<FakePoint> both_bad = {
        {"js", 0.1, 400}, {"dA_perp", 0.1, 300}, {"js", 0.2, 500}, {"dA_perp", 0.2, 600}};
    ASSERT_EQ(pruning_regime(safe, spread), "classical-safe");
    ASSERT_EQ(pruning_regime(unsafe, spread), "classical-unsafe");
    ASSERT_EQ(pruning_regime(both_bad, spread), "classical-safe");
    fake_run(tmp / "m1", 0.1, 0.05);
    fake_run(tmp / "m2", 0.7, 0.02);
    fake_run(tmp / "m4", 0.3, 0.3);
    fake_prune_run(tmp / "p1", "m1", 0.11, 0.2, 90, safe, spread);
    fake_prune_run(tmp / "p2", "m2", 0.69, 3.0, 95, unsafe, spread);
    fake_prune_run(tmp / "p3", "m3", 0.4, 1.0, 80, both_bad, spread);
    const fs::path out = tmp / "cmp";
    std::vector<std::string> args = {"compare"};
    for (const char* n : {"m1", "m2", "m4", "p1", "p2", "p3"}) args.push_back((tmp / n).string());
    args.insert(args.end(), {"--out", out.string(), "--no-report"});
    const auto r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const io::Table g = io::Table::read_csv(out / "regime.csv");
    // m1, m2, m4 (analyze runs) and p3 (no analyze run of m3); p1 and p2 are joined.
    ASSERT_EQ(g.size(), 4u);
    std::map<std::string, size_t> row;
    for (size_t i = 0; i < g.size(); ++i) row[s(g, i, "model")] = i;
    ASSERT_EQ(row.size(), 4u);
    auto at = [&](const std::string& m, const std::string& c) { return s(g, row.at(m), c); };
    EXPECT_EQ(at("m1", "prune_run"), (tmp / "p1").string());
    EXPECT_EQ(at("m1", "measured"), pruning_regime(safe, spread));
    EXPECT_EQ(at("m2", "measured"), pruning_regime(unsafe, spread));
    EXPECT_EQ(at("m3", "measured"), pruning_regime(both_bad, spread));
    EXPECT_EQ(at("m4", "measured"), "unmeasured");
    EXPECT_EQ(at("m4", "prune_run"), "");
    EXPECT_EQ(d(g, row.at("m3"), "rho"), 0.4);  // the prune run's regime_inputs
    EXPECT_EQ(d(g, row.at("m1"), "rho"), 0.1);  // the analyze run's, not the prune run's 0.11
    for (const auto& [m, i] : row) {
        EXPECT_EQ(s(g, i, "outcome"), "pruning");
        EXPECT_EQ(s(g, i, "predicted"), predict(d(g, i, "rho"), 0.2, 0.5)) << m;
        EXPECT_EQ(s(g, i, "flip_measured"), measure(d(g, i, "flip_rate"))) << m;
    }
    EXPECT_EQ(at("m1", "agreement"), "correct");
    EXPECT_EQ(at("m2", "agreement"), "correct");
    EXPECT_EQ(at("m3", "agreement"), "abstained");
    EXPECT_EQ(at("m4", "agreement"), "unmeasured");
    EXPECT_NE(at("m2", "pruning_evidence").find("at sparsity 0.2"), std::string::npos);

    // regime_map.csv: one row per channel point of each prune run.
    const io::Table map = io::Table::read_csv(out / "regime_map.csv");
    ASSERT_EQ(map.size(), 12u);
    for (size_t i = 0; i < map.size(); ++i) {
        EXPECT_EQ(d(map, i, "inflation"), d(map, i, "value") / d(map, i, "baseline"));
        const double hi = d(map, i, "sparsity") == 0.1 ? 130 : 150;
        EXPECT_EQ(d(map, i, "random_max"), hi);
        EXPECT_EQ(d(map, i, "beyond_random"), d(map, i, "value") > hi ? 1 : 0);
        EXPECT_EQ(s(map, i, "analyze_run"),
                  s(map, i, "model") == "m3" ? "" : (tmp / s(map, i, "model")).string());
    }

    // --fit names p2 (so its model m2) and m1: a safe 0.1 and an unsafe 0.7; the band is at least
    // 0.05 wide and classifies both.
    std::vector<std::string> fit = args;
    fit[fit.size() - 2] = (tmp / "cmp2").string();
    fit.insert(fit.end(), {"--fit", (tmp / "m1").string(), (tmp / "p2").string()});
    const auto f = run_cli(fit);
    ASSERT_EQ(f.exit_code, 0) << f.err;
    const io::Table g2 = io::Table::read_csv(tmp / "cmp2/regime.csv");
    for (size_t i = 0; i < g2.size(); ++i) {
        const std::string m = s(g2, i, "model");
        EXPECT_EQ(s(g2, i, "role"), m == "m1" || m == "m2" ? "fit" : "apply") << m;
        EXPECT_GE(d(g2, i, "hi") - d(g2, i, "lo"), 0.05 - 1e-15);
        if (s(g2, i, "role") == "fit") EXPECT_EQ(s(g2, i, "agreement"), "correct") << m;
    }
    const json rec = read_json(tmp / "cmp2/run.json");
    EXPECT_EQ(rec["regime"]["outcome"], "pruning");
    EXPECT_EQ(rec["regime"]["fit_score"]["n_points"].get<int>(), 2);

    // The report draws the regime map, one figure per sparsity, without overlaps.
    std::vector<std::string> with_report(args.begin(), args.end() - 1);  // without --no-report
    with_report[with_report.size() - 1] = (tmp / "cmp3").string();
    const auto rep = run_cli(with_report);
    ASSERT_EQ(rep.exit_code, 0) << rep.err;
    const std::string html = read_file(tmp / "cmp3/report.html");
    for (const char* s : {"0.1", "0.2"})
        EXPECT_NE(html.find(std::string("Pruning inflation against rho, sparsity ") + s),
                  std::string::npos);
    testutil::expect_clean_report_layout(tmp / "cmp3/report.html", 2);
}

// Without any prune run the pruning outcome is unmeasured for every model: one warning that
// says so and how to score the flip rate instead; bad regime options are refused up front.
TEST(CliCompare, PruningOutcomeNeedsPruneRuns) {
    testutil::ScratchDir tmp;
    fake_run(tmp / "a", 0.1, 0.05);
    fake_run(tmp / "b", 0.7, 0.3);
    const auto r = run_cli({"compare", (tmp / "a").string(), (tmp / "b").string(), "--out",
                            (tmp / "cmp").string(), "--no-report"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("no compared model has a measured pruning regime"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("--regime-outcome flip_rate"), std::string::npos) << r.err;
    const io::Table g = io::Table::read_csv(tmp / "cmp/regime.csv");
    for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(s(g, i, "agreement"), "unmeasured");
    const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
        {{"--regime-outcome", "loss"}, "--regime-outcome must be pruning or flip_rate"},
        {{"--regime-statistic", "v_b"}, "--regime-statistic v_b has no default thresholds"},
        {{"--regime-channel", "dA_perp"}, "--regime-channel must be a prune channel other"},
        {{"--regime-min-width", "-1"}, "--regime-min-width must be >= 0"},
        {{"--regime-min-width", "2"}, "--regime-min-width must be >= 0 (and <= 1 for rho)"}};
    for (const auto& [extra, message] : bad) {
        std::vector<std::string> args = {"compare", (tmp / "a").string(),   (tmp / "b").string(),
                                         "--out",   (tmp / "bad").string(), "--no-report"};
        args.insert(args.end(), extra.begin(), extra.end());
        const auto b = run_cli(args);
        EXPECT_EQ(b.exit_code, 2) << message;
        EXPECT_NE(b.err.find(message), std::string::npos) << b.err;
        EXPECT_FALSE(fs::exists(tmp / "bad"));
    }
}
