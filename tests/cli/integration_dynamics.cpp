// `sinkscope dynamics` end to end on a series the test trains (`sinkscope train --preset tiny`,
// seconds): the entropy split is exact on every layer and pair and equals the spec's formulas
// recomputed here from the checkpoints' own rows; a run killed after the second checkpoint
// resumes to the tables of an uninterrupted one; malformed series are refused in one line before
// any model runs, with nothing written. On the shipped series (models/default), the trajectory
// holds the emergence curve: Sink_eps and the sink's key norm and query-key cosine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;
using testutil::run_cli;
using testutil::snapshot_tree;

namespace {

// A tiny training run with a checkpoint every 10 steps; returns its manifest.json.
fs::path train_series(const testutil::ScratchDir& tmp, const std::string& preset, int steps,
                      const std::string& name) {
    const auto r = run_cli({"train", "--preset", preset, "--text",
                            testutil::write_training_corpus(tmp.path()).string(), "--out",
                            (tmp / name).string(), "--steps", std::to_string(steps),
                            "--checkpoint-every", "10", "--threads", "1", "--progress", "never"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return tmp / name / "manifest.json";
}

std::vector<std::string> dynamics_args(const fs::path& manifest, const fs::path& out) {
    return {"dynamics",
            "--checkpoints",
            manifest.string(),
            "--out",
            out.string(),
            "--samples",
            "6",
            "--max-tokens",
            "20",
            "--threads",
            "1",
            "--progress",
            "never",
            "--no-report"};
}

// The rows of entropy_rows.npy keyed by (input, layer, head, query).
using Key = std::tuple<int, int, int, int>;
struct Parts {
    double s, w, hpi, h;
};
std::map<Key, Parts> read_rows(const fs::path& file) {
    const io::NpyArray a = io::read_npy(file);
    EXPECT_EQ(a.shape.size(), 2u);
    EXPECT_EQ(a.shape[1], 8);
    const std::vector<double> v = a.to_f64();
    std::map<Key, Parts> out;
    for (int64_t r = 0; r < a.shape[0]; ++r) {
        const double* x = v.data() + r * 8;
        out[{int(x[0]), int(x[1]), int(x[2]), int(x[3])}] = {x[4], x[5], x[6], x[7]};
    }
    return out;
}

double hb(double s) {
    auto xl = [](double x) { return x > 0 ? x * std::log(x) : 0.0; };
    return -xl(s) - xl(1 - s);
}

std::map<std::string, std::string> tables(const fs::path& dir) {
    auto t = snapshot_tree(dir);
    t.erase("run.json");
    for (auto it = t.begin(); it != t.end();)
        it = it->first.ends_with("/run.json") ? t.erase(it) : std::next(it);
    return t;
}

}  // namespace

// On 8 checkpoints: every (pair, layer) row of entropy_split.csv has sink + content equal to the
// measured change within 1e-9 (the acceptance bound; float64 rounding of the per-row identity
// over the few thousand rows here is ~1e-12), and its terms equal the spec's formulas, written
// with s, evaluated here over the rows of the two checkpoints' entropy_rows.npy.
TEST(CliDynamics, SplitIsExactAndMatchesTheSpec) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    testutil::ScratchDir tmp;
    const fs::path manifest = train_series(tmp, "tiny", 80, "series");
    const auto r = run_cli(dynamics_args(manifest, tmp / "dyn"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto run = nlohmann::json::parse(std::ifstream(tmp / "dyn/run.json"));
    const auto& ckpts = run["checkpoints"];
    ASSERT_EQ(ckpts.size(), 8u);
    // Every checkpoint cuts the same inputs to --max-tokens 20: the note is said once, not 8 times.
    const std::string cut = " cut to 20 tokens (--max-tokens)";
    size_t notes = 0;
    for (size_t at = r.err.find(cut); at != std::string::npos; at = r.err.find(cut, at + 1))
        ++notes;
    EXPECT_EQ(notes, 1u) << r.err;
    std::vector<std::map<Key, Parts>> rows;
    for (const auto& c : ckpts) {
        rows.push_back(read_rows(tmp / "dyn" / c["path"].get<std::string>() / "entropy_rows.npy"));
        ASSERT_FALSE(rows.back().empty());
        // Each checkpoint's tables carry its label in the checkpoint column.
        const io::Table heads =
            io::Table::read_csv(tmp / "dyn" / c["path"].get<std::string>() / "heads.csv");
        ASSERT_FALSE(heads.empty());
        EXPECT_EQ(io::format_number(std::get<double>(heads.rows()[0][1])),
                  c["label"].get<std::string>());  // labels "10", "20", ... read as numbers
    }
    std::map<std::string, size_t> index;
    for (size_t k = 0; k < ckpts.size(); ++k) index[ckpts[k]["label"].get<std::string>()] = k;

    const io::Table split = io::Table::read_csv(tmp / "dyn/entropy_split.csv");
    const auto& cols = split.columns();
    auto col = [&](const char* n) {
        return size_t(std::find(cols.begin(), cols.end(), n) - cols.begin());
    };
    auto num = [](const io::Cell& c) { return std::get<double>(c); };
    auto text = [](const io::Cell& c) {
        if (const auto* d = std::get_if<double>(&c)) return std::to_string(int64_t(*d));
        return std::get<std::string>(c);
    };
    size_t n_pairs = 0;
    for (const auto& row : split.rows()) {
        const size_t a = index.at(text(row[col("from")])), b = index.at(text(row[col("to")]));
        const int layer = int(num(row[col("layer")]));
        double sink = 0, content = 0, delta = 0, scale = 0;
        int64_t n = 0;
        for (const auto& [key, p0] : rows[a]) {
            if (layer >= 0 && std::get<1>(key) != layer) continue;
            const auto it = rows[b].find(key);
            if (it == rows[b].end()) continue;
            const Parts& p1 = it->second;
            sink += hb(p1.s) - hb(p0.s) + (p0.s - p1.s) * (p0.hpi + p1.hpi) / 2;
            content += (1 - (p0.s + p1.s) / 2) * (p1.hpi - p0.hpi);
            delta += p1.h - p0.h;
            scale += p0.h + p1.h + 1;
            ++n;
        }
        SCOPED_TRACE(text(row[col("from")]) + " -> " + text(row[col("to")]) + " layer " +
                     std::to_string(layer));
        EXPECT_EQ(int64_t(num(row[col("n_rows")])), n);
        // Two float64 evaluations of sums of n rows of ~10 operations each (1 - s written two
        // ways: from s here, from the content parts in the tool): 2 gamma_{10 n} of the scale.
        const double tol = 2 * testutil::gamma_k(10.0 * double(n), testutil::kU64) * scale;
        EXPECT_NEAR(num(row[col("sink_term")]), sink, tol);
        EXPECT_NEAR(num(row[col("content_term")]), content, tol);
        EXPECT_NEAR(num(row[col("delta_entropy")]), delta, tol);
        EXPECT_LE(std::abs(num(row[col("sink_term")]) + num(row[col("content_term")]) -
                           num(row[col("delta_entropy")])),
                  1e-9);
        EXPECT_LE(std::abs(num(row[col("residual")])), 1e-9);
        ++n_pairs;
    }
    // 7 consecutive pairs and first-to-last, each for the model and its 2 layers.
    EXPECT_EQ(n_pairs, 8u * 3u);
    // The trajectory lists every checkpoint.
    const io::Table traj = io::Table::read_csv(tmp / "dyn/trajectory.csv");
    std::set<std::string> seen;
    for (const auto& row : traj.rows()) seen.insert(text(row[1]));
    EXPECT_EQ(seen.size(), 8u);
}

// Killed after the second of four checkpoints, --resume keeps the two finished ones and gives
// the tables of an uninterrupted run, byte for byte.
TEST(CliDynamics, KilledRunResumesToIdenticalTables) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    testutil::ScratchDir tmp;
    const fs::path manifest = train_series(tmp, "tiny", 40, "series");
    ASSERT_EQ(run_cli(dynamics_args(manifest, tmp / "whole")).exit_code, 0);
    auto args = dynamics_args(manifest, tmp / "cut");
    args.insert(args.end(), {"--debug-kill-after", "2"});
    const auto killed = run_cli(args);
    ASSERT_NE(killed.exit_code, 0);
    EXPECT_FALSE(fs::exists(tmp / "cut"));
    auto again = dynamics_args(manifest, tmp / "cut");
    const auto refused = run_cli(again);  // without --resume: told how to proceed
    EXPECT_NE(refused.exit_code, 0);
    EXPECT_NE(refused.err.find("--resume"), std::string::npos) << refused.err;
    again.push_back("--resume");
    const auto resumed = run_cli(again);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_NE(resumed.out.find("finished earlier, kept"), std::string::npos) << resumed.out;
    EXPECT_EQ(tables(tmp / "cut"), tables(tmp / "whole"));
}

// A missing path, a repeated step, and checkpoints of two architectures or two vocabularies in
// one series: one line naming the manifest, no model run, nothing written.
TEST(CliDynamics, MalformedSeriesIsRefusedBeforeAnyModelRuns) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    testutil::ScratchDir tmp;
    const fs::path llama = train_series(tmp, "tiny", 10, "llama").parent_path();
    const fs::path gpt2 = train_series(tmp, "tiny-gpt2", 10, "gpt2").parent_path();
    const std::string ck = "checkpoints/step_000010";
    std::vector<std::pair<std::string, std::string>> cases = {
        {"[{\"step\": 1, \"path\": \"" + (tmp / "nowhere").string() + "\"}]", "does not exist"},
        {"[{\"step\": 1, \"path\": \"" + (llama / ck).string() + "\"}, {\"step\": 1, \"path\": \"" +
             (llama / ck).string() + "\"}]",
         "step 1 appears twice"},
        {"[{\"step\": 1, \"path\": \"" + (llama / ck).string() + "\"}, {\"step\": 2, \"path\": \"" +
             (gpt2 / ck).string() + "\"}]",
         "one series holds checkpoints of one architecture"},
    };
    // The same shape with a BPE vocabulary of 300 instead of the 257 bytes.
    const auto bpe = run_cli({"train", "--preset", "tiny", "--text", (tmp / "corpus.txt").string(),
                              "--out", (tmp / "bpe").string(), "--steps", "10", "--vocab", "300",
                              "--threads", "1", "--progress", "never"});
    ASSERT_EQ(bpe.exit_code, 0) << bpe.err;
    cases.push_back({"[{\"step\": 1, \"path\": \"" + (llama / ck).string() +
                         "\"}, {\"step\": 2, \"path\": \"" + (tmp / "bpe" / ck).string() + "\"}]",
                     "has a vocabulary of"});
    for (const auto& [text, phrase] : cases) {
        SCOPED_TRACE(text);
        testutil::write_text(tmp / "m.json", text);
        const auto before = snapshot_tree(tmp.path());
        const auto r = run_cli(dynamics_args(tmp / "m.json", tmp / "out"));
        EXPECT_EQ(r.exit_code, 3) << r.err;  // an input error
        EXPECT_EQ(r.err.rfind("sinkscope: error: " + (tmp / "m.json").string(), 0), 0u) << r.err;
        EXPECT_NE(r.err.find(phrase), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_EQ(r.out.find("checkpoint 1/"), std::string::npos) << r.out;
        EXPECT_EQ(snapshot_tree(tmp.path()), before);
    }
}

// The reports of dynamics and of compare (over the dynamics run's checkpoints) draw every figure
// in headless Chromium with the layout properties the page checks itself (no empty panel, titled
// axes, integer layer ticks, no text outside a figure).
TEST(CliDynamics, ReportsDrawInChromium) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    testutil::ScratchDir tmp;
    const fs::path manifest = train_series(tmp, "tiny", 40, "series");
    auto args = dynamics_args(manifest, tmp / "dyn");
    args.pop_back();  // with the report
    const auto r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto c = run_cli({"compare", (tmp / "dyn").string(), "--out", (tmp / "cmp").string()});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    if (!fs::exists(tmp / "dyn/report.html")) {
        if (std::getenv("CI")) FAIL() << "Vega runtime missing in CI";
        GTEST_SKIP() << "this build has no Vega runtime: " << r.out;
    }
    if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
        if (std::getenv("CI")) FAIL() << "chromium missing in CI";
        GTEST_SKIP() << "chromium not installed (scripts/install-deps.sh)";
    }
    for (const auto& [page, min_figures] :
         {std::pair{tmp / "dyn/report.html", 5}, std::pair{tmp / "cmp/report.html", 2}}) {
        testutil::expect_clean_report_layout(page, min_figures);
    }
}

