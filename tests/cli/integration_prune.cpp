// `sinkscope prune` end to end on ../shared/models/tinystories656K (2 layers x 8 heads): every
// channel and sparsity is evaluated; the unpruned point and each pruned point equal what
// `sinkscope perplexity` (with --head-mask for the pruned heads) prints for the same text, exactly;
// the greedy order has the property that makes it greedy; random seeds differ; an interrupted run
// resumes to identical tables; bad options are refused before any output exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;
using testutil::run_cli;

namespace {

std::string cell(const io::Table& t, size_t row, const std::string& column) {
    const auto& c = t.columns();
    const size_t i = size_t(std::find(c.begin(), c.end(), column) - c.begin());
    EXPECT_LT(i, c.size()) << column;
    const io::Cell& v = t.rows().at(row).at(i);
    if (auto s = std::get_if<std::string>(&v)) return *s;
    if (auto d = std::get_if<double>(&v)) return io::format_number(*d);
    return std::to_string(std::get<int64_t>(v));
}

// Calibration: the first 12 sentences of the STEM prompt set; evaluation: the next 8 (disjoint).
struct Data {
    testutil::ScratchDir tmp;
    fs::path model, calib, eval;
    explicit Data(const fs::path& shared) {
        model = shared / "models" / "tinystories656K";
        const io::Table stem = io::Table::read_csv(shared / "data" / "stem_sentences.csv");
        std::string a, b;
        for (size_t i = 0; i < 20; ++i) (i < 12 ? a : b) += cell(stem, i, "text") + "\n";
        calib = tmp / "calib.txt";
        eval = tmp / "eval.txt";
        testutil::write_text(calib, a);
        testutil::write_text(eval, b);
    }
    std::vector<std::string> prune_args(const fs::path& out) const {
        return {"prune",       "--model", model.string(), "--calib",    calib.string(), "--eval",
                eval.string(), "--out",   out.string(),   "--progress", "never"};
    }
};

// "perplexity P" of `sinkscope perplexity` output.
std::string printed_perplexity(const std::string& out) {
    std::istringstream in(out);
    std::string key, value;
    in >> key >> value;
    EXPECT_EQ(key, "perplexity") << out;
    return value;
}

TEST(CliPrune, EveryChannelAndSparsityAgainstPerplexity) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    Data d(shared);
    const fs::path out = d.tmp / "run";
    const auto r = run_cli(d.prune_args(out));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const io::Table t = io::Table::read_csv(out / "prune.csv");
    // 1 unpruned + 4 channels x 3 sparsities + 3 seeds x 3 sparsities.
    ASSERT_EQ(t.size(), 22u);
    EXPECT_EQ(cell(t, 0, "method"), "none");
    EXPECT_EQ(cell(t, 0, "n_pruned"), "0");

    // The unpruned point is `sinkscope perplexity` on the same text, digit for digit (both print
    // the shortest round-trip form of the same double).
    const auto base =
        run_cli({"perplexity", "--model", d.model.string(), "--data", d.eval.string()});
    ASSERT_EQ(base.exit_code, 0) << base.err;
    EXPECT_EQ(cell(t, 0, "value"), printed_perplexity(base.out));

    std::map<std::string, std::vector<std::string>> heads_by_method;  // in sparsity order
    std::set<std::string> random_sets;
    for (size_t i = 1; i < t.size(); ++i) {
        const std::string method = cell(t, i, "method");
        const std::string sparsity = cell(t, i, "sparsity");
        const std::string n = cell(t, i, "n_pruned");
        // round(s x 16), halves up: 0.1 -> 2, 0.2 -> 3, 0.3 -> 5.
        EXPECT_EQ(n, sparsity == "0.1" ? "2" : sparsity == "0.2" ? "3" : "5") << sparsity;
        const std::string heads = cell(t, i, "pruned_heads");
        EXPECT_EQ(std::count(heads.begin(), heads.end(), '.'), std::stoi(n)) << heads;
        if (method == "random")
            random_sets.insert(heads);
        else
            heads_by_method[method].push_back(heads);
    }
    EXPECT_EQ(heads_by_method.size(), 4u);
    EXPECT_EQ(random_sets.size(), 9u);  // 3 seeds x 3 sparsities: all different sets
    for (const auto& [method, lists] : heads_by_method) {
        ASSERT_EQ(lists.size(), 3u);
        // One greedy order serves every sparsity: each list extends the previous one.
        EXPECT_EQ(lists[1].rfind(lists[0], 0), 0u) << method;
        EXPECT_EQ(lists[2].rfind(lists[1], 0), 0u) << method;
    }

