// `sinkscope metrics` with sinks that are not key 0 (spec 0, 10.d): the section 8 direct sink
// mass (10.k) and the per-layer regime rows (spec 7, 10.d) must use each layer's resolved sink.
// Expected values are computed here from the written attention, independently of the library.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "flips.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"

using namespace sinkscope;
namespace fs = std::filesystem;

namespace {

// [N, L, H, T, T] row-major attention, f64, with the visibility rule of spec 0.
struct Dump {
    int64_t n, l, h, t;
    bool causal;
    std::vector<double> a;
    double at(int64_t in, int64_t layer, int64_t head, int64_t i, int64_t j) const {
        return a[size_t((((in * l + layer) * h + head) * t + i) * t + j)];
    }
    int64_t key_end(int64_t i) const { return causal ? i + 1 : t; }
    // Row i closed over its visible keys (10.a).
    std::vector<double> row(int64_t in, int64_t layer, int64_t head, int64_t i) const {
        std::vector<double> p(size_t(key_end(i)));
        double s = 0;
        for (int64_t j = 0; j < key_end(i); ++j) s += (p[size_t(j)] = at(in, layer, head, i, j));
        for (auto& v : p) v /= s;
        return p;
    }
};

// Softmax rows of seeded logits; key sink(layer) gets a head-dependent boost.
Dump make_dump(int64_t n, int64_t l, int64_t h, int64_t t, bool causal,
               const std::vector<int64_t>& sink, uint64_t seed) {
    Dump d{n, l, h, t, causal, std::vector<double>(size_t(n * l * h * t * t), 0.0)};
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> g;
    std::uniform_real_distribution<double> u(0.5, 3.5);
    for (int64_t in = 0; in < n; ++in)
        for (int64_t layer = 0; layer < l; ++layer)
            for (int64_t head = 0; head < h; ++head) {
                const double boost = u(rng), temp = u(rng) / 2;
                for (int64_t i = 0; i < t; ++i) {
                    const int64_t ke = d.key_end(i);
                    std::vector<double> e(static_cast<size_t>(ke));
                    double s = 0;
                    for (int64_t j = 0; j < ke; ++j)
                        s += (e[size_t(j)] = std::exp(temp * g(rng) +
                                                      (j == sink[size_t(layer)] ? boost : 0.0)));
                    for (int64_t j = 0; j < ke; ++j)
                        d.a[size_t((((in * l + layer) * h + head) * t + i) * t + j)] =
                            e[size_t(j)] / s;
                }
            }
    return d;
}

// Spec 10.d argmax: the key with the largest column mean of closed rows over heads and rows
// (masked entries count 0); ties to the lowest position. layer < 0: over all layers.
int64_t argmax_sink(const Dump& d, int64_t in, int64_t layer) {
    std::vector<double> col(size_t(d.t), 0.0);
    for (int64_t l = 0; l < d.l; ++l) {
        if (layer >= 0 && l != layer) continue;
        for (int64_t h = 0; h < d.h; ++h)
            for (int64_t i = 0; i < d.t; ++i) {
                const auto p = d.row(in, l, h, i);
                for (size_t j = 0; j < p.size(); ++j) col[j] += p[j];
            }
    }
    return int64_t(std::max_element(col.begin(), col.end()) - col.begin());
}

// Spec 10.k: mean of A[h, i, s] (closed rows) over heads and the rows that see s.
double direct_mass(const Dump& d, int64_t in, int64_t layer, int64_t s) {
    double acc = 0;
    int64_t cnt = 0;
    for (int64_t h = 0; h < d.h; ++h)
        for (int64_t i = 0; i < d.t; ++i)
            if (s < d.key_end(i)) acc += d.row(in, layer, h, i)[size_t(s)], ++cnt;
    return acc / double(cnt);
}

double num(const io::Cell& c) {
    return std::get<double>(c);
}
size_t col(const io::Table& t, const std::string& name) {
    const auto& c = t.columns();
    const auto it = std::find(c.begin(), c.end(), name);
    EXPECT_NE(it, c.end()) << name;
    return size_t(it - c.begin());
}

// kl.csv sink_mass_all_rows by layer (exactly one row per layer).
std::map<int64_t, double> direct_sink_rows(const fs::path& kl) {
    const io::Table t = io::Table::read_csv(kl);
    std::map<int64_t, double> out;
    for (const auto& r : t.rows())
        if (std::get<std::string>(r[col(t, "metric")]) == "sink_mass_all_rows") {
            const auto layer = int64_t(num(r[col(t, "layer")]));
            EXPECT_EQ(out.count(layer), 0u) << "two sink_mass_all_rows rows for layer " << layer;
            out[layer] = num(r[col(t, "value")]);
        }
    return out;
}

}  // namespace

