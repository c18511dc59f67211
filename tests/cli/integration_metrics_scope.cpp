// `sinkscope metrics --scope layer` (spec 2 "scope"): heads are compared only inside a layer, so
// the reversal rates, the clustering and the regime predictor run layer by layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "flips.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"

using namespace sinkscope;
namespace fs = std::filesystem;

namespace {

size_t col(const io::Table& t, const std::string& name) {
    const auto& c = t.columns();
    const auto it = std::find(c.begin(), c.end(), name);
    EXPECT_NE(it, c.end()) << name;
    return size_t(it - c.begin());
}
double num(const std::vector<io::Cell>& row, size_t c) {
    return std::get<double>(row[c]);
}
std::string str(const std::vector<io::Cell>& row, size_t c) {
    return std::get<std::string>(row[c]);
}

// Spec 3, 10.f, 10.g: keep-vs-drop flips over the triples of heads [first, first + m) of the
// written [n, n] matrices, pooled over cosine, JS and Euclidean. Returns {compared, disagree}.
std::pair<int64_t, int64_t> pooled_flips(const fs::path& out, int64_t first, int64_t m) {
    int64_t compared = 0, disagree = 0;
    for (const char* metric : {"cosine", "js", "euclidean"}) {
        const io::NpyArray keep =
            io::read_npy(out / "distances" / (std::string(metric) + "_keep.npy"));
        const io::NpyArray drop =
            io::read_npy(out / "distances" / (std::string(metric) + "_drop.npy"));
        const std::vector<double> k = keep.to_f64(), d = drop.to_f64();
        const int64_t n = keep.shape[0];
        const auto [c, f] = testutil::count_flips(
            [&](int64_t i, int64_t j) { return k[size_t(i * n + j)]; },
            [&](int64_t i, int64_t j) { return d[size_t(i * n + j)]; }, first, m);
        compared += c;
        disagree += f;
    }
    return {compared, disagree};
}

}  // namespace

// --scope layer runs the head analyses per layer on the example (4 layers x 4 heads): the
// regime has one row per layer whose flip counts are those of the layer's own triples (counted
// here on the written distance matrices), the reversal table has every layer and the pooled row,
// and every layer is clustered alone (a `layer` column in silhouette.csv and ari.csv).
TEST(MetricsCliScope, LayerScopeRunsTheHeadAnalysesPerLayer) {
    testutil::ScratchDir dir;
    const fs::path out = dir / "o";
    auto r = testutil::run_cli({"metrics", "--example", "--scope", "layer", "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const int64_t n_layers = 4, n_heads = 4;

    const io::Table reg = io::Table::read_csv(out / "regime.csv");
    ASSERT_EQ(reg.size(), size_t(n_layers));
    for (const auto& row : reg.rows()) {
        EXPECT_EQ(str(row, col(reg, "scope")), "layer");
        const auto layer = int64_t(num(row, col(reg, "layer")));
        const auto expected = pooled_flips(out, layer * n_heads, n_heads);
        EXPECT_EQ(int64_t(num(row, col(reg, "flip_compared"))), expected.first) << layer;
        EXPECT_EQ(int64_t(num(row, col(reg, "flip_disagree"))), expected.second) << layer;
    }

    const io::Table rev = io::Table::read_csv(out / "reversal.csv");
    std::set<int64_t> rev_layers;
    for (const auto& row : rev.rows()) {
        EXPECT_EQ(str(row, col(rev, "scope")), "layer");
        rev_layers.insert(int64_t(num(row, col(rev, "layer"))));
    }
    EXPECT_EQ(rev_layers, (std::set<int64_t>{-1, 0, 1, 2, 3}));

    // Each layer's clustering: the labels of its heads are 0..k-1 with k of that layer.
    const io::Table clu = io::Table::read_csv(out / "clusters.csv");
    std::map<std::pair<std::string, int64_t>, std::set<int64_t>> labels;
    std::map<std::pair<std::string, int64_t>, int64_t> k_of;
    for (const auto& row : clu.rows()) {
        const auto key =
            std::make_pair(str(row, col(clu, "matrix")), int64_t(num(row, col(clu, "layer"))));
        labels[key].insert(int64_t(num(row, col(clu, "cluster"))));
        k_of[key] = int64_t(num(row, col(clu, "k")));
    }
    EXPECT_EQ(clu.size(), size_t(8 * n_layers * n_heads));
    for (const auto& [key, set] : labels) {
        EXPECT_GE(*set.begin(), 0);
        EXPECT_LT(*set.rbegin(), k_of.at(key)) << key.first << " layer " << key.second;
    }
    for (const char* table : {"silhouette", "ari"}) {
        const io::Table t = io::Table::read_csv(out / (std::string(table) + ".csv"));
        std::set<int64_t> layers;
        for (const auto& row : t.rows()) layers.insert(int64_t(num(row, col(t, "layer"))));
        EXPECT_EQ(layers, (std::set<int64_t>{0, 1, 2, 3})) << table;
    }
    const io::NpyArray mds = io::read_npy(out / "mds" / "dA_perp.npy");
    EXPECT_EQ(mds.shape, (std::vector<int64_t>{n_layers * n_heads, 2}));
    for (double v : mds.to_f64()) EXPECT_TRUE(std::isfinite(v));
}
