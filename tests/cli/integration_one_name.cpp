// One name, one quantity: the tables a run writes name each quantity so that equal names mean
// equal numbers and different row sets get different names (docs/metrics.md). Checked on real
// runs of the executable, from the written tables alone:
//  * the entropy identity H(p) = H_b(s) + (1 - s) H(pi) (spec/METRICS.md section 1) between the
//    heads.csv columns entropy, binary_sink_entropy and content_entropy_weighted;
//  * a name found in two tables (rho in dispersion.csv and regime.csv) holds the same number;
//  * heads.csv sink_mass / entropy and their all-rows twins in kl.csv / entropy.csv agree where
//    the row sets do (bidirectional attention, every input of one length), and differ on causal
//    attention, where the all-rows names also cover the rows with fewer than min_parts keys.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <tuple>

#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"
#include "tolerance.hpp"

using namespace sinkscope;
namespace fs = std::filesystem;

namespace {

double number(const io::Cell& c) {
    if (const auto* d = std::get_if<double>(&c)) return *d;
    if (const auto* i = std::get_if<int64_t>(&c)) return double(*i);
    return std::nan("");
}
std::string text(const io::Cell& c) {
    if (const auto* s = std::get_if<std::string>(&c)) return *s;
    return "";
}
size_t col(const io::Table& t, const std::string& name) {
    const auto& c = t.columns();
    const auto it = std::find(c.begin(), c.end(), name);
    EXPECT_NE(it, c.end()) << name;
    return size_t(it - c.begin());
}

// (layer, head, metric) -> value of a long-format table (the first row of each key; `param`
// filtered when given).
using LongKey = std::tuple<int64_t, int64_t, std::string>;
std::map<LongKey, double> long_values(const fs::path& csv, const std::string& param = "") {
    const io::Table t = io::Table::read_csv(csv);
    std::map<LongKey, double> out;
    const bool has_param =
        std::find(t.columns().begin(), t.columns().end(), "param") != t.columns().end();
    for (const auto& r : t.rows()) {
        if (has_param && !param.empty() && text(r[col(t, "param")]) != param &&
            number(r[col(t, "param")]) != std::stod(param))
            continue;
        out.emplace(LongKey{int64_t(number(r[col(t, "layer")])), int64_t(number(r[col(t, "head")])),
                            text(r[col(t, "metric")])},
                    number(r[col(t, "value")]));
    }
    return out;
}

// Bidirectional softmax rows of seeded logits ([N, L, H, T, T], f64), key 0 boosted.
std::vector<double> bidirectional_attention(int64_t n, int64_t l, int64_t h, int64_t t) {
    std::vector<double> a(size_t(n * l * h * t * t));
    std::mt19937_64 rng(7);
    std::normal_distribution<double> g;
    for (size_t row = 0; row < a.size() / size_t(t); ++row) {
        double s = 0;
        for (int64_t j = 0; j < t; ++j)
            s += (a[row * size_t(t) + size_t(j)] = std::exp(g(rng) + (j == 0 ? 1.5 : 0.0)));
        for (int64_t j = 0; j < t; ++j) a[row * size_t(t) + size_t(j)] /= s;
    }
    return a;
}

}  // namespace

