// `sinkscope analyze` end to end on the real tinystories656K model: every table written and
// consistent with the metric identities, the report drawn in headless Chromium, bad input
// rejected cleanly, and an interrupted run resumed to identical results.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../../model/forward_bound.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/table.hpp"
#include "sinkscope/model/model.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;
using sinkscope::testutil::run_cli;

namespace {

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The tables every full analyze run writes (besides run.json and report.html).
const std::vector<std::string> kTables = {
    "heads.csv",        "distances.csv",     "dispersion.csv",
    "sinks.csv",        "reversal.csv",      "clusters.csv",
    "ari.csv",          "regime.csv",        "silhouette.csv",
    "graphs.csv",       "topology.csv",      "betti.csv",
    "kl.csv",           "spectra.csv",       "entropy.csv",
    "tokens.csv",       "token_keys.csv",    "value_space.csv",
    "correlations.csv", "paired_tests.csv",  "sink_by_position.csv",
    "regions.csv",      "sink_geometry.csv", "frame_signatures.csv"};

}  // namespace

// 100 STEM sentences through tinystories656K: every table is non-empty, the head-level
// Pythagorean identity D_A^2 = D_perp^2 + D_b^2 holds on the model's rows (up to the float64
// rounding of the stored distances), and the
// report renders with every figure drawn and no script error.
TEST(Analyze, TinyStoriesStemSentences) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const fs::path out = tmp / "run";
    auto r = run_cli({"analyze", "--model", (shared / "models/tinystories656K").string(), "--data",
                      (shared / "data/stem_sentences.csv").string(), "--text-column", "text",
                      "--samples", "100", "--max-tokens", "48", "--out", out.string(), "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    for (const auto& t : kTables) {
        ASSERT_TRUE(fs::exists(out / t)) << t;
        EXPECT_GT(io::Table::read_csv(out / t).size(), 0u) << t;
    }
    EXPECT_TRUE(fs::exists(out / "frame.json"));
    EXPECT_TRUE(fs::exists(out / "run.json"));
    EXPECT_FALSE(fs::exists(tmp / "run.partial"));
    // The trained model's BOS sink reads centralized from its signatures (docs/metrics.md
    // "Reference-frame type"; 15 of 16 heads specialised, 14 of them on the BOS token), where
    // the rule alone (82% of the anchors at the first position < 90%) says distributed.
    const auto frame = nlohmann::json::parse(slurp(out / "frame.json"));
    EXPECT_EQ(frame["verdict"], "centralized") << frame.dump(1);
    EXPECT_EQ(frame["rule_verdict"], "distributed");
    EXPECT_GE(frame["signature_verdict"]["margin"].get<double>(), 0.2);

    auto dA = io::read_npy(out / "distances/dA.npy").to_f64();
    auto dp = io::read_npy(out / "distances/dA_perp.npy").to_f64();
    auto db = io::read_npy(out / "distances/sink_term.npy").to_f64();
    ASSERT_EQ(dA.size(), 16u * 16u);  // 2 layers x 8 heads
    double worst = 0;
    for (size_t k = 0; k < dA.size(); ++k) {
        double lhs = dA[k] * dA[k], rhs = dp[k] * dp[k] + db[k] * db[k];
        worst = std::max(worst, std::abs(lhs - rhs) / std::max(1e-300, std::max(lhs, rhs)));
    }
    // Exact in float64 (spec section 1: 1e-10 relative per row); the head-level distances are means
    // over 100 inputs of up to 48 rows (reordered sums: kF64SumRel) before being squared.
    EXPECT_ERROR_WITHIN(worst, testutil::kSpecIdentityRel);

    // run.json records the conventions that change results.
    std::string run = slurp(out / "run.json");
    for (const char* key : {"\"sink_policy\"", "\"bos_policy\"", "\"zero_policy\"", "\"min_parts\"",
                            "\"sha256\"", "\"peak_rss_bytes\"", "\"ref_frame\""})
        EXPECT_NE(run.find(key), std::string::npos) << key;

    if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
        if (std::getenv("CI")) FAIL() << "chromium missing in CI";
        GTEST_SKIP() << "chromium not installed (scripts/install-deps.sh)";
    }
    ASSERT_TRUE(fs::exists(out / "report.html"));
    const fs::path shot = fs::absolute("analyze_report.png");
    auto dom = testutil::render_in_chromium(out / "report.html", shot);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(dom, m, std::regex("id=\"status\"[^>]*>([^<]*)"))) << dom.size();
    const std::string status = m.str();
    EXPECT_NE(status.find("data-done=\"1\""), std::string::npos) << status;
    EXPECT_NE(status.find("data-errors=\"0\""), std::string::npos) << status;
    std::smatch f, d;
    ASSERT_TRUE(std::regex_search(status, f, std::regex("data-figures=\"(\\d+)\"")));
    ASSERT_TRUE(std::regex_search(status, d, std::regex("data-drawn=\"(\\d+)\"")));
    EXPECT_GE(std::stoi(f[1]), 12);
    EXPECT_EQ(f[1], d[1]) << status;
    EXPECT_TRUE(fs::exists(shot));
    testutil::expect_clean_report_layout(out / "report.html", 12);
}

