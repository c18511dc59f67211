// `sinkscope fisher` end to end: on ../shared/models/tinystories656K (decoder, next token), the
// zoo BERT (masked tokens) and the zoo ViT (labels drawn from the model): the tables add up
// (components to the layer total, layers to the model total, heads to their attention tensors,
// tensors to the model total, parameter counts to the model's), the true Fisher is reproducible
// bit for bit with a seed and changes with it, a killed run resumes to identical tables, and bad
// options are refused before any output exists. The gradients themselves are checked against
// finite differences in tests/model/test_gradients.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;
using testutil::run_cli;

namespace {

size_t column(const io::Table& t, const std::string& name) {
    const auto& c = t.columns();
    const size_t i = size_t(std::find(c.begin(), c.end(), name) - c.begin());
    EXPECT_LT(i, c.size()) << name;
    return i;
}
double number(const io::Table& t, size_t row, const std::string& name) {
    const io::Cell& v = t.rows().at(row).at(column(t, name));
    if (auto d = std::get_if<double>(&v)) return *d;
    if (auto i = std::get_if<int64_t>(&v)) return double(*i);
    return std::nan("");
}
std::string text(const io::Table& t, size_t row, const std::string& name) {
    const io::Cell& v = t.rows().at(row).at(column(t, name));
    if (auto s = std::get_if<std::string>(&v)) return *s;
    if (auto d = std::get_if<double>(&v)) return io::format_number(*d);
    return std::to_string(std::get<int64_t>(v));
}

// The first n STEM sentences as a text file.
fs::path stem_file(const fs::path& shared, const testutil::ScratchDir& tmp, size_t n) {
    const io::Table stem = io::Table::read_csv(shared / "data" / "stem_sentences.csv");
    std::string s;
    for (size_t i = 0; i < n; ++i) s += text(stem, i, "text") + "\n";
    testutil::write_text(tmp / "data.txt", s);
    return tmp / "data.txt";
}

std::vector<std::string> fisher_args(const fs::path& model, const fs::path& data,
                                     const fs::path& out) {
    return {"fisher", "--model",    model.string(), "--data", data.string(),
            "--out",  out.string(), "--progress",   "never"};
}

// Sums of n doubles in any order differ by at most about n eps of the sum of magnitudes (all
// terms here are >= 0): the tables are checked to that bound with n <= 1e4.
constexpr double kSumTol = 1e4 * 2.220446049250313e-16;

// The identities every fisher run's tables satisfy.
void check_tables(const fs::path& out, int64_t n_layers, int64_t n_heads) {
    const io::Table f = io::Table::read_csv(out / "fisher.csv");
    const io::Table tensors = io::Table::read_csv(out / "fisher_tensors.csv");
    const nlohmann::json run = nlohmann::json::parse(read_file(out / "run.json"));
    std::map<int64_t, double> components, totals, attention, shares;
    std::map<std::pair<int64_t, int64_t>, double> head_sum, head_parts;
    double model_total = std::nan("");
    for (size_t r = 0; r < f.size(); ++r) {
        const std::string m = text(f, r, "metric");
        const auto layer = int64_t(number(f, r, "layer")), head = int64_t(number(f, r, "head"));
        const double v = number(f, r, "value");
        EXPECT_TRUE(std::isfinite(v) && v >= 0) << m << " " << v;
        if (head >= 0) {
            (m == "fisher_head" ? head_sum : head_parts)[{layer, head}] += v;
        } else if (m == "fisher_model_total") {
            model_total = v;
        } else if (m == "fisher_total") {
            totals[layer] = v;
        } else if (m == "fisher_attention") {
            attention[layer] = v;
        } else if (m == "attention_share") {
            shares[layer] = v;
        } else {
            ASSERT_EQ(m.rfind("fisher_", 0), 0u) << m;
            components[layer] += v;
        }
    }
    ASSERT_EQ(totals.size(), size_t(n_layers + 1));  // the blocks and what lies outside them
    double layers = 0;
    for (const auto& [layer, total] : totals) {
        EXPECT_NEAR(components[layer], total, kSumTol * total) << "layer " << layer;
        layers += total;
    }
    EXPECT_NEAR(layers, model_total, kSumTol * model_total);
    EXPECT_NEAR(run["fisher"]["total"].get<double>(), model_total, 0.0);

    // Tensors: their traces add up to the total, their sizes to the model's parameter count, and
    // per layer the attention tensors (q/k/v/o) give fisher_attention and, less the output bias
    // that no head owns, the sum of the heads.
    double sum = 0, n_params = 0;
    std::map<int64_t, double> attn_tensors, attn_head_tensors;
    for (size_t r = 0; r < tensors.size(); ++r) {
        const double v = number(tensors, r, "fisher");
        sum += v;
        n_params += number(tensors, r, "n_params");
        EXPECT_NEAR(number(tensors, r, "fisher_per_param") * number(tensors, r, "n_params"), v,
                    4 * 2.220446049250313e-16 * v);
        const std::string comp = text(tensors, r, "component");
        const auto layer = int64_t(number(tensors, r, "layer"));
        if (comp.rfind("attention_", 0) != 0) continue;
        attn_tensors[layer] += v;
        if (text(tensors, r, "role") != "attn_o_bias") attn_head_tensors[layer] += v;
    }
    EXPECT_NEAR(sum, model_total, kSumTol * model_total);
    EXPECT_EQ(int64_t(n_params), run["model"]["n_params"].get<int64_t>());
    ASSERT_EQ(head_sum.size(), size_t(n_layers * n_heads));
    std::map<int64_t, double> heads_of_layer;
    for (const auto& [lh, v] : head_sum) {
        EXPECT_NEAR(head_parts[lh], v, kSumTol * v);  // q + k + v + o = the head's total
        heads_of_layer[lh.first] += v;
    }
    for (int64_t l = 0; l < n_layers; ++l) {
        EXPECT_NEAR(attention[l], attn_tensors[l], kSumTol * attn_tensors[l]) << l;
        EXPECT_NEAR(heads_of_layer[l], attn_head_tensors[l], kSumTol * attn_head_tensors[l]) << l;
    }
    // attention_share = F_attn / (F_attn + F_mlp), with F_mlp from fisher_mlp.
    for (size_t r = 0; r < f.size(); ++r) {
        if (text(f, r, "metric") != "fisher_mlp") continue;
        const auto l = int64_t(number(f, r, "layer"));
        const double mlp = number(f, r, "value");
        EXPECT_NEAR(shares[l], attention[l] / (attention[l] + mlp), 4e-16) << l;
    }
    const std::string html = read_file(out / "report.html");
    for (const char* title : {"Fisher trace per layer by component", "Fisher trace per head",
                              "Attention share of the Fisher trace per layer"})
        EXPECT_NE(html.find(title), std::string::npos) << title;
}

TEST(CliFisher, DecoderTablesAddUp) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const fs::path data = stem_file(shared, tmp, 6);
    const fs::path out = tmp / "run";
    const auto r = run_cli(fisher_args(shared / "models" / "tinystories656K", data, out));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("empirical Fisher over 6 samples (next token)"), std::string::npos)
        << r.out;
    check_tables(out, 2, 8);
    EXPECT_FALSE(fs::exists(out / "fisher_state.json"));
    const nlohmann::json run = nlohmann::json::parse(read_file(out / "run.json"));
    EXPECT_EQ(run["subcommand"], "fisher");
    EXPECT_EQ(run["data"]["n_scored"], 6);
}