// heads.csv alone: entropy = binary_sink_entropy + content_entropy_weighted for every head.
// content_entropy_renorm (H(pi), not weighted) does not satisfy it on the example, whose sinks
// are strong, so a table that wrote H(pi) in the weighted column fails here.
TEST(OneNameOneQuantity, EntropyIdentityFromHeadsTable) {
    testutil::ScratchDir dir;
    const auto r =
        testutil::run_cli({"metrics", "--example", "--no-report", "--out", (dir / "o").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto v = long_values(dir / "o" / "heads.csv");
    int checked = 0, renorm_differs = 0;
    for (const auto& [key, h] : v) {
        const auto& [layer, head, metric] = key;
        if (metric != "entropy") continue;
        const double hb = v.at({layer, head, "binary_sink_entropy"});
        const double weighted = v.at({layer, head, "content_entropy_weighted"});
        const double renorm = v.at({layer, head, "content_entropy_renorm"});
        const double n_rows = v.at({layer, head, "n_rows"});
        ASSERT_GT(n_rows, 0);
        // Per row the identity holds to kSpecEntropyRel; each column is a float64 mean of
        // n_rows terms of one sign (within gamma_n of exact each, so 3 gamma_n between the three
        // columns); the CSV holds 17 significant digits (round trip, exact).
        const double tol =
            testutil::kSpecEntropyRel + 3 * testutil::gamma_k(n_rows, testutil::kU64);
        EXPECT_REL_WITHIN(h, hb + weighted, tol) << "layer " << layer << " head " << head;
        if (std::abs(h - (hb + renorm)) > 1e-3 * h) ++renorm_differs;
        ++checked;
    }
    EXPECT_EQ(checked, 16);  // the example: 4 layers x 4 heads
    EXPECT_GT(renorm_differs, 0);
}

// The same name in two tables is the same number: rho of a layer (and of the model) in
// dispersion.csv and regime.csv.
TEST(OneNameOneQuantity, RhoInDispersionAndRegime) {
    testutil::ScratchDir dir;
    const auto r =
        testutil::run_cli({"metrics", "--example", "--no-report", "--out", (dir / "o").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto rho_by_scope = [&](const char* file) {
        const io::Table t = io::Table::read_csv(dir / "o" / file);
        std::map<std::pair<std::string, int64_t>, double> out;
        for (const auto& row : t.rows())
            out[{text(row[col(t, "scope")]), int64_t(number(row[col(t, "layer")]))}] =
                number(row[col(t, "rho")]);
        return out;
    };
    const auto disp = rho_by_scope("dispersion.csv"), reg = rho_by_scope("regime.csv");
    ASSERT_EQ(disp.size(), 5u);  // model + 4 layers
    for (const auto& [key, rho] : disp) {
        ASSERT_TRUE(reg.count(key)) << key.first << " " << key.second;
        EXPECT_EQ(reg.at(key), rho) << key.first << " " << key.second;  // one number, copied
    }
}

// heads.csv sink_mass (mean over a layer's heads) and entropy (per head) against kl.csv
// sink_mass_all_rows and entropy.csv entropy_all_rows: equal on bidirectional attention of one
// length (every row has D = T >= min_parts, so both row sets are all rows and the pooled mean is
// the mean of the per-input means; the sink is key 0 in both, where bidirectional attention
// would default to argmax); different on causal attention (rows 0 and 1 have D < 3).
TEST(OneNameOneQuantity, AllRowsTwinsAgreeWhereRowSetsDo) {
    testutil::ScratchDir dir;
    const int64_t n = 3, l = 2, h = 3, t = 7;
    io::write_npy(dir / "a.npy",
                  io::make_npy_f64({n, l, h, t, t}, bidirectional_attention(n, l, h, t)));
    const auto r = testutil::run_cli({"metrics", "--attention", (dir / "a.npy").string(),
                                      "--analyses", "compositional,kl,entropy", "--sink", "first",
                                      "--no-report", "--out", (dir / "o").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto heads = long_values(dir / "o" / "heads.csv");
    const auto kl = long_values(dir / "o" / "kl.csv", "0");
    const auto ent = long_values(dir / "o" / "entropy.csv");
    // Each side is a float64 mean of at most N H T terms of one sign (gamma_{NHT} of exact), of
    // rows closed by their sums (T terms, gamma_T); entropy.csv computes a row's entropy as
    // ln S - sum p ln p / S (a few more roundings): 2 (gamma_{NHT} + gamma_{T+4}) between them.
    const double tol = 2 * (testutil::gamma_k(double(n * h * t), testutil::kU64) +
                            testutil::gamma_k(double(t + 4), testutil::kU64));
    for (int64_t layer = 0; layer < l; ++layer) {
        double mass = 0;
        for (int64_t head = 0; head < h; ++head) {
            mass += heads.at({layer, head, "sink_mass"}) / double(h);
            EXPECT_REL_WITHIN(heads.at({layer, head, "entropy"}),
                              ent.at({layer, head, "entropy_all_rows"}), tol)
                << "layer " << layer << " head " << head;
        }
        EXPECT_REL_WITHIN(mass, kl.at({layer, -1, "sink_mass_all_rows"}), tol) << layer;
    }
}

// On causal attention the names differ because the numbers do: the all-rows mass includes row 0,
// whose whole mass is on the sink.
TEST(OneNameOneQuantity, AllRowsTwinsDifferOnCausalAttention) {
    testutil::ScratchDir dir;
    const auto r = testutil::run_cli({"metrics", "--example", "--analyses", "compositional,kl",
                                      "--no-report", "--out", (dir / "o").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto heads = long_values(dir / "o" / "heads.csv");
    const auto kl = long_values(dir / "o" / "kl.csv", "0");
    for (int64_t layer = 0; layer < 4; ++layer) {
        double mass = 0;
        for (int64_t head = 0; head < 4; ++head) mass += heads.at({layer, head, "sink_mass"}) / 4;
        EXPECT_GT(kl.at({layer, -1, "sink_mass_all_rows"}), mass + 1e-3) << layer;
    }
}