// An interrupted 200-sample run (SIGKILL after 110 inputs, state saved every 20) resumes to
// tables identical byte for byte to those of an uninterrupted run.
TEST(Analyze, ResumeAfterSigkillIsIdentical) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const std::string model = (shared / "models/tinystories656K").string();
    // Per-input tables and the statistics' state are resumed too.
    std::vector<std::string> base = {
        "analyze",     "--model",      model,         "--samples",
        "200",         "--max-tokens", "16",          "--checkpoint-every",
        "20",          "--quiet",      "--no-report", "--per-input",
        "--bootstrap", "100"};
    auto with = [&](std::vector<std::string> extra) {
        auto v = base;
        v.insert(v.end(), extra.begin(), extra.end());
        return v;
    };
    auto full = run_cli(with({"--out", (tmp / "full").string()}));
    ASSERT_EQ(full.exit_code, 0) << full.err;
    auto killed = run_cli(with({"--out", (tmp / "resumed").string(), "--debug-kill-after", "110"}));
    EXPECT_EQ(killed.exit_code, 128 + 9);
    EXPECT_FALSE(fs::exists(tmp / "resumed"));
    EXPECT_TRUE(fs::exists(tmp / "resumed.partial/state.bin"));
    // Without --resume the interrupted run is not silently discarded.
    auto refused = run_cli(with({"--out", (tmp / "resumed").string()}));
    EXPECT_NE(refused.exit_code, 0);
    EXPECT_NE(refused.err.find("--resume"), std::string::npos) << refused.err;
    auto resumed = run_cli(with({"--out", (tmp / "resumed").string(), "--resume"}));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_NE(resumed.out.find("resuming at input 100"), std::string::npos) << resumed.out;
    // The summary says how many inputs this process analysed besides the total.
    EXPECT_TRUE(std::regex_search(
        resumed.out, std::regex("analyzed 200 inputs \\(\\d+ tokens; 100 in this process, 100 "
                                "resumed from the saved state\\) in ")))
        << resumed.out;
    EXPECT_TRUE(
        std::regex_search(full.out, std::regex("analyzed 200 inputs \\(\\d+ tokens\\) in ")))
        << full.out;
    EXPECT_FALSE(fs::exists(tmp / "resumed.partial"));
    // Byte for byte: both runs are the same code on the same inputs and shapes with the same
    // threads, and the saved state is the accumulators' exact bytes.
    size_t compared = 0;
    for (const auto& e : fs::recursive_directory_iterator(tmp / "full")) {
        if (!e.is_regular_file() || e.path().filename() == "run.json") continue;
        const fs::path rel = fs::relative(e.path(), tmp / "full");
        ASSERT_TRUE(fs::exists(tmp / "resumed" / rel)) << rel;
        EXPECT_EQ(slurp(e.path()), slurp(tmp / "resumed" / rel)) << rel;
        ++compared;
    }
    EXPECT_GE(compared, kTables.size());
}

// --samples N --seed S: N distinct samples drawn with S (the same S, the same inputs), not the
// first N; run.json says how the inputs were chosen. The per-input tables hold N inputs.
TEST(Analyze, SeededRandomSubset) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    auto run = [&](const std::string& name, std::vector<std::string> extra) {
        std::vector<std::string> args = {"analyze",
                                         "--model",
                                         (shared / "models/tinystories656K").string(),
                                         "--data",
                                         (shared / "data/stem_sentences.csv").string(),
                                         "--samples",
                                         "6",
                                         "--max-tokens",
                                         "16",
                                         "--analyses",
                                         "entropy",
                                         "--per-input",
                                         "--quiet",
                                         "--no-report",
                                         "--out",
                                         (tmp / name).string()};
        args.insert(args.end(), extra.begin(), extra.end());
        auto r = run_cli(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return slurp(tmp / name / "entropy_per_input.csv");
    };
    const std::string first = run("first", {}), a = run("a", {"--seed", "11"}),
                      b = run("b", {"--seed", "11"}), c = run("c", {"--seed", "12"});
    EXPECT_EQ(a, b);
    EXPECT_NE(a, first);
    EXPECT_NE(a, c);
    const auto rows = io::Table::read_csv(tmp / "a" / "entropy_per_input.csv");
    const auto& cols = rows.columns();
    const size_t input = size_t(std::find(cols.begin(), cols.end(), "input") - cols.begin());
    std::set<double> inputs;
    for (const auto& r : rows.rows()) inputs.insert(std::get<double>(r[input]));
    EXPECT_EQ(inputs, (std::set<double>{0, 1, 2, 3, 4, 5}));
    // 2 layers x (8 heads + the head average)
    EXPECT_EQ(rows.size(), 6u * 2u * 9u);
    const std::string rec = slurp(tmp / "a" / "run.json");
    EXPECT_NE(rec.find("random subset (seed 11)"), std::string::npos);
    EXPECT_NE(slurp(tmp / "first" / "run.json").find("first samples"), std::string::npos);
}