    // A pruned point is the perplexity of the model with those heads zeroed, exactly.
    for (size_t row : {size_t(1), size_t(13)}) {  // js at 0.1, the first random point
        std::string mask = cell(t, row, "pruned_heads");
        std::replace(mask.begin(), mask.end(), ' ', ',');
        const auto p = run_cli({"perplexity", "--model", d.model.string(), "--data",
                                d.eval.string(), "--head-mask", mask});
        ASSERT_EQ(p.exit_code, 0) << p.err;
        EXPECT_EQ(cell(t, row, "value"), printed_perplexity(p.out)) << mask;
    }

    // Greedy by redundancy: removing heads can only raise the survivors' nearest-neighbour
    // distances, so the redundancy of successive removals never decreases.
    const io::Table order = io::Table::read_csv(out / "prune_order.csv");
    ASSERT_EQ(order.size(), 4u * 5u);
    for (size_t i = 1; i < order.size(); ++i) {
        if (cell(order, i, "channel") != cell(order, i - 1, "channel")) continue;
        EXPECT_GE(std::stod(cell(order, i, "redundancy")),
                  std::stod(cell(order, i - 1, "redundancy")))
            << "step " << i;
    }
    const io::Table random = io::Table::read_csv(out / "prune_random.csv");
    ASSERT_EQ(random.size(), 3u);
    EXPECT_EQ(cell(random, 0, "n_seeds"), "3");
    EXPECT_TRUE(fs::exists(out / "run.json"));
    EXPECT_FALSE(fs::exists(out / "prune_state.json"));
    // The report draws the score against sparsity with the random band.
    const std::string html = read_file(out / "report.html");
    EXPECT_NE(html.find("Pruned model against sparsity"), std::string::npos);
    EXPECT_NE(html.find("random (mean)"), std::string::npos);
}

// --budget per-layer with the drop and Euclidean channels: every point prunes round(0.25 x 8) = 2
// heads in each of the 2 layers; each layer's removal order is the greedy order among that
// layer's heads of the calibration distances (recomputed here from `analyze`'s distance matrix of
// the same text: nearest surviving neighbour within the layer, smallest first, ties to the lower
// head); random baselines draw 2 per layer too; run.json records the budget and the calibration
// set's rho (spec 7's regime input), which is analyze's dispersion.csv rho.
TEST(CliPrune, PerLayerBudgetAndDropChannels) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    Data d(shared);
    const fs::path out = d.tmp / "run";
    auto a = d.prune_args(out);
    for (const char* x : {"--budget", "per-layer", "--channels", "js_drop,euclidean", "--sparsity",
                          "0.25", "--random-seeds", "2"})
        a.push_back(x);
    const auto r = run_cli(a);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const io::Table t = io::Table::read_csv(out / "prune.csv");
    ASSERT_EQ(t.size(), 1u + 2u + 2u);
    for (size_t i = 1; i < t.size(); ++i) {
        EXPECT_EQ(cell(t, i, "n_pruned"), "4");
        std::istringstream heads(cell(t, i, "pruned_heads"));
        std::map<int, int> per_layer;
        for (std::string h; heads >> h;) ++per_layer[std::stoi(h.substr(0, h.find('.')))];
        EXPECT_EQ(per_layer, (std::map<int, int>{{0, 2}, {1, 2}})) << cell(t, i, "method");
    }
    const auto an = run_cli({"analyze", "--model", d.model.string(), "--data", d.calib.string(),
                             "--analyses", "compositional", "--out", (d.tmp / "an").string(),
                             "--progress", "never", "--no-report"});
    ASSERT_EQ(an.exit_code, 0) << an.err;
    const io::Table order = io::Table::read_csv(out / "prune_order.csv");
    for (const auto& [channel, matrix] : {std::pair<std::string, std::string>{"js_drop", "js_drop"},
                                          {"euclidean", "euclidean_keep"}}) {
        const std::vector<double> dist =
            io::read_npy(d.tmp / "an" / "distances" / (matrix + ".npy")).to_f64();  // [16, 16]
        std::vector<std::string> want;
        for (int l = 0; l < 2; ++l) {
            std::vector<bool> alive(8, true);
            for (int step = 1; step <= 2; ++step) {
                int pick = -1;
                double best = INFINITY;
                for (int h = 0; h < 8; ++h) {
                    if (!alive[size_t(h)]) continue;
                    double nearest = INFINITY;
                    for (int o = 0; o < 8; ++o)
                        if (o != h && alive[size_t(o)])
                            nearest = std::min(nearest, dist[size_t((l * 8 + h) * 16 + l * 8 + o)]);
                    if (nearest < best) best = nearest, pick = h;
                }
                alive[size_t(pick)] = false;
                want.push_back(std::to_string(step) + " " + std::to_string(l) + "." +
                               std::to_string(pick));
            }
        }
        std::vector<std::string> got;
        for (size_t i = 0; i < order.size(); ++i)
            if (cell(order, i, "channel") == channel)
                got.push_back(cell(order, i, "step") + " " + cell(order, i, "layer") + "." +
                              cell(order, i, "head"));
        EXPECT_EQ(got, want) << channel;
    }
    const nlohmann::json rec = testutil::read_json(out / "run.json");
    EXPECT_EQ(rec["options"]["budget"], "per-layer");
    const io::Table disp = io::Table::read_csv(d.tmp / "an" / "dispersion.csv");
    for (size_t i = 0; i < disp.size(); ++i)
        if (cell(disp, i, "scope") == "model")
            // the same accumulator over the same rows (prune: --max-tokens 512, analyze 128; the
            // sentences are shorter): the same sums in the same order
            EXPECT_EQ(io::format_number(rec["regime_inputs"]["rho"].get<double>()),
                      cell(disp, i, "rho"));
    auto b = d.prune_args(d.tmp / "bad");
    b.push_back("--budget");
    b.push_back("layer");
    const auto bad = run_cli(b);
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("--budget must be model or per-layer"), std::string::npos) << bad.err;
    EXPECT_FALSE(fs::exists(d.tmp / "bad"));
}