// Bidirectional attention whose sinks are 0, 0, T-1, T-1 by layer: with --sink argmax the
// direct sink mass of each layer is the mass on that layer's argmax key, not on key 0.
TEST(MetricsCliSinks, DirectSinkMassOnArgmaxSink) {
    testutil::ScratchDir dir;
    const int64_t n = 2, l = 4, h = 3, t = 8;
    const Dump d = make_dump(n, l, h, t, false, {0, 0, t - 1, t - 1}, 5);
    io::write_npy(dir / "a.npy", io::make_npy_f64({n, l, h, t, t}, d.a));
    auto r = testutil::run_cli({"metrics", "--attention", (dir / "a.npy").string(), "--sink",
                                "argmax", "--analyses", "kl", "--out", (dir / "o").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto rows = direct_sink_rows(dir / "o" / "kl.csv");
    ASSERT_EQ(rows.size(), size_t(l));
    for (int64_t layer = 0; layer < l; ++layer) {
        double expected = 0;
        for (int64_t in = 0; in < n; ++in) {
            const int64_t s = argmax_sink(d, in, layer);
            if (layer >= 2) {
                ASSERT_EQ(s, t - 1) << "the input should have its sink at T-1";
            }
            expected += direct_mass(d, in, layer, s) / double(n);
        }
        // means over < 500 terms of one sign, summed in another order (tolerance.hpp)
        EXPECT_REL_WITHIN(rows.at(layer), expected, testutil::kF64ShortSumRel) << "layer " << layer;
    }
}

// Causal attention with BOS (id 1) at position 2 (and again at 4) in input 0 and at 1 in input
// 1: with --sink bos the direct sink mass is on each input's first BOS, over the rows that see it.
TEST(MetricsCliSinks, DirectSinkMassOnBosSink) {
    testutil::ScratchDir dir;
    const int64_t n = 2, l = 2, h = 2, t = 6;
    const Dump d = make_dump(n, l, h, t, true, {0, 0}, 6);
    io::write_npy(dir / "a.npy", io::make_npy_f64({n, l, h, t, t}, d.a));
    io::write_npy(dir / "ids.npy", io::make_npy_i64({n, t}, {7, 9, 1, 4, 1, 5, 3, 1, 8, 8, 8, 8}));
    auto r = testutil::run_cli({"metrics", "--attention", (dir / "a.npy").string(), "--token-ids",
                                (dir / "ids.npy").string(), "--sink", "bos", "--bos-id", "1",
                                "--analyses", "kl", "--out", (dir / "o").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto rows = direct_sink_rows(dir / "o" / "kl.csv");
    ASSERT_EQ(rows.size(), size_t(l));
    const int64_t bos[2] = {2, 1};
    for (int64_t layer = 0; layer < l; ++layer) {
        const double expected =
            (direct_mass(d, 0, layer, bos[0]) + direct_mass(d, 1, layer, bos[1])) / 2;
        // means over < 500 terms of one sign, summed in another order (tolerance.hpp)
        EXPECT_REL_WITHIN(rows.at(layer), expected, testutil::kF64ShortSumRel) << "layer " << layer;
    }
}

namespace {

// Spec 1-2 classical head distances of layer `layer` with sink s(in) on closed rows, keep (on p)
// and drop (on pi): metric index 0 cosine, 1 JS (nats), 2 Euclidean; [metric][convention][a][b].
using Matrices = std::vector<std::vector<std::vector<std::vector<double>>>>;
Matrices layer_distances(const Dump& d, int64_t layer, const std::vector<int64_t>& sink) {
    Matrices m(3, std::vector<std::vector<std::vector<double>>>(
                      2, std::vector<std::vector<double>>(size_t(d.h),
                                                          std::vector<double>(size_t(d.h), 0))));
    auto entropy = [](const std::vector<double>& p) {
        double e = 0;
        for (double v : p)
            if (v > 0) e -= v * std::log(v);
        return e;
    };
    int64_t rows = 0;
    for (int64_t in = 0; in < d.n; ++in)
        for (int64_t i = 0; i < d.t; ++i) {  // bidirectional: D = T >= 3, the sink always visible
            ++rows;
            std::vector<std::vector<double>> conv[2];
            for (int64_t hh = 0; hh < d.h; ++hh) {
                const auto p = d.row(in, layer, hh, i);
                std::vector<double> pi;
                const double s = p[size_t(sink[size_t(in)])];
                for (size_t j = 0; j < p.size(); ++j)
                    if (int64_t(j) != sink[size_t(in)]) pi.push_back(p[j] / (1 - s));
                conv[0].push_back(p);
                conv[1].push_back(pi);
            }
            for (int c = 0; c < 2; ++c)
                for (int64_t a = 0; a < d.h; ++a)
                    for (int64_t b = 0; b < d.h; ++b) {
                        const auto& p = conv[c][size_t(a)];
                        const auto& q = conv[c][size_t(b)];
                        double dot = 0, pp = 0, qq = 0, sq = 0;
                        std::vector<double> mid(p.size());
                        for (size_t j = 0; j < p.size(); ++j) {
                            dot += p[j] * q[j], pp += p[j] * p[j], qq += q[j] * q[j];
                            sq += (p[j] - q[j]) * (p[j] - q[j]);
                            mid[j] = (p[j] + q[j]) / 2;
                        }
                        m[0][c][a][b] += 1 - dot / std::sqrt(pp * qq);
                        m[1][c][a][b] += entropy(mid) - (entropy(p) + entropy(q)) / 2;
                        m[2][c][a][b] += std::sqrt(sq);
                    }
        }
    for (auto& metric : m)
        for (auto& conv : metric)
            for (auto& r : conv)
                for (auto& v : r) v /= double(rows);
    return m;
}

// Spec 3, 10.f: keep-vs-drop flip counts over all triples (a; {b, c}), pooled over the three
// metrics (10.g). Returns {compared, disagree}.
std::pair<int64_t, int64_t> pooled_flips(const Matrices& m) {
    int64_t compared = 0, disagree = 0;
    const auto h = static_cast<int64_t>(m[0][0].size());
    for (const auto& metric : m) {
        const auto [c, f] = testutil::count_flips(
            [&](int64_t i, int64_t j) { return metric[0][size_t(i)][size_t(j)]; },
            [&](int64_t i, int64_t j) { return metric[1][size_t(i)][size_t(j)]; }, 0, h);
        compared += c;
        disagree += f;
    }
    return {compared, disagree};
}

}  // namespace

// Model scope on bidirectional attention with sinks 0, 0, T-1, T-1 by layer: a layer's regime
// row takes rho and the flip rate with the same (the layer's own) sink (10.d). The expected
// counts come from distances and triples computed here; a verdict could differ from the
// library's only for a triple whose two distances agree to ~1e-15 relative (none here: the
// check below that the two sinks give different counts would not hold on such degenerate data).
TEST(MetricsCliSinks, PerLayerRegimeUsesTheLayerSink) {
    testutil::ScratchDir dir;
    const int64_t n = 2, l = 4, h = 6, t = 8;
    const Dump d = make_dump(n, l, h, t, false, {0, 0, t - 1, t - 1}, 7);
    io::write_npy(dir / "a.npy", io::make_npy_f64({n, l, h, t, t}, d.a));
    auto r = testutil::run_cli({"metrics", "--attention", (dir / "a.npy").string(), "--sink",
                                "argmax", "--analyses", "heads", "--out", (dir / "o").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const io::Table reg = io::Table::read_csv(dir / "o" / "regime.csv");
    std::map<int64_t, std::pair<int64_t, int64_t>> reported;  // layer -> compared, disagree
    for (const auto& row : reg.rows())
        if (std::get<std::string>(row[col(reg, "scope")]) == "layer")
            reported[int64_t(num(row[col(reg, "layer")]))] = {
                int64_t(num(row[col(reg, "flip_compared")])),
                int64_t(num(row[col(reg, "flip_disagree")]))};
    ASSERT_EQ(reported.size(), size_t(l));
    int64_t layers_where_sinks_matter = 0;
    for (int64_t layer = 0; layer < l; ++layer) {
        std::vector<int64_t> own, model;
        for (int64_t in = 0; in < n; ++in) {
            own.push_back(argmax_sink(d, in, layer));
            model.push_back(argmax_sink(d, in, -1));
        }
        const auto expected = pooled_flips(layer_distances(d, layer, own));
        EXPECT_EQ(reported.at(layer), expected) << "layer " << layer;
        if (own != model && pooled_flips(layer_distances(d, layer, model)) != expected)
            ++layers_where_sinks_matter;
    }
    EXPECT_GT(layers_where_sinks_matter, 0) << "the input does not tell the two sinks apart";
}
