// `analyze --layers` (issue 47 item 4): the analyses read the chosen layers only and every output
// names a layer by its index in the model. A layer's own values do not depend on which other
// layers are analysed, so every per-layer row of a run of some layers is a row of the run of all
// of them: exactly, except distances.csv (below) and what pools heads of several layers
// (clusters.csv, silhouette.csv, ari.csv and the model-wide rows, layer -1). Naming every layer
// gives the run of all of them byte for byte. Mistral of the zoo: 3 layers, GQA, a sliding window.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using sinkscope::read_file;

namespace {

namespace io = sinkscope::io;
namespace testutil = sinkscope::testutil;

// Tables whose per-layer rows pool several layers' heads.
const std::set<std::string> kPooled = {"clusters.csv", "silhouette.csv", "ari.csv"};

std::vector<size_t> layer_columns(const io::Table& t) {
    std::vector<size_t> out;
    for (size_t c = 0; c < t.columns().size(); ++c)
        if (t.columns()[c] == "layer" || t.columns()[c] == "layer_a" || t.columns()[c] == "layer_b")
            out.push_back(c);
    return out;
}

double number(const io::Cell& c) {
    return std::get<double>(c);
}

// Every row of `part` (a run of `layers`) whose layer columns are >= 0 is a row of `whole`, and
// its layers are among `layers`. distances.csv: a root mean square (or mean) over the R rows of
// two heads, whose sum runs in another order when other heads sit beside them in the pair
// kernels' blocks: |error| <= (R - 1) eps of a sum of non-negative terms, so relative
// (R / 2 + 2) eps after the square root, (R + 1) eps for a mean; (R + 2) eps bounds both.
void expect_rows_of(const fs::path& part, const fs::path& whole, const std::set<int64_t>& layers,
                    double n_rows) {
    size_t tables = 0;
    for (const auto& e : fs::directory_iterator(part)) {
        const std::string name = e.path().filename().string();
        if (e.path().extension() != ".csv" || kPooled.count(name)) continue;
        SCOPED_TRACE(name);
        const io::Table p = io::Table::read_csv(e.path()), w = io::Table::read_csv(whole / name);
        ASSERT_EQ(p.columns(), w.columns());
        const std::vector<size_t> lc = layer_columns(p);
        if (lc.empty()) continue;
        ++tables;
        const bool distances = name == "distances.csv";
        std::map<std::vector<io::Cell>, std::vector<io::Cell>> by_key;  // distances: key -> row
        std::set<std::vector<io::Cell>> all(w.rows().begin(), w.rows().end());
        if (distances)
            for (const auto& r : w.rows()) by_key[{r.begin(), r.end() - 1}] = r;
        size_t compared = 0;
        for (const auto& r : p.rows()) {
            bool per_layer = true;
            for (size_t c : lc) {
                const auto l = int64_t(number(r[c]));
                per_layer = per_layer && l >= 0;
                EXPECT_TRUE(l < 0 || layers.count(l)) << "layer " << l << " was not analysed";
            }
            if (!per_layer) continue;
            ++compared;
            if (!distances) {
                EXPECT_TRUE(all.count(r))
                    << "a row not in the run of every layer, layer " << number(r[lc[0]]);
                continue;
            }
            const auto it = by_key.find({r.begin(), r.end() - 1});
            ASSERT_NE(it, by_key.end());
            const double a = number(r.back()), b = number(it->second.back());
            EXPECT_LE(std::abs(a - b), (n_rows + 2) * DBL_EPSILON * std::abs(b)) << a << " " << b;
        }
        // reversal.csv holds model-wide rows alone (--scope model).
        if (name != "reversal.csv") EXPECT_GT(compared, 0u) << "no per-layer row";
    }
    EXPECT_GE(tables, 15u);
}

nlohmann::json run_json(const fs::path& dir) {
    return nlohmann::json::parse(read_file(dir / "run.json"));
}

}  // namespace

