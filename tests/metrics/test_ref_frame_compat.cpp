// The P2 accumulator end to end: compat ruscio2025 artifacts on causal attention (PAPERS.md
// B.3), layer subsets (10.o), mergeability, option validation, output tables.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <gtest/gtest.h>

#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/table.hpp"
#include "sinkscope/metrics/graph.hpp"
#include "sinkscope/metrics/ref_frame.hpp"
#include "synthetic_attention.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::metrics;

namespace {
// Random causal softmax attention with a sink on key 0, [L, H, T, T].
AttentionInput random_causal(int64_t n_layers, int64_t n_heads, int64_t n, uint64_t seed) {
    return testutil::causal_sink_attention(n_layers, n_heads, n, {.sink_boost = 2.0}, seed);
}
double stat(const RefFrameResults& r, const std::string& table, int64_t l, int64_t h,
            const std::string& metric, const std::string& param = "") {
    const auto it = r.stats.find(RefFrameKey{table, l, h, metric, param});
    if (it == r.stats.end()) ADD_FAILURE() << "missing " << table << "/" << metric << " " << param;
    return it == r.stats.end() ? NAN : it->second.mean();
}
// Head-averaged self-attention of kept positions >= 1 (the B.3 artifact), fp64.
double mean_self_attention(const AttentionInput& in, int64_t l, const std::vector<int64_t>& kept) {
    double acc = 0;
    for (size_t k = 1; k < kept.size(); ++k) {
        double a = 0;
        for (int64_t h = 0; h < in.n_heads; ++h) a += in.row(l, h, kept[k])[kept[k]];
        acc += a / static_cast<double>(in.n_heads);
    }
    return acc / static_cast<double>(kept.size() - 1);
}
RefFrameOptions topology_only(const std::string& compat) {
    RefFrameOptions o;
    o.analyses = "topology";
    o.compat = compat;
    return o;
}
}  // namespace

// Compat on causal attention reproduces the released-code artifact: Betti0 = kept tokens,
// Betti1 = 0, dim-0 mean persistence = mean self-attention of positions >= 1, and a warning.
TEST(RefFrameCompat, CausalBettiCountsTokens) {
    for (int64_t n : {12, 40}) {  // 40 > 30 exercises the linspace downsampling
        const auto in = random_causal(5, 3, n, 99 + static_cast<uint64_t>(n));
        RefFrameAccumulator acc(topology_only("ruscio2025"));
        acc.add(in);
        const auto r = acc.finish();
        const auto kept = linspace_indices(n, k_compat_max_tokens);
        for (int64_t l : topology_layers(5, true)) {
            EXPECT_EQ(stat(r, "topology", l, -1, "n_bars_dim0"), static_cast<double>(kept.size()));
            EXPECT_EQ(stat(r, "topology", l, -1, "n_bars_dim1"), 0.0);
            // fp32 distances as in the notebook: each death is a float32 head mean (n_heads terms)
            // of values <= 1, then 1 - a and its float32 store: (n_heads + 2) 2^-24; the float64
            // mean over the kept tokens adds nothing visible
            EXPECT_WITHIN(stat(r, "topology", l, -1, "mean_persistence_dim0"),
                          mean_self_attention(in, l, kept),
                          double(in.n_heads + 2) * testutil::kU32);
        }
        ASSERT_EQ(r.warnings.size(), 1u);
        EXPECT_NE(r.warnings[0].find("only count tokens"), std::string::npos);
    }
}

// Principled mode on the same causal input gives a Betti0 curve that changes with eps.
TEST(RefFrameCompat, PrincipledBettiCurveIsNotConstant) {
    const auto in = random_causal(2, 3, 16, 5);
    RefFrameAccumulator acc(topology_only(""));
    acc.add(in);
    const auto r = acc.finish();
    EXPECT_TRUE(r.warnings.empty());
    std::set<double> values;
    for (int g = 0; g <= 100; ++g)
        values.insert(stat(r, "betti", 0, -1, "betti0", io::format_number(g / 100.0)));
    EXPECT_GT(values.size(), 1u);
    EXPECT_EQ(stat(r, "betti", 0, -1, "betti0", "0"), 16.0);  // all points born at 0
}

