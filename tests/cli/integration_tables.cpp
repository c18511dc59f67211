// `sinkscope tables` end to end: fake run directories of known contents (analyze and metrics
// runs of both scopes, a prune, a dynamics and a compare run) -> P1's tables, each value checked
// against the input (the CSV copies it to the letter; Markdown and LaTeX show 3 significant
// digits), the escaping of names, a table without sources, bad input, and a real metrics run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
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
using testutil::run_cli;

namespace {

// A CSV file's rows as the text of each field, by column (numbers as the writer writes them).
using Row = std::map<std::string, std::string>;
std::vector<Row> csv_rows(const fs::path& file) {
    const io::Table t = io::Table::read_csv(file);
    std::vector<Row> rows;
    for (const auto& cells : t.rows()) {
        Row r;
        for (size_t c = 0; c < cells.size(); ++c) {
            const io::Cell& v = cells[c];
            r[t.columns()[c]] = std::holds_alternative<std::string>(v) ? std::get<std::string>(v)
                                : std::holds_alternative<double>(v)
                                    ? io::format_number(std::get<double>(v))
                                    : std::to_string(std::get<int64_t>(v));
        }
        rows.push_back(std::move(r));
    }
    return rows;
}

// The same row of fields as CSV text, in `columns` order.
std::string csv_text(const std::vector<std::string>& columns, const std::vector<Row>& rows) {
    std::string out;
    for (size_t i = 0; i < columns.size(); ++i) out += (i ? "," : "") + columns[i];
    out += "\n";
    for (const Row& r : rows) {
        for (size_t i = 0; i < columns.size(); ++i) out += (i ? "," : "") + r.at(columns[i]);
        out += "\n";
    }
    return out;
}

// The column names of a CSV header line.
std::vector<std::string> columns(const std::string& header) {
    std::vector<std::string> c(1);
    for (char ch : header) {
        if (ch == ',')
            c.emplace_back();
        else
            c.back() += ch;
    }
    return c;
}

// 3 significant digits, written out here with printf's %#.3g (values below 1000 and from 1e-4
// on, where it needs no exponent; its trailing point taken off).
std::string sig3(const std::string& field) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%#.3g", std::stod(field));
    std::string s = buf;
    if (s.back() == '.') s.pop_back();
    return s;
}

std::string latex(const std::string& s) {
    static const std::map<char, std::string> special = {{'_', "\\_"},
                                                        {'%', "\\%"},
                                                        {'&', "\\&"},
                                                        {'#', "\\#"},
                                                        {'$', "\\$"},
                                                        {'{', "\\{"},
                                                        {'}', "\\}"},
                                                        {'~', "\\textasciitilde{}"},
                                                        {'^', "\\textasciicircum{}"},
                                                        {'\\', "\\textbackslash{}"}};
    std::string out;
    for (char c : s) out += special.count(c) ? special.at(c) : std::string(1, c);
    return out;
}
std::string markdown(const std::string& s) {
    std::string out;
    for (char c : s)
        out +=
            (std::string("\\|*_`<>").find(c) != std::string::npos ? "\\" : "") + std::string(1, c);
    return out;
}
// A number in LaTeX: a leading minus as $-$.
std::string latex_number(const std::string& s) {
    return !s.empty() && s[0] == '-' ? "$-$" + s.substr(1) : s;
}

// The .md and .tex line of one row: `cells` already formatted (text escaped, numbers rounded).
std::string md_line(const std::vector<std::string>& cells) {
    std::string out = "|";
    for (const auto& c : cells) out += " " + c + " |";
    return out + "\n";
}
std::string tex_line(const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < cells.size(); ++i) out += (i ? " & " : "") + cells[i];
    return out + " \\\\\n";
}

void write_run(const fs::path& dir, const json& rec) {
    json r = rec;
    r["tool"] = {{"name", "sinkscope"}};
    testutil::write_text(dir / "run.json", r.dump());
}

const std::vector<std::string> kReversalColumns = columns(
    "scope,layer,comparison,metric,first,second,method,n_triples,n_examined,n_tied,"
    "n_compared,n_disagree,rate,ci_lo,ci_hi,ci_method,seed");