// The shipped series (models/default/manifest.json, the checkpoints of the default model's
// training run): trajectory.csv follows, for every checkpoint, Sink_eps and the model's sink
// geometry (key norm at the sink, absolute and against the other keys', and the queries' cosine
// with the sink's key, absolute, against the others' and in excess), each the very value of the
// checkpoint's own sink_eps.csv and sink_geometry.csv; the report draws them as one figure.
TEST(CliDynamics, ShippedSeriesShowsWhenTheSinkFormed) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    testutil::ScratchDir tmp;
    const fs::path repo = fs::path(__FILE__).parent_path().parent_path().parent_path();
    const fs::path manifest = repo / "models/default/manifest.json";
    ASSERT_TRUE(fs::exists(manifest)) << manifest;
    auto args = dynamics_args(manifest, tmp / "dyn");
    args.pop_back();  // with the report
    const auto r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto run = nlohmann::json::parse(std::ifstream(tmp / "dyn/run.json"));
    const auto series = nlohmann::json::parse(std::ifstream(manifest))["checkpoints"];
    ASSERT_EQ(run["checkpoints"].size(), series.size());
    ASSERT_GE(series.size(), 2u);

    auto num = [](const io::Cell& c) { return std::get<double>(c); };
    auto text = [](const io::Cell& c) {
        if (const auto* d = std::get_if<double>(&c)) return io::format_number(*d);
        return std::get<std::string>(c);
    };
    // metric -> the model's value (layer and head -1) in one of a checkpoint's long tables.
    auto model_values = [&](const fs::path& file) {
        const io::Table tab = io::Table::read_csv(file);
        const auto& cols = tab.columns();
        auto col = [&](const char* n) {
            return size_t(std::find(cols.begin(), cols.end(), n) - cols.begin());
        };
        std::map<std::string, double> out;
        for (const auto& row : tab.rows())
            if (num(row[col("layer")]) < 0 && num(row[col("head")]) < 0)
                out[text(row[col("metric")])] = num(row[col("value")]);
        return out;
    };
    const std::vector<std::string> geometry = {"key_norm_sink",    "key_norm_others",
                                               "key_norm_ratio",   "qk_cosine_sink",
                                               "qk_cosine_others", "qk_cosine_excess"};
    // trajectory.csv's model rows: (checkpoint label, metric) -> (step, value).
    const io::Table traj = io::Table::read_csv(tmp / "dyn/trajectory.csv");
    const auto& cols = traj.columns();
    auto col = [&](const char* n) {
        return size_t(std::find(cols.begin(), cols.end(), n) - cols.begin());
    };
    std::map<std::pair<std::string, std::string>, std::pair<double, double>> rows;
    for (const auto& row : traj.rows())
        if (num(row[col("layer")]) < 0)
            rows[{text(row[col("checkpoint")]), text(row[col("metric")])}] = {
                num(row[col("step")]), num(row[col("value")])};
    for (size_t k = 0; k < series.size(); ++k) {
        const fs::path dir = tmp / "dyn" / run["checkpoints"][k]["path"].get<std::string>();
        const std::string label = run["checkpoints"][k]["label"].get<std::string>();
        SCOPED_TRACE("checkpoint " + label);
        const double step = series[k]["step"].get<double>();
        const auto geo = model_values(dir / "sink_geometry.csv");
        const auto eps = model_values(dir / "sink_eps.csv");
        for (const std::string& m : geometry) {
            const auto it = rows.find({label, m});
            ASSERT_NE(it, rows.end()) << m;
            EXPECT_EQ(it->second.first, step) << m;
            ASSERT_TRUE(std::isfinite(it->second.second)) << m;
            EXPECT_EQ(it->second.second, geo.at(m)) << m;  // the same number, written and read
        }
        const auto it = rows.find({label, "sink_eps"});
        ASSERT_NE(it, rows.end());
        EXPECT_EQ(it->second.second, eps.at("sink_eps"));
        // The ranges of the definitions: a ratio of norms, cosines.
        EXPECT_GE(rows.at({label, "key_norm_ratio"}).second, 0.0);
        EXPECT_LE(std::abs(rows.at({label, "qk_cosine_sink"}).second), 1.0);
        EXPECT_LE(std::abs(rows.at({label, "qk_cosine_others"}).second), 1.0);
    }
    if (fs::exists(tmp / "dyn/report.html")) {
        const std::string page = read_file(tmp / "dyn/report.html");
        EXPECT_NE(page.find("When the sink formed"), std::string::npos);
    }
}