// --kind true: the same seed gives the same bytes; another seed other labels, other numbers.
TEST(CliFisher, TrueFisherIsReproducibleWithItsSeed) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const fs::path data = stem_file(shared, tmp, 3);
    auto run = [&](const char* name, const char* seed) {
        auto a = fisher_args(shared / "models" / "tinystories656K", data, tmp / name);
        for (const char* x : {"--kind", "true", "--draws", "2", "--seed", seed}) a.push_back(x);
        const auto r = run_cli(a);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return read_file(tmp / name / "fisher.csv");
    };
    const std::string a = run("a", "5"), b = run("b", "5"), c = run("c", "6");
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    check_tables(tmp / "a", 2, 8);
}

// Killed (SIGKILL) after 3 samples, then --resume: the tables of an uninterrupted run, byte for
// byte (the saved sums round-trip exactly).
TEST(CliFisher, KilledRunResumesToIdenticalTables) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const fs::path data = stem_file(shared, tmp, 6);
    const fs::path model = shared / "models" / "tinystories656K";
    const auto whole = run_cli(fisher_args(model, data, tmp / "whole"));
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    auto killed_args = fisher_args(model, data, tmp / "part");
    for (const char* x : {"--debug-kill-after", "3"}) killed_args.push_back(x);
    const auto killed = run_cli(killed_args);
    ASSERT_NE(killed.exit_code, 0);
    EXPECT_FALSE(fs::exists(tmp / "part"));
    auto resume_args = fisher_args(model, data, tmp / "part");
    resume_args.push_back("--resume");
    const auto resumed = run_cli(resume_args);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_NE(resumed.out.find("resuming at input 4 of 6"), std::string::npos) << resumed.out;
    for (const char* f : {"fisher.csv", "fisher_tensors.csv"})
        EXPECT_EQ(read_file(tmp / "whole" / f), read_file(tmp / "part" / f)) << f;
}