Row reversal_row(const std::string& scope, int layer, const std::string& comparison,
                 const std::string& metric, const std::string& method, int n_compared, double rate,
                 double lo, double hi) {
    return {{"scope", scope},
            {"layer", std::to_string(layer)},
            {"comparison", comparison},
            {"metric", metric},
            {"first", metric + "_keep"},
            {"second", metric + "_drop"},
            {"method", method},
            {"n_triples", "5000"},
            {"n_examined", std::to_string(n_compared + 3)},
            {"n_tied", "3"},
            {"n_compared", std::to_string(n_compared)},
            {"n_disagree", "17"},
            {"rate", io::format_number(rate)},
            {"ci_lo", io::format_number(lo)},
            {"ci_hi", io::format_number(hi)},
            {"ci_method", method == "exact" ? "none" : "wilson95_fpc"},
            {"seed", method == "exact" ? "-1" : "7"}};
}

// Run A: an analyze run of scope model, with a model name and checkpoint full of characters
// LaTeX gives a meaning; reversal.csv, ari.csv (two headline rows and one other) and
// clark2019_ari.csv.
const std::string kModelA = "gpt_2%&x";
const std::string kCheckpointA = "c#1 $5 {a}~^\\";
std::vector<Row> fake_analyze_run(const fs::path& dir) {
    write_run(dir, {{"subcommand", "analyze"},
                    {"model", {{"name", kModelA}, {"path", "/m/x"}}},
                    {"checkpoint", kCheckpointA}});
    const std::vector<Row> rev = {
        reversal_row("model", -1, "flip", "js", "sampled", 997, 0.123370110330993, 0.1023456,
                     0.14567891),
        reversal_row("model", -1, "vs_content", "cosine", "exact", 220, 0.0227272727272727,
                     0.0227272727272727, 0.0227272727272727),
        reversal_row("model", -1, "check", "dA_perp", "exact", 220, 0, 0, 0)};
    testutil::write_text(dir / "reversal.csv", csv_text(kReversalColumns, rev));
    testutil::write_text(dir / "ari.csv",
                         "first,second,ari,headline,k\njs_keep,js_drop,0.41234567,1,4\n"
                         "dA,dA_perp,0.87654321,1,4\ncosine_keep,cosine_drop,0.3,0,4\n");
    testutil::write_text(dir / "clark2019_ari.csv",
                         "first,second,k,ari\njs_keep,js_drop,5,"
                         "0.23456789\n");
    return rev;
}

// Run B: a metrics run of scope layer (model named by its path): per-layer reversal rows and
// the pooled ones, per-layer ARI with a leading layer column (one layer without a dA value).
std::vector<Row> fake_layer_run(const fs::path& dir) {
    write_run(dir, {{"subcommand", "metrics"}, {"model", {{"path", "/models/tiny_b/"}}}});
    const std::vector<Row> rev = {
        reversal_row("layer", 0, "flip", "js", "exact", 40, 0.5, 0.5, 0.5),
        reversal_row("layer", 1, "flip", "js", "exact", 40, 0.25, 0.25, 0.25),
        reversal_row("layer", -1, "flip", "js", "exact", 80, 0.375, 0.375, 0.375),
        reversal_row("layer", -1, "dA_vs_dA_perp", "dA", "exact", 80, 0.0625, 0.0625, 0.0625),
        reversal_row("layer", -1, "check", "dA_perp", "exact", 80, 0, 0, 0)};
    testutil::write_text(dir / "reversal.csv", csv_text(kReversalColumns, rev));
    testutil::write_text(dir / "ari.csv",
                         "layer,first,second,ari,headline,k\n0,js_keep,js_drop,0.5,1,3\n"
                         "0,dA,dA_perp,0.9,1,3\n1,js_keep,js_drop,0.3,1,3\n1,dA,dA_perp,nan,1,3\n"
                         "0,cosine_keep,cosine_drop,0.1,0,3\n");
    return rev;
}