// Bad input: a missing model, an unknown analysis and an unreadable data file each give one
// line naming the problem, a non-zero exit and no output directory.
TEST(Analyze, BadInputLeavesNothing) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const std::string model = (shared / "models/tinystories656K").string();
    std::ofstream(tmp / "bad.jsonl") << "{\"text\": \"fine\"}\n{broken\n";
    struct Case {
        std::vector<std::string> args;
        std::string needle;
    };
    std::vector<Case> cases = {
        {{"--model", model, "--analyses", "nonsense"}, "unknown analysis 'nonsense'"},
        {{"--model", model, "--data", (tmp / "bad.jsonl").string()}, "line 2"},
        {{"--model", (tmp / "nowhere").string()}, "nowhere"},
    };
    for (const auto& c : cases) {
        std::vector<std::string> args = {"analyze", "--out", (tmp / "out").string(), "--quiet"};
        args.insert(args.end(), c.args.begin(), c.args.end());
        auto r = run_cli(args);
        EXPECT_NE(r.exit_code, 0) << c.needle;
        EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_FALSE(fs::exists(tmp / "out"));
        EXPECT_FALSE(fs::exists(tmp / "out.partial")) << c.needle;
    }
}

namespace {
// Numeric CSV comparison ignoring the `model` column (the two commands name their source
// differently): same rows, same text cells, numbers within `tol` relative to
// max(|x|, |y|, floor).
void expect_same_table(const fs::path& a, const fs::path& b, double tol, double floor = 1e-12) {
    io::Table ta = io::Table::read_csv(a), tb = io::Table::read_csv(b);
    ASSERT_EQ(ta.columns(), tb.columns()) << a.filename();
    ASSERT_EQ(ta.size(), tb.size()) << a.filename();
    double worst = 0;
    for (size_t r = 0; r < ta.size(); ++r)
        for (size_t c = 0; c < ta.columns().size(); ++c) {
            if (ta.columns()[c] == "model") continue;
            const auto &x = ta.rows()[r][c], &y = tb.rows()[r][c];
            if (auto dx = std::get_if<double>(&x)) {
                auto dy = std::get_if<double>(&y);
                ASSERT_NE(dy, nullptr) << a.filename() << " row " << r;
                if (std::isnan(*dx) && std::isnan(*dy)) continue;
                double e = std::abs(*dx - *dy) / std::max({floor, std::abs(*dx), std::abs(*dy)});
                worst = std::max(worst, e);
            } else {
                EXPECT_EQ(x, y) << a.filename() << " row " << r << " column " << ta.columns()[c];
            }
        }
    testutil::record_margin(a.filename().string() + " max relative difference", worst, tol);
    EXPECT_LE(worst, tol) << a.filename();
}
}  // namespace

// One code path for the math: `dump` + `metrics` on the dumped attention, scores and lengths
// give the same tables as `analyze` on the same prompts.
TEST(Analyze, SameNumbersAsDumpPlusMetrics) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const std::string model = (shared / "models/tinystories656K").string();
    std::ofstream(tmp / "p.txt") << "Once upon a time there was a cat.\n"
                                    "The little girl ran to the park with her dog.\n"
                                    "He was sad.\n"
                                    "Tom and Sue built a big castle of sand by the sea.\n";
    const std::string analyses = "compositional,heads,graphs,kl,spectra,entropy,frame";
    auto a = run_cli({"analyze", "--model", model, "--data", (tmp / "p.txt").string(), "--analyses",
                      analyses, "--out", (tmp / "a").string(), "--quiet", "--no-report"});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    auto d = run_cli({"dump", "--model", model, "--data", (tmp / "p.txt").string(), "--hooks",
                      "blocks.*.attn.hook_pattern,blocks.*.attn.hook_attn_scores", "--out",
                      (tmp / "d").string()});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    auto m = run_cli({"metrics", "--attention", (tmp / "d/attention.npy").string(), "--scores",
                      (tmp / "d/attn_scores.npy").string(), "--lengths",
                      (tmp / "d/lengths.npy").string(), "--causal", "--analyses", analyses, "--out",
                      (tmp / "m").string()});
    ASSERT_EQ(m.exit_code, 0) << m.err;
    for (const char* t :
         {"heads.csv", "dispersion.csv", "distances.csv", "sinks.csv", "reversal.csv", "ari.csv",
          "graphs.csv", "kl.csv", "spectra.csv", "entropy.csv"})
        // Both forward each input alone (same code and shapes: bitwise equal float32 attention)
        // and tables print shortest round-trip doubles, so only the float64 metric code's
        // accumulation order differs (streamed vs from the file): kF64SumRel.
        expect_same_table(tmp / "a" / t, tmp / "m" / t, testutil::kF64SumRel);
}