// Layer subsets of the notebooks (10.o).
TEST(RefFrameCompat, LayerSubsets) {
    EXPECT_EQ(topology_layers(28, true), (std::vector<int64_t>{0, 7, 14, 21, 27}));
    EXPECT_EQ(topology_layers(24, true), (std::vector<int64_t>{0, 6, 12, 18, 23}));
    EXPECT_EQ(topology_layers(3, true), (std::vector<int64_t>{0, 1, 2}));
    EXPECT_EQ(kl_layers(10, true), (std::vector<int64_t>{0, 1, 3, 5, 7, 9}));
    EXPECT_EQ(kl_layers(6, true), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(kl_layers(10, false).size(), 10u);
}

// Accumulating two inputs in one accumulator equals merging two one-input accumulators.
TEST(RefFrameCompat, MergeEqualsSequentialAdd) {
    const auto a = random_causal(3, 2, 10, 1), b = random_causal(3, 2, 10, 2);
    RefFrameAccumulator both, first, second;
    both.add(a);
    both.add(b);
    first.add(a);
    second.add(b);
    first.merge(second);
    const auto r1 = both.finish(), r2 = first.finish();
    ASSERT_EQ(r1.stats.size(), r2.stats.size());
    for (const auto& [k, s] : r1.stats) {
        const auto& t = r2.stats.at(k);
        EXPECT_EQ(s.n, t.n) << k.table << "/" << k.metric;
        EXPECT_WITHIN(s.sum, t.sum, testutil::kF64SumRel * (1 + std::abs(s.sum)))
            << k.table << "/" << k.metric;
    }
    EXPECT_EQ(r1.diagrams.size(), r2.diagrams.size());
    EXPECT_EQ(r1.verdict, r2.verdict);
}

// Layers analysed on several threads give exactly the single-thread results.
TEST(RefFrameCompat, ThreadsDoNotChangeResults) {
    const auto in = random_causal(5, 2, 10, 4);
    RefFrameOptions o1, o3;
    o3.threads = 3;
    RefFrameAccumulator one(o1), three(o3);
    one.add(in);
    three.add(in);
    const auto r1 = one.finish(), r3 = three.finish();
    ASSERT_EQ(r1.stats.size(), r3.stats.size());
    for (const auto& [k, s] : r1.stats) {
        EXPECT_EQ(s.sum, r3.stats.at(k).sum) << k.table << "/" << k.metric;
        EXPECT_EQ(s.n, r3.stats.at(k).n);
    }
    ASSERT_EQ(r1.diagrams.size(), r3.diagrams.size());
    for (size_t d = 0; d < r1.diagrams.size(); ++d) {
        EXPECT_EQ(r1.diagrams[d].layer, r3.diagrams[d].layer);
        EXPECT_EQ(r1.diagrams[d].bars.size(), r3.diagrams[d].bars.size());
    }
}

// Bad option values are usage errors naming the option.
TEST(RefFrameCompat, OptionValidation) {
    RefFrameOptions o;
    o.analyses = "graphs,bogus";
    EXPECT_THROW(resolve_ref_frame_options(o), UsageError);
    o = {};
    o.compat = "ruscio2024";
    EXPECT_THROW(resolve_ref_frame_options(o), UsageError);
    o = {};
    o.symmetrize = "min";
    EXPECT_THROW(resolve_ref_frame_options(o), UsageError);
    o = {};
    o.threads = 0;
    EXPECT_THROW(resolve_ref_frame_options(o), UsageError);
    EXPECT_NO_THROW(resolve_ref_frame_options(RefFrameOptions{}));
}

// Non-probabilities and inconsistent shapes are input errors, and nothing is accumulated.
TEST(RefFrameCompat, BadInputIsRejected) {
    auto in = random_causal(1, 1, 4, 3);
    in.pattern[in.offset(0, 0, 2) + 1] = NAN;
    RefFrameAccumulator acc;
    try {
        acc.add(in, nullptr, "dump.npy");
        ADD_FAILURE() << "NaN accepted";
    } catch (const InputError& e) {
        EXPECT_EQ(e.file(), "dump.npy");
    }
    EXPECT_EQ(acc.n_inputs(), 0);
    auto short_in = random_causal(1, 1, 4, 3);
    short_in.pattern.pop_back();
    EXPECT_THROW(acc.add(short_in), InputError);
}

// Every table row records the mode that produced it; diagrams are [k, 3] arrays.
TEST(RefFrameCompat, OutputsRecordTheMode) {
    testutil::ScratchDir dir;
    RefFrameOptions o;
    o.compat = "ruscio2025";
    RefFrameAccumulator acc(o);
    acc.add(random_causal(4, 2, 8, 11));
    const auto r = acc.finish();
    analysis::write_output(analysis::ref_frame_output(r), RunFiles(dir.path()));
    for (const char* name : {"graphs", "topology", "betti", "kl", "spectra", "entropy", "tokens"}) {
        const auto t = io::Table::read_csv(dir / (std::string(name) + ".csv"));
        ASSERT_FALSE(t.empty()) << name;
        const auto& cols = t.columns();
        const auto c = std::find(cols.begin(), cols.end(), "convention") - cols.begin();
        for (const auto& row : t.rows())
            EXPECT_EQ(std::get<std::string>(row[static_cast<size_t>(c)]), "ruscio2025") << name;
    }
    EXPECT_TRUE(std::filesystem::exists(dir / "frame.json"));
    const auto d = io::read_npy(dir / "diagrams" / "input0_layer0_avg.npy");
    ASSERT_EQ(d.shape.size(), 2u);
    EXPECT_EQ(d.shape[1], 3);
    EXPECT_EQ(d.shape[0], 8);  // compat causal: one H0 point per token, no H1
    EXPECT_EQ(analysis::ref_frame_output(r).record["ref_frame"]["mode"], "ruscio2025");
    EXPECT_NE(analysis::ref_frame_output(r).summary.find("warning"), std::string::npos);
}

// Principled outputs with per_head: head rows in every per-head table, one diagram per
// (layer, head) plus the average, one graphs.csv row per value, and the mode in conventions.
TEST(RefFrameCompat, PrincipledPerHeadOutputs) {
    testutil::ScratchDir dir;
    RefFrameOptions o;
    o.per_head = true;
    RefFrameAccumulator acc(o);
    acc.add(random_causal(2, 2, 6, 21));
    const auto r = acc.finish();
    analysis::write_output(analysis::ref_frame_output(r), RunFiles(dir.path()));
    for (const char* f :
         {"input0_layer0_avg.npy", "input0_layer1_head0.npy", "input0_layer1_head1.npy"})
        EXPECT_TRUE(std::filesystem::exists(dir / "diagrams" / f)) << f;
    EXPECT_EQ(r.stats.count(RefFrameKey{"graphs", 1, 1, "lambda2", "0.01"}), 1u);
    EXPECT_EQ(r.stats.count(RefFrameKey{"spectra", 0, 1, "mp_ks", ""}), 1u);
    EXPECT_EQ(r.stats.count(RefFrameKey{"betti", 0, 0, "betti1", "0.5"}), 1u);
    EXPECT_EQ(analysis::ref_frame_output(r).record["ref_frame"]["mode"], "principled");
    const auto t = io::Table::read_csv(dir / "graphs.csv");
    // one row per (layer, head or average, threshold, metric): 2 x 3 x 7 x 12 (9 structure and
    // spectral metrics, path length, reachable pairs and clustering), plus per-layer
    // effectiveness of the average (2 x 7), the effectiveness score per threshold (7), r and p
    // of the correlation map per structure metric and threshold (4 x 7 x 2), and its sign flips
    size_t flips = 0;
    const auto& cols = t.columns();
    const size_t metric = size_t(std::find(cols.begin(), cols.end(), "metric") - cols.begin());
    for (const auto& row : t.rows())
        flips += std::get<std::string>(row.at(metric)).rfind("sign_flip_lambda2_", 0) == 0;
    EXPECT_EQ(t.size(), 2u * 3 * 7 * 12 + 2 * 7 + 7 + 4 * 7 * 2 + flips);
    EXPECT_TRUE(std::filesystem::exists(dir / "frame.json"));
}

namespace {
// Causal rows softmax(scale * normal + boost on key 0 and on the diagonal), [L, H, T, T].
AttentionInput causal_rows(int64_t n_layers, int64_t n_heads, int64_t n, double scale, double boost,
                           uint64_t seed) {
    return testutil::causal_sink_attention(
        n_layers, n_heads, n, {.scale = scale, .sink_boost = boost, .diag_boost = boost}, seed);
}
// Compat (10.r) decision for one input, computed here: the notebook's head average (raw
// values, summed over heads in order, then divided by H) has density sum 1[avg > tau] / n^2.
bool notebook_skips(const AttentionInput& in, int64_t l, double tau) {
    const int64_t n = in.length;
    int64_t edges = 0;
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double avg = 0;
            for (int64_t h = 0; h < in.n_heads; ++h) avg += j <= i ? in.row(l, h, i)[j] : 0.0;
            edges += avg / static_cast<double>(in.n_heads) > tau;
        }
    const double density = static_cast<double>(edges) / static_cast<double>(n * n);
    return !(density >= 0.05 && density <= 0.95) && l % 4 != 0;
}
}  // namespace