void fake_prune_run(const fs::path& dir) {
    write_run(
        dir,
        {{"subcommand", "prune"}, {"model", {{"name", "pruned_m"}}}, {"measure", "perplexity"}});
    testutil::write_text(
        dir / "prune.csv",
        "method,seed,sparsity,n_pruned,measure,value,mean_nll,n_scored,change,pruned_heads\n"
        "none,-1,0,0,perplexity,20.5123,3,100,0,\n"
        "js,-1,0.25,4,perplexity,31.7421,3.4,100,11.2,0.1 1.2\n"
        "dA_perp,-1,0.25,4,perplexity,22.1234,3.1,100,1.6,0.3 1.1\n"
        "random,1,0.25,4,perplexity,25.0001,3.2,100,4.5,0.0 1.0\n"
        "js,-1,0.5,8,perplexity,60.2222,4.1,100,39.7,0.1 1.2\n");
    testutil::write_text(dir / "prune_random.csv",
                         "sparsity,n_pruned,measure,n_seeds,mean,std,min,max\n"
                         "0.25,4,perplexity,3,25.5123,1.2345,24.0123,27.4567\n");
}

const std::vector<std::string> kSplitColumns = columns(
    "model,from,to,from_step,to_step,pair,layer,n_rows,sink_term,content_term,"
    "delta_entropy,residual,sink_share,unpaired_rows");

std::vector<Row> fake_dynamics_run(const fs::path& dir) {
    write_run(dir, {{"subcommand", "dynamics"}, {"checkpoints", json::array()}});
    auto row = [](std::string from, std::string to, std::string from_step, std::string to_step,
                  std::string pair, int layer, double sink, double content) {
        return Row{{"model", "series_a"},
                   {"from", from},
                   {"to", to},
                   {"from_step", from_step},
                   {"to_step", to_step},
                   {"pair", pair},
                   {"layer", std::to_string(layer)},
                   {"n_rows", "4096"},
                   {"sink_term", io::format_number(sink)},
                   {"content_term", io::format_number(content)},
                   {"delta_entropy", io::format_number(sink + content)},
                   {"residual", "1e-12"},
                   {"sink_share", io::format_number(sink / (sink + content))},
                   {"unpaired_rows", "0"}};
    };
    const std::vector<Row> rows = {row("s0", "s100", "0", "100", "consecutive", -1, -12.54, -3.21),
                                   row("s0", "s100", "0", "100", "consecutive", 0, -1.5, -0.25),
                                   row("s100", "final", "100", "", "consecutive", -1, -2.5, 1.75),
                                   row("s0", "final", "0", "", "first_last", -1, -15.04, -1.46)};
    testutil::write_text(dir / "entropy_split.csv", csv_text(kSplitColumns, rows));
    return rows;
}

// compare's regime.csv header, as docs/metrics.md ("The pruning regime") documents it.
std::vector<std::string> regime_columns() {
    return columns(
        "run,model,checkpoint,role,statistic,value,rho,v_b,lo,hi,predicted,outcome,measured,"
        "agreement,flip_rate,unsafe_flip_rate,flip_measured,flip_agreement,prune_run,"
        "pruning_measured,pruning_agreement,pruning_evidence,rule");
}

std::vector<Row> fake_compare_run(const fs::path& dir) {
    write_run(dir, {{"subcommand", "compare"}});
    std::vector<Row> rows;
    for (const auto& [model, rho, pred] :
         {std::tuple<std::string, double, std::string>{"m1", 0.1234567, "classical-safe"},
          {"m2", 0.7654321, "classical-unsafe"}}) {
        Row r;
        for (const auto& c : regime_columns()) r[c] = "x";
        r["run"] = "/runs/" + model;
        r["model"] = model;
        r["checkpoint"] = "";
        r["role"] = "apply";
        r["statistic"] = "rho";
        r["value"] = r["rho"] = io::format_number(rho);
        r["v_b"] = "0.5";
        r["lo"] = "0.2";
        r["hi"] = "0.5";
        r["predicted"] = pred;
        r["outcome"] = "pruning";
        r["measured"] = model == "m1" ? "classical-safe" : "unmeasured";
        r["agreement"] = model == "m1" ? "correct" : "unmeasured";
        r["flip_rate"] = "0.1";
        rows.push_back(r);
    }
    testutil::write_text(dir / "regime.csv", csv_text(regime_columns(), rows));
    return rows;
}