TEST(AnalyzeLayers, PerLayerValuesEqualTheRunOfEveryLayer) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const fs::path model = shared / "zoo" / "mistral";
    std::string text;
    for (const char* s : {"The quick brown fox jumps over the lazy dog near the river bank.",
                          "Attention sinks soak up most of the attention mass of a head.",
                          "A small model of three layers still shows a clear first token.",
                          "Every sentence here is long enough to pass the sliding window."})
        text += std::string(s) + "\n";
    testutil::write_text(tmp / "data.txt", text);
    // Stored rows, and rows recomputed from the rotated queries and keys (memory 0).
    const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
        {"all", {}},
        {"sel", {"--layers", "2,0"}},
        {"tail", {"--layers", "1-2"}},
        {"last", {"--layers", "2"}},
        {"named", {"--layers", "0-2"}},
        {"lazy_all", {"--attention-memory-mb", "0"}},
        {"lazy_sel", {"--attention-memory-mb", "0", "--layers", "0,2"}}};
    std::vector<std::vector<std::string>> commands;
    for (const auto& [name, extra] : runs) {
        std::vector<std::string> c = {"analyze",
                                      "--model",
                                      model.string(),
                                      "--data",
                                      (tmp / "data.txt").string(),
                                      "--max-tokens",
                                      "24",
                                      "--analyses",
                                      "all,entropy_rows",
                                      "--out",
                                      (tmp / name).string(),
                                      "--no-report",
                                      "--progress",
                                      "never"};
        c.insert(c.end(), extra.begin(), extra.end());
        commands.push_back(c);
    }
    const auto results = testutil::run_cli_batch(commands, tmp / "logs", 2);
    ASSERT_EQ(results.size(), commands.size());
    for (size_t i = 0; i < results.size(); ++i)
        ASSERT_EQ(results[i].exit_code, 0) << runs[i].first << "\n" << results[i].err;

    const double n_rows = 4 * 24;  // inputs x query rows at most, per head
    expect_rows_of(tmp / "sel", tmp / "all", {0, 2}, n_rows);
    expect_rows_of(tmp / "tail", tmp / "all", {1, 2}, n_rows);
    expect_rows_of(tmp / "lazy_sel", tmp / "lazy_all", {0, 2}, n_rows);

    // Every layer named: the same files as no --layers at all.
    for (const auto& e : fs::recursive_directory_iterator(tmp / "all")) {
        if (!e.is_regular_file() || e.path().filename() == "run.json") continue;
        const fs::path rel = fs::relative(e.path(), tmp / "all");
        EXPECT_EQ(read_file(tmp / "named" / rel), read_file(e.path())) << rel;
    }

    // entropy_rows.npy: the rows of layers 0 and 2, by their model index, in the same order.
    const auto rows_of = [&](const std::string& run, const std::set<double>& keep) {
        const std::vector<double> v = io::read_npy(tmp / run / "entropy_rows.npy").to_f64();
        std::vector<double> out;
        for (size_t k = 0; k < v.size(); k += 8)
            if (keep.count(v[k + 1]))
                out.insert(out.end(), v.begin() + long(k), v.begin() + long(k + 8));
        return out;
    };
    const std::vector<double> sel_rows = rows_of("sel", {0, 1, 2});
    EXPECT_FALSE(sel_rows.empty());
    EXPECT_EQ(sel_rows, rows_of("all", {0, 2}));

    // Persistence diagrams are named by the model layer: layer 2's are the same bytes.
    ASSERT_TRUE(fs::exists(tmp / "sel" / "diagrams" / "input0_layer2_avg.npy"));
    EXPECT_FALSE(fs::exists(tmp / "sel" / "diagrams" / "input0_layer1_avg.npy"));
    EXPECT_EQ(read_file(tmp / "sel" / "diagrams" / "input0_layer2_avg.npy"),
              read_file(tmp / "all" / "diagrams" / "input0_layer2_avg.npy"));

    // The frame evidence per layer by model index; the middle and late layers are the model's
    // (>= floor(3 / 3) = 1): layer 2 alone of the selection, not the selection's own first third.
    const auto frame = [&](const std::string& run) {
        return nlohmann::json::parse(read_file(tmp / run / "frame.json"));
    };
    const nlohmann::json fa = frame("all"), fsel = frame("sel"), ft = frame("tail");
    EXPECT_EQ(fsel["mid_late_first_layer"], 1);
    ASSERT_EQ(fsel["layers"].size(), 2u);
    EXPECT_EQ(fsel["layers"][0], fa["layers"][0]);
    EXPECT_EQ(fsel["layers"][1], fa["layers"][2]);
    // Layers 1-2 are the whole middle and late part of the model: the same share as all layers.
    EXPECT_EQ(ft["share_first_mid_late"], fa["share_first_mid_late"]);
    EXPECT_EQ(ft["mean_reference_count"], fa["mean_reference_count"]);
    const auto& l2 = fa["layers"][2];
    const double share2 =
        l2["first"].get<double>() /
        (l2["first"].get<double>() + l2["last"].get<double>() + l2["other"].get<double>());
    EXPECT_DOUBLE_EQ(fsel["share_first_mid_late"].get<double>(), share2);
    // The reference counts of the middle and late layers: layer 2's alone, as a run of it alone.
    const nlohmann::json fl = frame("last");
    EXPECT_EQ(fsel["mean_reference_count"], fl["mean_reference_count"]);
    EXPECT_EQ(fsel["share_first_mid_late"], fl["share_first_mid_late"]);

    // run.json: the selection, and an option compare sees; none for every layer.
    const nlohmann::json rs = run_json(tmp / "sel"), ra = run_json(tmp / "all");
    EXPECT_EQ(rs["layers"]["analysed"], nlohmann::json({0, 2}));
    EXPECT_EQ(rs["layers"]["model_layers"], 3);
    EXPECT_EQ(rs["options"]["layers"], "0,2");
    EXPECT_EQ(ra["layers"]["analysed"], "all");
    EXPECT_FALSE(ra["options"].contains("layers"));
    EXPECT_FALSE(run_json(tmp / "named")["options"].contains("layers"));
    const auto cmp = testutil::run_cli({"compare", (tmp / "all").string(), (tmp / "sel").string(),
                                        "--out", (tmp / "cmp").string()});
    EXPECT_NE((cmp.out + cmp.err).find("--layers"), std::string::npos) << cmp.out << cmp.err;
}

TEST(AnalyzeLayers, BadSelectionsAreRefusedBeforeAnythingIsWritten) {
    SINKSCOPE_REQUIRE_MODEL_RUNTIME();
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"3", "the model has 3 layers (0-2), so layer 3 does not exist"},
        {"2-1", "the range 2-1 runs backwards"},
        {"one", "'one' is not a layer index"}};
    for (const auto& [spec, message] : cases) {
        const auto r =
            testutil::run_cli({"analyze", "--model", (shared / "zoo" / "mistral").string(),
                               "--layers", spec, "--out", (tmp / "out").string()});
        EXPECT_EQ(r.exit_code, 2) << spec << "\n" << r.err;
        EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_FALSE(fs::exists(tmp / "out")) << spec;
    }
}