// 10.r (B.4): compat computes the graph metrics of a (layer, threshold) cell only for the inputs
// whose threshold is effective there or whose layer is a multiple of 4; the others contribute
// the density alone, the mean is over the inputs that have the metric (NaN when none), and
// graphs.csv counts the skipped inputs in n_skipped. Principled mode computes every cell.
TEST(RefFrameCompat, GraphCellsTheNotebookSkips) {
    // A: near-uniform rows (few entries above the large thresholds); B: mass on key 0 and the
    // diagonal (two entries per row above them).
    const auto a = causal_rows(5, 2, 25, 0.3, 0.0, 41), b = causal_rows(5, 2, 25, 0.3, 3.0, 42);
    RefFrameOptions o;
    o.analyses = "graphs";
    o.compat = "ruscio2025";
    RefFrameAccumulator both(o), only_a(o), only_b(o);
    both.add(a);
    both.add(b);
    only_a.add(a);
    only_b.add(b);
    const auto r = both.finish(), ra = only_a.finish(), rb = only_b.finish();
    testutil::ScratchDir dir;
    analysis::write_output(analysis::ref_frame_output(r), RunFiles(dir.path()));
    const auto table = io::Table::read_csv(dir / "graphs.csv");
    const auto& cols = table.columns();
    const auto column = [&](const std::string& name) {
        const auto it = std::find(cols.begin(), cols.end(), name);
        EXPECT_NE(it, cols.end()) << name;
        return static_cast<size_t>(it - cols.begin());
    };
    std::map<std::tuple<int64_t, std::string, std::string>, double> skipped_column;
    for (const auto& row : table.rows())
        if (std::get<double>(row[column("head")]) == -1 &&
            std::get<double>(row[column("layer")]) >= 0)
            skipped_column[{static_cast<int64_t>(std::get<double>(row[column("layer")])),
                            std::get<std::string>(row[column("metric")]),
                            io::format_number(std::get<double>(row[column("param")]))}] =
                std::get<double>(row[column("n_skipped")]);

    int n_none = 0, n_one = 0;
    for (int64_t l = 0; l < 5; ++l)
        for (double tau : k_graph_thresholds) {
            const std::string p = io::format_number(tau);
            const bool skip_a = notebook_skips(a, l, tau), skip_b = notebook_skips(b, l, tau);
            const int64_t have = !skip_a + !skip_b;
            n_one += have == 1;
            const auto density = r.stats.at(RefFrameKey{"graphs", l, -1, "density", p});
            EXPECT_EQ(density.n, 2);
            EXPECT_EQ(skipped_column.at({l, "density", p}), 0.0);
            for (const char* metric : {"lambda2", "laplacian_gap", "star_basic", "star_combined",
                                       "gini", "centralization", "degree_variance", "n_nodes"}) {
                const RefFrameKey key{"graphs", l, -1, metric, p};
                const auto& s = r.stats.at(key);
                EXPECT_EQ(s.n, have) << "layer " << l << " tau " << p << " " << metric;
                EXPECT_EQ(skipped_column.at({l, metric, p}), static_cast<double>(2 - have));
                if (have == 0) {
                    EXPECT_TRUE(std::isnan(s.mean())) << metric;
                }
                // the mean over the one input that has it is that input's value
                if (have == 1) {
                    EXPECT_EQ(s.mean(), (skip_a ? rb : ra).stats.at(key).mean()) << metric;
                }
                // A alone: a cell it skips has no value at all (NaN)
                const auto& sa = ra.stats.at(key);
                EXPECT_EQ(sa.n, skip_a ? 0 : 1) << metric;
                if (skip_a) {
                    EXPECT_TRUE(std::isnan(sa.mean())) << metric;
                }
            }
            n_none += skip_a;
        }
    EXPECT_GT(n_none, 0) << "no cell skipped: the test would not test";
    EXPECT_GT(n_one, 0) << "no cell skipped by one input only: the test would not test";

    // Principled: every cell of every input, and no n_skipped column.
    RefFrameOptions principled;
    principled.analyses = "graphs";
    RefFrameAccumulator all(principled);
    all.add(a);
    all.add(b);
    const auto rp = all.finish();
    for (int64_t l = 0; l < 5; ++l)
        for (double tau : k_graph_thresholds)
            EXPECT_EQ(
                rp.stats.at(RefFrameKey{"graphs", l, -1, "lambda2", io::format_number(tau)}).n, 2);
    testutil::ScratchDir pdir;
    analysis::write_output(analysis::ref_frame_output(rp), RunFiles(pdir.path()));
    const auto pcols = io::Table::read_csv(pdir / "graphs.csv").columns();
    EXPECT_EQ(std::find(pcols.begin(), pcols.end(), "n_skipped"), pcols.end());
}