// Expects `file` to contain `text`.
void expect_has(const fs::path& file, const std::string& text) {
    const std::string content = read_file(file);
    EXPECT_NE(content.find(text), std::string::npos) << file.filename() << " lacks:\n"
                                                     << text << "\nin:\n"
                                                     << content;
}

// The rows of one table `tables` wrote.
std::vector<Row> output(const fs::path& out, const std::string& name) {
    return csv_rows(out / (name + ".csv"));
}

}  // namespace

// Every table from its sources: the CSV holds the input values to the letter (the model's
// reversal rows without the self-check, the headline ARI rows and their mean over layers, each
// pruned point with its inflation and random spread, the model rows of the entropy split, the
// regime verdicts); the .md and .tex rows show the same values to 3 significant digits with
// every text escaped; tables.md / tables.tex hold all five in order; run.json says what was read.
TEST(CliTables, EveryTableFromItsSources) {
    testutil::ScratchDir tmp;
    const std::vector<Row> rev_a = fake_analyze_run(tmp / "a");
    const std::vector<Row> rev_b = fake_layer_run(tmp / "b");
    fake_prune_run(tmp / "p");
    const std::vector<Row> split = fake_dynamics_run(tmp / "d");
    const std::vector<Row> regime = fake_compare_run(tmp / "c");
    const fs::path out = tmp / "tables";
    const auto r =
        run_cli({"tables", (tmp / "a").string(), (tmp / "b").string(), (tmp / "p").string(),
                 (tmp / "d").string(), (tmp / "c").string(), "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;

    // p1_reversal: A's model rows and B's pooled rows, check rows left out, values unchanged.
    const std::vector<Row> rev = output(out, "p1_reversal");
    std::vector<std::pair<std::string, Row>> want;  // (model, source row)
    for (const Row& x : rev_a)
        if (x.at("comparison") != "check") want.emplace_back(kModelA, x);
    for (const Row& x : rev_b)
        if (x.at("layer") == "-1" && x.at("comparison") != "check") want.emplace_back("tiny_b", x);
    ASSERT_EQ(rev.size(), want.size());
    for (size_t i = 0; i < rev.size(); ++i) {
        const auto& [model, src] = want[i];
        SCOPED_TRACE(i);
        EXPECT_EQ(rev[i].at("model"), model);
        EXPECT_EQ(rev[i].at("checkpoint"), model == kModelA ? kCheckpointA : "");
        for (const char* c :
             {"comparison", "metric", "rate", "ci_lo", "ci_hi", "method", "n_compared"})
            EXPECT_EQ(rev[i].at(c), src.at(c)) << c;
        const std::string interval = sig3(src.at("rate")) + " [" + sig3(src.at("ci_lo")) + ", " +
                                     sig3(src.at("ci_hi")) + "]";
        const std::string ckpt = rev[i].at("checkpoint");
        expect_has(
            out / "p1_reversal.tex",
            tex_line({latex(model), latex(ckpt), latex(src.at("comparison")),
                      latex(src.at("metric")), interval, src.at("method"), src.at("n_compared")}));
        expect_has(out / "p1_reversal.md",
                   md_line({markdown(model), markdown(ckpt), markdown(src.at("comparison")),
                            markdown(src.at("metric")), interval, src.at("method"),
                            src.at("n_compared")}));
    }
    // The rounding itself, on values written out: 0.1234 -> 0.123, 0.0227 -> 0.0227.
    expect_has(out / "p1_reversal.md", "0.123 [0.102, 0.146]");
    expect_has(out / "p1_reversal.md", "0.0227 [0.0227, 0.0227]");
    // The escaping, written out.
    expect_has(out / "p1_reversal.tex",
               "gpt\\_2\\%\\&x & c\\#1 \\$5 \\{a\\}\\textasciitilde{}\\textasciicircum{}"
               "\\textbackslash{} & flip & js & 0.123 [0.102, 0.146] & sampled & 997 \\\\\n");
    expect_has(out / "p1_reversal.tex", "comparison & metric & rate [ci\\_lo, ci\\_hi] & method");
    for (const char* part :
         {"\\begin{table}", "\\caption{", "\\label{tab:p1_reversal}", "\\begin{tabular}{llllrlr}",
          "\\toprule\n", "\\midrule\n", "\\bottomrule\n", "\\end{tabular}\n\\end{table}\n"})
        expect_has(out / "p1_reversal.tex", part);
    expect_has(out / "p1_reversal.md", "Table: Reversal rates");
    expect_has(out / "p1_reversal.md",
               "| model | checkpoint | comparison | metric | rate [ci\\_lo, ci\\_hi] | method | "
               "n\\_compared |\n|---|---|---|---|---:|---|---:|\n");

    // p1_ari: A's two headline rows and its Clark et al. row; B's means over its layers.
    const std::vector<Row> ari = output(out, "p1_ari");
    ASSERT_EQ(ari.size(), 5u);
    const std::vector<std::vector<std::string>> ari_want = {
        {kModelA, "sinkscope", "js_keep", "js_drop", "0.41234567", "4", "all"},
        {kModelA, "sinkscope", "dA", "dA_perp", "0.87654321", "4", "all"},
        {kModelA, "clark2019", "js_keep", "js_drop", "0.23456789", "5", "all"},
        {"tiny_b", "sinkscope", "js_keep", "js_drop", io::format_number((0.5 + 0.3) / 2), "3",
         "mean over 2 layers"},
        {"tiny_b", "sinkscope", "dA", "dA_perp", "0.9", "3", "mean over 1 of 2 layers"}};
    for (size_t i = 0; i < ari.size(); ++i) {
        const auto& w = ari_want[i];
        EXPECT_EQ(ari[i].at("model"), w[0]);
        EXPECT_EQ(ari[i].at("pipeline"), w[1]);
        EXPECT_EQ(ari[i].at("first"), w[2]);
        EXPECT_EQ(ari[i].at("second"), w[3]);
        EXPECT_EQ(ari[i].at("ari"), w[4]);
        EXPECT_EQ(ari[i].at("k"), w[5]);
        EXPECT_EQ(ari[i].at("layers"), w[6]);
        expect_has(out / "p1_ari.tex",
                   tex_line({latex(w[0]), latex(ari[i].at("checkpoint")), w[1], latex(w[2]),
                             latex(w[3]), sig3(w[4]), w[5], w[6]}));
    }

    // p1_pruning: each channel point against the unpruned 20.5123 and the random spread at its
    // sparsity (none at 0.5: empty cells, and the value alone in the text tables).
    const std::vector<Row> prune = output(out, "p1_pruning");
    ASSERT_EQ(prune.size(), 3u);
    const std::vector<std::vector<std::string>> prune_want = {
        {"js", "0.25", "31.7421"}, {"dA_perp", "0.25", "22.1234"}, {"js", "0.5", "60.2222"}};
    for (size_t i = 0; i < prune.size(); ++i) {
        SCOPED_TRACE(i);
        const auto& w = prune_want[i];
        const Row& p = prune[i];
        EXPECT_EQ(p.at("model"), "pruned_m");
        EXPECT_EQ(p.at("channel"), w[0]);
        EXPECT_EQ(p.at("sparsity"), w[1]);
        EXPECT_EQ(p.at("measure"), "perplexity");
        EXPECT_EQ(p.at("value"), w[2]);
        EXPECT_EQ(p.at("baseline"), "20.5123");
        EXPECT_EQ(p.at("inflation"), io::format_number(std::stod(w[2]) / 20.5123));
        const bool random = w[1] == "0.25";
        EXPECT_EQ(p.at("random_mean"), random ? "25.5123" : "");
        EXPECT_EQ(p.at("random_std"), random ? "1.2345" : "");
        EXPECT_EQ(p.at("random_min"), random ? "24.0123" : "");
        EXPECT_EQ(p.at("random_max"), random ? "27.4567" : "");
        expect_has(out / "p1_pruning.md",
                   md_line({"pruned\\_m", "", markdown(w[0]), sig3(w[1]), "perplexity", sig3(w[2]),
                            sig3("20.5123"), sig3(p.at("inflation")),
                            random ? sig3("25.5123") + " [" + sig3("24.0123") + ", " +
                                         sig3("27.4567") + "]"
                                   : "",
                            random ? sig3("1.2345") : ""}));
    }

    // p1_entropy_collapse: the model rows (layer -1) of entropy_split.csv, steps kept empty.
    const std::vector<Row> ec = output(out, "p1_entropy_collapse");
    std::vector<Row> split_model;
    for (const Row& x : split)
        if (x.at("layer") == "-1") split_model.push_back(x);
    ASSERT_EQ(ec.size(), split_model.size());
    for (size_t i = 0; i < ec.size(); ++i) {
        SCOPED_TRACE(i);
        for (const char* c : {"model", "pair", "from", "to", "from_step", "to_step", "n_rows",
                              "delta_entropy", "sink_term", "content_term", "sink_share"})
            EXPECT_EQ(ec[i].at(c), split_model[i].at(c)) << c;
        const Row& s = split_model[i];
        expect_has(out / "p1_entropy_collapse.tex",
                   tex_line({latex(s.at("model")), latex(s.at("pair")), s.at("from"), s.at("to"),
                             s.at("from_step"), s.at("to_step"), s.at("n_rows"),
                             latex_number(sig3(s.at("delta_entropy"))),
                             latex_number(sig3(s.at("sink_term"))),
                             latex_number(sig3(s.at("content_term"))),
                             latex_number(sig3(s.at("sink_share")))}));
    }

    // p1_regime: the verdict columns of compare's regime.csv, unchanged.
    const std::vector<Row> reg = output(out, "p1_regime");
    ASSERT_EQ(reg.size(), regime.size());
    for (size_t i = 0; i < reg.size(); ++i)
        for (const char* c : {"model", "checkpoint", "role", "statistic", "value", "lo", "hi",
                              "predicted", "outcome", "measured", "agreement"})
            EXPECT_EQ(reg[i].at(c), regime[i].at(c)) << i << " " << c;
    expect_has(out / "p1_regime.md",
               md_line({"m1", "", "apply", "rho", "0.123", "0.200", "0.500", "classical-safe",
                        "pruning", "classical-safe", "correct"}));

    // tables.md and tables.tex: every table's text, in the documented order.
    const std::vector<std::string> names = {"p1_reversal", "p1_ari", "p1_pruning",
                                            "p1_entropy_collapse", "p1_regime"};
    const std::string all_md = read_file(out / "tables.md"),
                      all_tex = read_file(out / "tables.tex");
    size_t at_md = 0, at_tex = 0;
    for (const std::string& n : names) {
        const size_t m = all_md.find(read_file(out / (n + ".md")), at_md);
        const size_t t = all_tex.find(read_file(out / (n + ".tex")), at_tex);
        ASSERT_NE(m, std::string::npos) << n;
        ASSERT_NE(t, std::string::npos) << n;
        at_md = m + 1;
        at_tex = t + 1;
    }
    // One console line per table written.
    for (const std::string& n : names) EXPECT_NE(r.out.find(n + ": "), std::string::npos) << r.out;
    // P1's all written; P2's have no source here (regions.csv, graphs.csv, fisher runs).
    for (const std::string& n : names)
        EXPECT_EQ(r.out.find(n + ": not written"), std::string::npos) << r.out;

    const json rec = testutil::read_json(out / "run.json");
    EXPECT_EQ(rec["subcommand"], "tables");
    ASSERT_EQ(rec["tables"].size(), 5u);
    for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(rec["tables"][i]["name"], names[i]);
    ASSERT_EQ(rec["runs"].size(), 5u);
    EXPECT_EQ(rec["runs"][0]["model"], kModelA);
    EXPECT_EQ(rec["runs"][0]["files"],
              json::array({"reversal.csv", "ari.csv", "clark2019_ari.csv"}));
}

// A table with no source rows is not written, and the console says so; a run of another
// subcommand is named in a warning and skipped; with nothing to write, nothing is written.
TEST(CliTables, TableWithoutSourcesIsNotWritten) {
    testutil::ScratchDir tmp;
    fake_prune_run(tmp / "p");
    write_run(tmp / "f", {{"subcommand", "train"}});
    const fs::path out = tmp / "tables";
    const auto r =
        run_cli({"tables", (tmp / "p").string(), (tmp / "f").string(), "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(out / "p1_pruning.csv"));
    for (const char* n : {"p1_reversal", "p1_ari", "p1_entropy_collapse", "p1_regime"}) {
        for (const char* ext : {".csv", ".md", ".tex"})
            EXPECT_FALSE(fs::exists(out / (std::string(n) + ext))) << n << ext;
        EXPECT_NE(r.out.find(std::string(n) + ": not written"), std::string::npos) << r.out;
        EXPECT_EQ(read_file(out / "tables.md").find(n), std::string::npos) << n;
    }
    EXPECT_NE(r.out.find("p1_pruning: 3 rows"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("warning: " + (tmp / "f").string() + " is a 'train' run"),
              std::string::npos)
        << r.err;
    const json rec = testutil::read_json(out / "run.json");
    EXPECT_TRUE(rec["runs"][1]["skipped"].get<bool>());
    EXPECT_EQ(rec["not_written"].size(), 4u + 8u);  // P1's four, P2's eight

    // Nothing to write: refused (usage), no folder.
    const auto none = run_cli({"tables", (tmp / "f").string(), "--out", (tmp / "t2").string()});
    EXPECT_EQ(none.exit_code, 2) << none.err;
    EXPECT_FALSE(fs::exists(tmp / "t2"));
}

// Bad input: a missing folder, one without run.json, a CSV with a row of the wrong width or a
// text where a number belongs: exit 3, one line naming the file, and no --out folder (nor any
// staging folder) left behind.
TEST(CliTables, BadInputWritesNothing) {
    testutil::ScratchDir tmp;
    fake_analyze_run(tmp / "good");
    fs::create_directories(tmp / "bare");
    fake_analyze_run(tmp / "short");
    testutil::write_text(tmp / "short/reversal.csv",
                         read_file(tmp / "short/reversal.csv") + "model,-1,flip,js\n");
    fake_prune_run(tmp / "text");
    testutil::write_text(tmp / "text/prune_random.csv",
                         "sparsity,n_pruned,measure,n_seeds,mean,std,min,max\n"
                         "0.25,4,perplexity,3,lots,1,24,27\n");
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"missing", (tmp / "missing").string()},
        {"bare", (tmp / "bare").string() + ": is not a sinkscope run directory (no run.json)"},
        {"short", (tmp / "short/reversal.csv").string()},
        {"text", (tmp / "text/prune_random.csv").string()}};
    for (const auto& [name, file] : cases) {
        SCOPED_TRACE(name);
        std::set<std::string> before;
        for (const auto& e : fs::directory_iterator(tmp.path())) before.insert(e.path().string());
        const auto r = run_cli({"tables", (tmp / "good").string(), (tmp / name).string(), "--out",
                                (tmp / "out").string()});
        EXPECT_EQ(r.exit_code, 3) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_EQ(r.err.rfind("sinkscope: error: " + file, 0), 0u) << r.err;
        std::set<std::string> after;
        for (const auto& e : fs::directory_iterator(tmp.path())) after.insert(e.path().string());
        EXPECT_EQ(after, before);
        EXPECT_FALSE(fs::exists(tmp / "out"));
    }
}

// End to end on a real run: p1_reversal holds exactly the model rows of a `metrics --example`
// run's reversal.csv (the self-check left out).
TEST(CliTables, RealMetricsRun) {
    testutil::ScratchDir tmp;
    const auto m = run_cli({"metrics", "--example", "--out", (tmp / "run").string()});
    ASSERT_EQ(m.exit_code, 0) << m.err;
    const auto r = run_cli({"tables", (tmp / "run").string(), "--out", (tmp / "t").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // run.json of a metrics run names no model: the folder's name, as compare names it.
    const std::string model = "run";
    std::vector<Row> want;
    for (const Row& x : csv_rows(tmp / "run/reversal.csv"))
        if (x.at("scope") == "model" && x.at("layer") == "-1" && x.at("comparison") != "check")
            want.push_back(x);
    ASSERT_FALSE(want.empty());
    const std::vector<Row> got = output(tmp / "t", "p1_reversal");
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].at("model"), model);
        for (const char* c :
             {"comparison", "metric", "rate", "ci_lo", "ci_hi", "method", "n_compared"})
            EXPECT_EQ(got[i].at(c), want[i].at(c)) << i << " " << c;
    }
}
