// `sinkscope metrics` end to end: the example run writes every table; bad input gives one line on
// stderr naming the file (and the first offending index), a non-zero exit and no output folder.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/npy.hpp"
#include "testing.hpp"

using namespace sinkscope;
namespace fs = std::filesystem;

namespace {

// Causal softmax rows of seeded logits, [N, L, H, T, T] row-major.
std::vector<float> causal_attention(int64_t n, int64_t l, int64_t h, int64_t t, uint64_t seed = 1) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> g;
    std::vector<float> a(size_t(n * l * h * t * t), 0.0f);
    for (int64_t r = 0; r < n * l * h * t; ++r) {
        const int64_t i = r % t;
        std::vector<double> e(size_t(i + 1));
        double s = 0;
        for (auto& v : e) s += (v = std::exp(g(rng) + (&v == &e[0] ? 2.0 : 0.0)));
        for (int64_t j = 0; j <= i; ++j) a[size_t(r * t + j)] = float(e[j] / s);
    }
    return a;
}

size_t count_lines(const std::string& s) {
    return size_t(std::count(s.begin(), s.end(), '\n'));
}

// Runs metrics on `input` into scratch/out and checks the bad-input contract.
void expect_rejected(const testutil::ScratchDir& dir, const fs::path& input,
                     const std::vector<std::string>& must_contain,
                     std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"metrics", "--attention", input.string(), "--out",
                                     (dir / "out").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = testutil::run_cli(args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_EQ(r.err.rfind("sinkscope: error: ", 0), 0u) << r.err;
    for (const auto& s : must_contain)
        EXPECT_NE(r.err.find(s), std::string::npos) << r.err << " lacks " << s;
    EXPECT_FALSE(fs::exists(dir / "out"));
    for (const auto& e : fs::directory_iterator(dir.path()))  // no staging folder left either
        EXPECT_EQ(e.path().filename().string().rfind("out", 0), std::string::npos) << e.path();
}

}  // namespace