// The std over inputs of values that agree to 1e-12 relative: x_k = 2^26 + k 2^-10 are exact
// doubles, so the population std is exactly 2^-10 sqrt((n^2 - 1) / 12) (k = 0..n-1). The one-pass
// sum_sq / n - mean^2 loses ~eps 2^52 = 1 in the variance (~1e-6 here) and fails; the
// squared-deviation update is off by a few eps of the std. Merging two halves gives the same.
TEST(RefFrameStat, StdOfCloseValuesIsAccurateAndMerges) {
    const int n = 1000;
    RefFrameStat all, a, b;
    for (int k = 0; k < n; ++k) {
        const double x = std::ldexp(1.0, 26) + k * std::ldexp(1.0, -10);
        all.add(x);
        (k < 377 ? a : b).add(x);
    }
    a.merge(b);
    const double want = std::ldexp(1.0, -10) * std::sqrt((double(n) * n - 1) / 12.0);
    // Bound: Welford's relative error in the variance is at most ~n eps kappa with the condition
    // number kappa = |mean| / std = 2^26 / 0.289 = 2.3e8, so n eps kappa = 1000 * 1.1e-16 *
    // 2.3e8 = 2.6e-5, half that for the std. The one-pass formula's is eps kappa^2 ~ 6 (600%).
    const double tol = 0.5 * n * 0x1p-53 * (std::ldexp(1.0, 26) / want) * want;
    EXPECT_NEAR(all.std(), want, tol);
    EXPECT_NEAR(a.std(), want, tol);
    EXPECT_EQ(all.mean(), a.mean());
    EXPECT_EQ(all.n, n);
    EXPECT_EQ(a.n, n);
}