// A path the file system cannot examine (a symbolic link loop) is one line naming it, not
// libstdc++'s "filesystem error: ... Too many levels of symbolic links" with exit 1 (issue 46
// item 10): `dynamics --checkpoints` naming a folder whose model.safetensors is a loop, the same
// folder as `analyze --model`, and a `--data` file that is a loop; nothing is written.
TEST(CliDynamics, SymbolicLinkLoopIsOneLineNamingThePath) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const fs::path ck = tmp / "series" / "ck";
    fs::create_directories(ck);
    for (const auto& e : fs::directory_iterator(shared / "models" / "tinystories656K"))
        if (e.path().filename() != "model.safetensors")
            testutil::write_text(ck / e.path().filename(), read_file(e.path()));
    fs::create_symlink("model.safetensors", ck / "model.safetensors");  // points at itself
    testutil::write_text(tmp / "series" / "manifest.json",
                         R"({"checkpoints": [{"path": "ck", "step": 0}]})");
    fs::create_symlink("loop.txt", tmp / "loop.txt");
    testutil::write_text(tmp / "a.txt", "One short line.\n");
    const std::string weights = (ck / "model.safetensors").string();
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"dynamics", "--checkpoints=" + (tmp / "series" / "manifest.json").string(),
          "--data=" + (tmp / "a.txt").string(), "--out=" + (tmp / "out").string()},
         weights},
        {{"analyze", "--model=" + ck.string(), "--data=" + (tmp / "a.txt").string(),
          "--out=" + (tmp / "out").string()},
         weights},
        {{"analyze", "--model=" + (shared / "models" / "tinystories656K").string(),
          "--data=" + (tmp / "loop.txt").string(), "--out=" + (tmp / "out").string()},
         (tmp / "loop.txt").string()},
    };
    for (const auto& [args, path] : cases) {
        SCOPED_TRACE(args[0] + " " + args[1] + " " + args[2]);
        const auto r = run_cli(args);
        // 2 where the command line's own check of --data finds it (a usage error).
        EXPECT_TRUE(r.exit_code == 2 || r.exit_code == 3 || r.exit_code == 5)
            << r.exit_code << ": " << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("symbolic links"), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find("filesystem error"), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(tmp / "out")) << r.err;
        EXPECT_FALSE(fs::exists(tmp / "out.partial")) << r.err;
    }
}