// Killed after 4 evaluated points (SIGKILL), then --resume: the same tables as a run that was
// never interrupted.
TEST(CliPrune, KilledRunResumesToIdenticalTables) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    Data d(shared);
    auto args = [&](const fs::path& out) {
        auto a = d.prune_args(out);
        for (const char* x : {"--channels", "js,dA_perp", "--sparsity", "0.1,0.3", "--random-seeds",
                              "2", "--ablation", "mean"})
            a.push_back(x);
        return a;
    };
    const auto whole = run_cli(args(d.tmp / "whole"));
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    auto killed_args = args(d.tmp / "part");
    killed_args.push_back("--debug-kill-after");
    killed_args.push_back("4");
    const auto killed = run_cli(killed_args);
    ASSERT_NE(killed.exit_code, 0);
    EXPECT_FALSE(fs::exists(d.tmp / "part"));
    auto resume_args = args(d.tmp / "part");
    resume_args.push_back("--resume");
    const auto resumed = run_cli(resume_args);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_NE(resumed.out.find("resuming at point 5"), std::string::npos) << resumed.out;
    for (const char* f : {"prune.csv", "prune_random.csv", "prune_order.csv"})
        EXPECT_EQ(read_file(d.tmp / "whole" / f), read_file(d.tmp / "part" / f)) << f;
}

// Bad options: exit 2 (usage), one line on stderr, and no output folder.
TEST(CliPrune, BadOptionsAreRefusedWithoutOutput) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    Data d(shared);
    testutil::write_text(d.tmp / "short.jsonl", "{\"ids\": [5]}\n{\"ids\": [7]}\n");
    const fs::path out = d.tmp / "out";
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--sparsity", "0"}, "between 0 and 1"},
        {{"--sparsity", "0.2,1.5"}, "between 0 and 1"},
        {{"--sparsity", "0.01"}, "prunes 0 heads"},
        {{"--channels", "js,euclid"}, "unknown channel 'euclid'"},
        {{"--ablation", "noise"}, "--ablation"},
        {{"--eval", d.calib.string()}, "overlap"},
        {{"--eval", (d.tmp / "short.jsonl").string()}, "2 or more tokens"},
    };
    for (const auto& [extra, message] : cases) {
        auto a = d.prune_args(out);
        if (extra[0] == "--eval")  // replace the value rather than give the option twice
            *(std::find(a.begin(), a.end(), "--eval") + 1) = extra[1];
        else
            a.insert(a.end(), extra.begin(), extra.end());
        const auto r = run_cli(a);
        EXPECT_EQ(r.exit_code, 2) << message << ": " << r.err;
        EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_FALSE(fs::exists(out)) << message;
    }
    // A head that does not exist, on perplexity --head-mask.
    const auto r = run_cli({"perplexity", "--model", d.model.string(), "--data", d.eval.string(),
                            "--head-mask", "0.1,2.0"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("head '2.0' does not exist"), std::string::npos) << r.err;
}