// Per-head entropy (10.m; compat B.7) and top key (10.m, 10.n) are computed from each head's
// rows as they stream past, without the head's matrix: the same values as the definitions on
// the matrix built here (closed visible rows; compat raw), causal and bidirectional.
TEST(RefFrameCompat, PerHeadEntropyAndTopKeyMatchTheirDefinitions) {
    for (const Masking masking : {Masking::Causal, Masking::Bidirectional})
        for (const std::string compat : {"", "ruscio2025"}) {
            const AttentionInput in = testutil::random_input(5, 2, 3, 37, masking, true);
            RefFrameOptions o;
            o.analyses = "entropy,tokens";
            o.compat = compat;
            RefFrameAccumulator acc(o);
            std::vector<std::pair<RefFrameKey, double>> values;
            acc.add(in, nullptr, "attention", nullptr, &values);
            const RefFrameResults r = acc.finish();
            const int64_t n = in.length;
            for (int64_t l = 0; l < in.n_layers; ++l)
                for (int64_t h = 0; h < in.n_heads; ++h) {
                    Eigen::MatrixXd m = Eigen::MatrixXd::Zero(n, n);
                    double bits = 0;
                    for (int64_t i = 0; i < n; ++i) {
                        double s = 0;
                        for (int64_t j = in.key_begin(i); j < in.key_end(i); ++j)
                            s += in.row(l, h, i)[j];
                        for (int64_t j = in.key_begin(i); j < in.key_end(i); ++j)
                            m(i, j) = in.row(l, h, i)[j] * (compat.empty() ? 1.0 / s : 1.0);
                        for (int64_t j = 0; j < n; ++j)
                            bits -= m(i, j) * std::log2(m(i, j) + 1e-10);
                    }
                    const std::string metric =
                        compat.empty() ? "entropy_all_rows" : "matrix_entropy_bits";
                    double got = NAN;
                    for (const auto& [k, v] : values)
                        if (k.table == "entropy" && k.layer == l && k.head == h &&
                            k.metric == metric)
                            got = v;
                    EXPECT_EQ(got, compat.empty() ? mean_row_entropy(m, false) : bits)
                        << compat << " layer " << l << " head " << h;
                    if (!compat.empty() && l == 0) continue;  // compat tokens: B.10 layers
                    Eigen::Index top = 0;
                    m.colwise().mean().maxCoeff(&top);
                    const auto it = r.top_keys.find({l, h});
                    ASSERT_NE(it, r.top_keys.end()) << compat << " layer " << l << " head " << h;
                    ASSERT_EQ(it->second.size(), 1u);
                    EXPECT_EQ(it->second.begin()->first, "#" + std::to_string(top))
                        << compat << " layer " << l << " head " << h;
                }
        }
}