// An encoder scores masked tokens; a ViT has no labels, so only the true Fisher applies.
TEST(CliFisher, EncoderAndVisionModels) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const fs::path data = stem_file(shared, tmp, 4);
    {
        auto a = fisher_args(shared / "zoo" / "bert", data, tmp / "bert");
        const auto r = run_cli(a);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_NE(r.out.find("(masked tokens)"), std::string::npos) << r.out;
        check_tables(tmp / "bert", 2, 4);
    }
    {
        std::vector<float> px(size_t(3) * 3 * 32 * 32);
        for (size_t i = 0; i < px.size(); ++i) px[i] = float((i * 2654435761u) % 1000u) / 999.0f;
        io::write_npy(tmp / "images.npy", io::make_npy_f32({3, 3, 32, 32}, px));
        auto a = fisher_args(shared / "zoo" / "vit", tmp / "images.npy", tmp / "vit");
        const auto refused = run_cli(a);
        EXPECT_EQ(refused.exit_code, 2);
        EXPECT_NE(refused.err.find("--kind true"), std::string::npos) << refused.err;
        EXPECT_FALSE(fs::exists(tmp / "vit"));
        for (const char* x : {"--kind", "true"}) a.push_back(x);
        const auto r = run_cli(a);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_NE(r.out.find("true Fisher over 3 samples (image class)"), std::string::npos)
            << r.out;
        check_tables(tmp / "vit", 3, 4);
    }
}

// Bad options: exit 2 (usage), one line on stderr, and no output folder.
TEST(CliFisher, BadOptionsAreRefusedWithoutOutput) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const fs::path data = stem_file(shared, tmp, 2);
    testutil::write_text(tmp / "short.jsonl", "{\"ids\": [5]}\n{\"ids\": [7]}\n");
    const fs::path out = tmp / "out";
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--kind", "exact"}, "--kind must be empirical or true"},
        {{"--kind", "true", "--draws", "0"}, "--draws must be between 1 and 10000"},
        {{"--draws", "3"}, "--draws applies to --kind true"},
        {{"--mask-rate", "1"}, "--mask-rate must be strictly between 0 and 1"},
        {{"--samples", "-1"}, "--samples must be >= 0"},
        {{"--checkpoint-every", "0"}, "--checkpoint-every must be >= 1"},
        {{"--data", (tmp / "short.jsonl").string()}, "has no sample to score"},
    };
    for (const auto& [extra, message] : cases) {
        auto a = fisher_args(shared / "models" / "tinystories656K", data, out);
        if (extra[0] == "--data")
            *(std::find(a.begin(), a.end(), "--data") + 1) = extra[1];
        else
            a.insert(a.end(), extra.begin(), extra.end());
        const auto r = run_cli(a);
        EXPECT_EQ(r.exit_code, 2) << message << ": " << r.err;
        EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_FALSE(fs::exists(out)) << message;
    }
}

}  // namespace