// Long-input mode: with --attention-memory-mb 0 every input's rows are recomputed block by
// block from the captured rotated q and k instead of stored; the continuous results equal the
// stored-attention run up to float32 rounding (relative, absolute below 1), and run.json
// says so.
TEST(Analyze, RecomputedRowsMatchStoredAttention) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const std::string model = (shared / "models/tinystories656K").string();
    std::ofstream(tmp / "p.txt") << "Once upon a time there was a cat who liked to sleep.\n"
                                    "The little girl ran to the park with her dog and a ball.\n"
                                    "He was sad because the rain did not stop all day long.\n";
    const std::string analyses = "compositional,kl,spectra,entropy,value";
    std::vector<std::string> base = {
        "analyze",    "--model", model,     "--data",     (tmp / "p.txt").string(),
        "--analyses", analyses,  "--quiet", "--no-report"};
    auto stored = base, lazy = base;
    stored.insert(stored.end(), {"--out", (tmp / "stored").string()});
    lazy.insert(lazy.end(), {"--out", (tmp / "lazy").string(), "--attention-memory-mb", "0"});
    auto a = run_cli(stored);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    auto b = run_cli(lazy);
    ASSERT_EQ(b.exit_code, 0) << b.err;
    // The lazy rows recompute the scores q k^T / sqrt(d_head) in float32 from the captured rotated
    // q and k (another GEMM shape: two float32 evaluations of d_head + 1 terms, each term at most
    // max|q| max|k|) and the softmax: each p_j moves by at most 2 max|dz| relative, plus the
    // softmax rounding. The table quantities (log-ratio distances, entropies in nats, KL, sink
    // masses) move by at most twice that (first order), relative to max(|x|, 1).
    namespace sm = sinkscope::model;
    const sm::Model mm = sm::load_model(model);
    double zmax = 0, qk = 0;
    int64_t t_max = 0, d_head = mm.config().d_head;
    for (const char* text : {"Once upon a time there was a cat who liked to sleep.",
                             "The little girl ran to the park with her dog and a ball.",
                             "He was sad because the rain did not stop all day long."}) {
        const auto ids = mm.encode(text, tokenizer::BosPolicy::ModelDefault);
        const sm::ForwardResult fr = mm.forward(ids, sm::CaptureSpec::all());
        t_max = std::max<int64_t>(t_max, static_cast<int64_t>(ids.size()));
        zmax = std::max(zmax, testutil::max_abs_scores(fr, mm.config()));
        for (int64_t l = 0; l < mm.config().n_layers; ++l)
            qk = std::max(
                qk, testutil::max_abs(fr.captured.at(sm::hook_name(sm::HookPoint::RotQ, l))) *
                        testutil::max_abs(fr.captured.at(sm::hook_name(sm::HookPoint::RotK, l))));
    }
    const double dz = testutil::f32_two_evaluations_bound(
        double(d_head) + 1, double(d_head) * qk / std::sqrt(double(d_head)));
    const double row_rel = 2 * dz + 2 * testutil::f32_softmax_rel_bound(double(t_max), 2 * zmax);
    for (const char* t : {"heads.csv", "dispersion.csv", "distances.csv", "sinks.csv", "kl.csv",
                          "spectra.csv", "entropy.csv", "value_space.csv"})
        expect_same_table(tmp / "stored" / t, tmp / "lazy" / t, 2 * row_rel, 1.0);
    const std::string rec = slurp(tmp / "lazy" / "run.json");
    EXPECT_NE(rec.find("\"recomputed_inputs\": 3"), std::string::npos) << rec;
    EXPECT_NE(slurp(tmp / "stored" / "run.json").find("\"recomputed_inputs\": 0"),
              std::string::npos);
}