// --example runs and writes every table, distance matrix and run.json; the head table's sink
// mass agrees with a mean computed here from the written attention.npy.
TEST(MetricsCli, ExampleWritesEveryTable) {
    testutil::ScratchDir dir;
    const fs::path out = dir / "example";
    auto r = testutil::run_cli({"metrics", "--example", "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("rho"), std::string::npos);
    for (const char* f :
         {"heads.csv", "heads.jsonl", "distances.csv", "dispersion.csv", "dispersion.jsonl",
          "sinks.csv", "sink_by_position.csv", "run.json", "attention.npy",
          // head analyses (spec 3, 4, 7) and section 8, run by default
          "reversal.csv", "clusters.csv", "ari.csv", "regime.csv", "graphs.csv", "topology.csv",
          "betti.csv", "kl.csv", "spectra.csv", "entropy.csv", "tokens.csv", "frame.json"})
        EXPECT_TRUE(fs::exists(out / f)) << f;
    for (const char* name : {"dA", "dA_perp", "sink_term", "cosine_keep", "cosine_drop", "js_keep",
                             "js_drop", "euclidean_keep", "euclidean_drop"}) {
        io::NpyArray m = io::read_npy(out / "distances" / (std::string(name) + ".npy"));
        EXPECT_EQ(m.shape, (std::vector<int64_t>{16, 16})) << name;
    }
    auto run = nlohmann::json::parse(read_file(out / "run.json"));
    EXPECT_EQ(run["masking"]["rule"], "causal");
    EXPECT_EQ(run["counts"]["rows_excluded"], 8 * 16 * 2);  // rows 0 and 1 have D < 3
    EXPECT_EQ(run["zero_policy"], "error");
    // one model-wide and one per-layer sink row per input, all at key 0 under the first policy
    std::string sinks = read_file(out / "sinks.csv");
    EXPECT_EQ(count_lines(sinks), 1u + 8 * 5);
    EXPECT_EQ(sinks.find(",1\n"), std::string::npos);

    io::NpyArray a = io::read_npy(out / "attention.npy");
    ASSERT_EQ(a.shape, (std::vector<int64_t>{8, 4, 4, 16, 16}));
    std::vector<double> v = a.to_f64();
    double mass = 0;
    int rows = 0;
    for (int64_t n = 0; n < 8; ++n)
        for (int64_t i = 2; i < 16; ++i) {  // layer 2, head 1
            const double* row = &v[size_t((((n * 4 + 2) * 4 + 1) * 16 + i) * 16)];
            double s = 0;
            for (int64_t j = 0; j <= i; ++j) s += row[j];
            mass += row[0] / s, ++rows;
        }
    std::string heads = read_file(out / "heads.csv");
    auto at = heads.find("example,,2,1,sink_mass,,");
    ASSERT_NE(at, std::string::npos);
    double reported = std::stod(heads.substr(at + 24));
    EXPECT_REL_WITHIN(reported, mass / rows, testutil::kF64SumRel);  // a mean over the rows
}

// distances.csv (written from text, not cells: compositional.cpp) holds every pair a < b of
// every distance matrix, in the documented order, with the .npy matrices' values exactly
// (shortest round-trip numbers parse back to the same doubles).
TEST(MetricsCli, DistancesCsvHoldsTheMatricesExactly) {
    testutil::ScratchDir dir;
    const fs::path out = dir / "example";
    auto r = testutil::run_cli({"metrics", "--example", "--out", out.string(), "--no-report"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream csv(read_file(out / "distances.csv"));
    std::string line;
    ASSERT_TRUE(std::getline(csv, line));
    EXPECT_EQ(line, "distance,layer_a,head_a,layer_b,head_b,value");
    const int64_t n = 16, heads_per_layer = 4;  // the example: 4 layers x 4 heads
    for (const char* name : {"dA", "dA_perp", "sink_term", "cosine_keep", "cosine_drop", "js_keep",
                             "js_drop", "euclidean_keep", "euclidean_drop"}) {
        const std::vector<double> m =
            io::read_npy(out / "distances" / (std::string(name) + ".npy")).to_f64();
        for (int64_t a = 0; a < n; ++a)
            for (int64_t b = a + 1; b < n; ++b) {
                ASSERT_TRUE(std::getline(csv, line)) << name << " " << a << " " << b;
                std::istringstream fields(line);
                std::string f[6];
                for (auto& x : f) std::getline(fields, x, ',');
                EXPECT_EQ(f[0], name);
                EXPECT_EQ(std::stoll(f[1]) * heads_per_layer + std::stoll(f[2]), a) << line;
                EXPECT_EQ(std::stoll(f[3]) * heads_per_layer + std::stoll(f[4]), b) << line;
                EXPECT_EQ(std::strtod(f[5].c_str(), nullptr), m[size_t(a * n + b)]) << line;
            }
    }
    EXPECT_FALSE(std::getline(csv, line)) << "extra line: " << line;
}

// The distances do not depend on how many threads the system BLAS has (OpenBLAS reads
// OPENBLAS_NUM_THREADS at start, default all cores): the Aitchison Gram products go to BLAS, whose
// split of a product, and with it the last bits, depends on that count, so metrics runs BLAS on
// one thread. 144 heads at T = 96 are enough for OpenBLAS to split those products (without the
// one-thread rule dA differed in the last digits here). With another BLAS the variable does
// nothing and the test passes trivially.
TEST(MetricsCli, DistancesDoNotDependOnBlasThreads) {
    testutil::ScratchDir dir;
    io::write_npy(dir / "a.npy",
                  io::make_npy_f32({1, 12, 12, 96, 96}, causal_attention(1, 12, 12, 96, 7)));
    // The variable as the test found it (scripts/check-portability.sh sets it), put back after.
    const char* found = std::getenv("OPENBLAS_NUM_THREADS");
    const std::string before = found ? found : "";
    auto restore = [&] {
        if (found)
            ::setenv("OPENBLAS_NUM_THREADS", before.c_str(), 1);
        else
            ::unsetenv("OPENBLAS_NUM_THREADS");
    };
    std::string distances[2];
    for (int k = 0; k < 2; ++k) {
        const std::string threads = std::to_string(k + 1);
        ::setenv("OPENBLAS_NUM_THREADS", threads.c_str(), 1);
        const fs::path out = dir / ("out" + threads);
        auto r =
            testutil::run_cli({"metrics", "--attention", (dir / "a.npy").string(), "--analyses",
                               "compositional", "--no-report", "--out", out.string()});
        restore();
        ASSERT_EQ(r.exit_code, 0) << r.err;
        distances[k] = read_file(out / "distances.csv");
    }
    EXPECT_GT(count_lines(distances[0]), 1000u);
    EXPECT_TRUE(distances[0] == distances[1])
        << "distances.csv differs between 1 and 2 BLAS threads";
}

// Any one analysis alone runs to the end with the report on: entropy alone has its own figure;
// statistics alone has no figure, so the run is written without report.html and says so (both
// used to fail with "holds no table to report on" and leave nothing).
TEST(MetricsCli, EachAnalysisAloneWithTheReport) {
    testutil::ScratchDir dir;
    {
        auto r = testutil::run_cli(
            {"metrics", "--example", "--analyses", "sink_eps", "--out", (dir / "probe").string()});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        if (!fs::exists(dir / "probe" / "report.html")) {
            if (std::getenv("CI")) FAIL() << "Vega runtime missing in CI";
            GTEST_SKIP() << "this build has no Vega runtime: " << r.out;
        }
    }
    for (const char* a : {"sink_eps", "compositional", "heads", "graphs", "topology", "kl",
                          "spectra", "entropy", "tokens", "frame", "statistics"}) {
        const fs::path out = dir / a;
        auto r =
            testutil::run_cli({"metrics", "--example", "--analyses", a, "--out", out.string()});
        ASSERT_EQ(r.exit_code, 0) << a << ": " << r.err;
        EXPECT_TRUE(fs::exists(out / "run.json")) << a;
        const bool reported = fs::exists(out / "report.html");
        if (std::string(a) == "statistics") {
            EXPECT_FALSE(reported);
            EXPECT_NE(r.out.find("report.html not written"), std::string::npos) << r.out;
        } else {
            EXPECT_TRUE(reported) << a << ": " << r.err;
        }
    }
    EXPECT_NE(read_file(dir / "entropy" / "report.html").find("Attention entropy per layer"),
              std::string::npos);
}

// `metrics --help` explains every option with its default.
TEST(MetricsCli, HelpListsOptionsAndDefaults) {
    auto r = testutil::run_cli({"metrics", "--help"});
    EXPECT_EQ(r.exit_code, 0);
    for (const char* s :
         {"--attention", "--scores", "--causal", "--bidirectional", "--window", "--lengths",
          "--token-ids", "--sink", "--bos-id", "--zeros", "--min-parts", "--scope", "--analyses",
          "--example", "--out", "auto", "error", "model", "compositional"})
        EXPECT_NE(r.out.find(s), std::string::npos) << s;
    auto top = testutil::run_cli({"--help"});
    EXPECT_NE(top.out.find("metrics"), std::string::npos);
}

// A truncated .npy is rejected naming the file.
TEST(MetricsCli, TruncatedFile) {
    testutil::ScratchDir dir;
    std::string bytes =
        io::serialize_npy(io::make_npy_f32({1, 1, 4, 4}, causal_attention(1, 1, 1, 4)));
    bytes.resize(bytes.size() - 10);
    std::ofstream(dir / "a.npy", std::ios::binary) << bytes;
    expect_rejected(dir, dir / "a.npy", {(dir / "a.npy").string(), "truncated"});
}

// Rank 3 is rejected naming the file and the expected shapes.
TEST(MetricsCli, WrongRank) {
    testutil::ScratchDir dir;
    io::write_npy(dir / "a.npy", io::make_npy_f32({2, 4, 4}, causal_attention(1, 1, 2, 4)));
    expect_rejected(dir, dir / "a.npy", {(dir / "a.npy").string(), "rank 3"});
}

// Integer attention is an unsupported dtype.
TEST(MetricsCli, UnsupportedDtype) {
    testutil::ScratchDir dir;
    io::write_npy(dir / "a.npy", io::make_npy_i64({1, 1, 4, 4}, std::vector<int64_t>(16, 0)));
    expect_rejected(dir, dir / "a.npy", {(dir / "a.npy").string(), "<i8"});
}

// A NaN in a visible entry names its (n, l, h, i, j).
TEST(MetricsCli, NaNNamesIndex) {
    testutil::ScratchDir dir;
    auto a = causal_attention(2, 2, 2, 5);
    a[size_t((((1 * 2 + 0) * 2 + 1) * 5 + 3) * 5 + 2)] = NAN;  // (1, 0, 1, 3, 2)
    io::write_npy(dir / "a.npy", io::make_npy_f32({2, 2, 2, 5, 5}, a));
    expect_rejected(dir, dir / "a.npy", {(dir / "a.npy").string(), "NaN", "(1, 0, 1, 3, 2)"});
}

// A row whose visible sum is off by more than 1e-3 names its (n, l, h, i).
TEST(MetricsCli, RowNotSummingToOne) {
    testutil::ScratchDir dir;
    auto a = causal_attention(2, 2, 2, 5);
    a[size_t((((0 * 2 + 1) * 2 + 0) * 5 + 4) * 5 + 0)] += 0.01f;  // row (0, 1, 0, 4)
    io::write_npy(dir / "a.npy", io::make_npy_f32({2, 2, 2, 5, 5}, a));
    expect_rejected(dir, dir / "a.npy", {(dir / "a.npy").string(), "(0, 1, 0, 4)", "sums to"});
}

// Scores whose shape differs from the attention's are rejected naming the scores file.
TEST(MetricsCli, ScoresShapeMismatch) {
    testutil::ScratchDir dir;
    io::write_npy(dir / "a.npy", io::make_npy_f32({1, 1, 4, 4}, causal_attention(1, 1, 1, 4)));
    io::write_npy(dir / "z.npy", io::make_npy_f32({1, 1, 3, 3}, std::vector<float>(9, 0.0f)));
    expect_rejected(dir, dir / "a.npy", {(dir / "z.npy").string(), "differs"},
                    {"--scores", (dir / "z.npy").string()});
}

// An exact zero is refused under --zeros error (naming the index) and accepted with replace.
TEST(MetricsCli, ZeroPolicyFromCli) {
    testutil::ScratchDir dir;
    auto a = causal_attention(1, 1, 1, 5);
    float* row = &a[size_t(4 * 5)];
    row[0] += row[3];
    row[3] = 0.0f;
    io::write_npy(dir / "a.npy", io::make_npy_f32({1, 1, 5, 5}, a));
    expect_rejected(dir, dir / "a.npy", {"(0, 0, 0, 4, 3)", "replace"});
    auto r = testutil::run_cli({"metrics", "--attention", (dir / "a.npy").string(), "--zeros",
                                "replace:1e-9", "--out", (dir / "ok").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto run = nlohmann::json::parse(read_file(dir / "ok" / "run.json"));
    EXPECT_EQ(run["zero_policy"].get<std::string>().rfind("replace:", 0), 0u);
}

// Bidirectional attention is detected (something above the diagonal is non-zero) and recorded,
// and the auto sink policy then resolves to argmax.
TEST(MetricsCli, DetectsBidirectional) {
    testutil::ScratchDir dir;
    std::vector<float> a(2 * 4 * 4, 0.25f);
    io::write_npy(dir / "a.npy", io::make_npy_f32({1, 2, 4, 4}, a));
    auto r = testutil::run_cli({"metrics", "--attention", (dir / "a.npy").string(), "--zeros",
                                "replace:1e-9", "--out", (dir / "o").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto run = nlohmann::json::parse(read_file(dir / "o" / "run.json"));
    EXPECT_EQ(run["masking"]["rule"], "bidirectional");
    EXPECT_EQ(run["masking"]["auto_detected"], true);
    EXPECT_EQ(run["sink_policy"]["resolved"], "argmax");
}

// Usage errors (unknown analysis, bad sink) exit with the usage code and leave nothing.
TEST(MetricsCli, UsageErrors) {
    testutil::ScratchDir dir;
    auto r = testutil::run_cli(
        {"metrics", "--example", "--analyses", "nonsense", "--out", (dir / "o").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_FALSE(fs::exists(dir / "o"));
    r = testutil::run_cli(
        {"metrics", "--example", "--sink", "last", "--out", (dir / "o").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    // a fixed sink position beyond the 16 example tokens
    r = testutil::run_cli({"metrics", "--example", "--sink", "16", "--out", (dir / "o").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("beyond"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "o"));
}

// Scores (masked = -inf) and token ids end to end: quantities come from the scores, and
// --sink bos resolves to the first BOS position of each input.
TEST(MetricsCli, ScoresAndBosSink) {
    testutil::ScratchDir dir;
    const int64_t n = 2, l = 1, h = 2, t = 5;
    std::mt19937_64 rng(3);
    std::normal_distribution<double> g;
    std::vector<double> z(size_t(n * l * h * t * t), -INFINITY), a(z.size(), 0.0);
    for (int64_t r = 0; r < n * l * h * t; ++r) {
        const int64_t i = r % t;
        double s = 0;
        for (int64_t j = 0; j <= i; ++j) s += std::exp(z[size_t(r * t + j)] = g(rng));
        for (int64_t j = 0; j <= i; ++j) a[size_t(r * t + j)] = std::exp(z[size_t(r * t + j)]) / s;
    }
    io::write_npy(dir / "a.npy", io::make_npy_f64({n, l, h, t, t}, a));
    io::write_npy(dir / "z.npy", io::make_npy_f64({n, l, h, t, t}, z));
    io::write_npy(dir / "ids.npy", io::make_npy_i64({n, t}, {7, 1, 4, 1, 5, 1, 9, 9, 9, 9}));
    auto r = testutil::run_cli({"metrics", "--attention", (dir / "a.npy").string(), "--scores",
                                (dir / "z.npy").string(), "--token-ids", (dir / "ids.npy").string(),
                                "--sink", "bos", "--bos-id", "1", "--out", (dir / "o").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto run = nlohmann::json::parse(read_file(dir / "o" / "run.json"));
    EXPECT_EQ(run["quantities_from"].get<std::string>().rfind("scores", 0), 0u);
    EXPECT_EQ(run["sink_policy"]["positions"][0]["model"], 1);
    EXPECT_EQ(run["sink_policy"]["positions"][1]["model"], 0);
    // input 0: rows 0 (D = 1) and 1 (D = 2 < 3) are excluded; the sink at 1 is visible after
    EXPECT_EQ(run["counts"]["rows_excluded"], 2 * 2 * 2);
    EXPECT_EQ(run["counts"]["sink_not_visible"], 0);
    EXPECT_EQ(run["inputs"].size(), 3u);
}