// Encoders: `perplexity` reports the masked-LM pseudo-perplexity under its own name (never a
// next-token value), masking round(0.15 n) of each sample's n non-special tokens (at least 1):
// 6 single-token words -> 1, 20 -> 3. The seed fixes which tokens are masked.
TEST(CliPrune, EncodersGetPseudoPerplexity) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    testutil::write_text(tmp / "t.txt",
                         "the cat sat on the mat\n"
                         "a b c d e f g h i j k l m n o p q r s t\n");
    auto run = [&](const char* seed) {
        return run_cli({"perplexity", "--model", (shared / "zoo" / "bert").string(), "--data",
                        (tmp / "t.txt").string(), "--seed", seed});
    };
    const auto a = run("1"), b = run("1"), c = run("2");
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_EQ(a.out.rfind("pseudo_perplexity ", 0), 0u) << a.out;
    EXPECT_NE(a.out.find("\nmasked_tokens 4\n"), std::string::npos) << a.out;
    EXPECT_EQ(a.out, b.out);
    EXPECT_NE(a.out, c.out);  // other tokens masked
    // A vision model has no perplexity at all.
    const auto v = run_cli({"perplexity", "--model", (shared / "zoo" / "vit").string(), "--data",
                            (tmp / "t.txt").string()});
    EXPECT_NE(v.exit_code, 0);
    EXPECT_EQ(v.out, "");
}

// prune on the zoo BERT (pseudo-perplexity, seeded masking) and ViT (top-1 agreement with the
// unpruned model on held-out random images): every channel and sparsity, and the unpruned
// point equals `perplexity` with the same seed.
TEST(CliPrune, EncoderAndVisionModels) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    Data d(shared);
    {
        const fs::path model = shared / "zoo" / "bert";
        auto a = d.prune_args(d.tmp / "bert");
        *(std::find(a.begin(), a.end(), "--model") + 1) = model.string();
        for (const char* x : {"--seed", "5", "--random-seeds", "2"}) a.push_back(x);
        const auto r = run_cli(a);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const io::Table t = io::Table::read_csv(d.tmp / "bert" / "prune.csv");
        ASSERT_EQ(t.size(), 1u + 4u * 3u + 2u * 3u);  // 2 x 4 = 8 heads: 0.1/0.2/0.3 -> 1, 2, 2
        EXPECT_EQ(cell(t, 0, "measure"), "pseudo_perplexity");
        EXPECT_EQ(cell(t, 1, "n_pruned"), "1");
        const auto p = run_cli(
            {"perplexity", "--model", model.string(), "--data", d.eval.string(), "--seed", "5"});
        ASSERT_EQ(p.exit_code, 0) << p.err;
        std::istringstream in(p.out);
        std::string key, value;
        in >> key >> value;
        EXPECT_EQ(key, "pseudo_perplexity");
        EXPECT_EQ(cell(t, 0, "value"), value);
    }
    {
        // 32 x 32 RGB images in [0, 1]: 6 for calibration, 4 other ones for evaluation.
        auto images = [&](const char* name, int n, int salt) {
            std::vector<float> px(size_t(n) * 3 * 32 * 32);
            for (size_t i = 0; i < px.size(); ++i)
                px[i] = float((i * 2654435761u + size_t(salt) * 97u) % 1000u) / 999.0f;
            io::write_npy(d.tmp / name, io::make_npy_f32({n, 3, 32, 32}, px));
            return (d.tmp / name).string();
        };
        const std::string calib = images("calib.npy", 6, 1), eval = images("eval.npy", 4, 2);
        auto a = d.prune_args(d.tmp / "vit");
        *(std::find(a.begin(), a.end(), "--model") + 1) = (shared / "zoo" / "vit").string();
        *(std::find(a.begin(), a.end(), "--calib") + 1) = calib;
        *(std::find(a.begin(), a.end(), "--eval") + 1) = eval;
        const auto r = run_cli(a);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const io::Table t = io::Table::read_csv(d.tmp / "vit" / "prune.csv");
        ASSERT_EQ(t.size(), 1u + 4u * 3u + 3u * 3u);
        EXPECT_EQ(cell(t, 0, "measure"), "top1_agreement");
        EXPECT_EQ(cell(t, 0, "value"), "1");  // the unpruned model agrees with itself
        EXPECT_EQ(cell(t, 0, "n_scored"), "4");
        for (size_t i = 1; i < t.size(); ++i) {
            const double v = std::stod(cell(t, i, "value"));
            EXPECT_TRUE(v >= 0 && v <= 1 && std::abs(v * 4 - std::round(v * 4)) < 1e-12) << v;
        }
        // The same images for calibration and evaluation are refused.
        auto same = a;
        *(std::find(same.begin(), same.end(), "--out") + 1) = (d.tmp / "vit2").string();
        *(std::find(same.begin(), same.end(), "--eval") + 1) = calib;
        const auto s = run_cli(same);
        EXPECT_EQ(s.exit_code, 2);
        EXPECT_NE(s.err.find("overlap"), std::string::npos) << s.err;
        EXPECT_FALSE(fs::exists(d.tmp / "vit2"));
    }
}

}  // namespace
