// Regime predictor (spec 7, 10.g) and the head-analysis driver around it: thresholds, pooled
// flip-rate validation, scopes, tables and the summary.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <random>

#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/table.hpp"
#include "sinkscope/metrics/head_analyses.hpp"
#include "sinkscope/metrics/regime.hpp"
#include "synthetic_attention.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::metrics;

namespace {

// 12 heads (3 layers x 4 heads). Every matrix is the same random distance matrix B except
// js_drop = 10 - B off the diagonal, which reverses every JS verdict: the cosine and Euclidean
// flip rates are 0, the JS flip rate is 1, so the pooled flip rate is exactly 1/3.
struct Fixture {
    std::map<std::string, Eigen::MatrixXd> matrices;
    std::vector<std::pair<int, int>> labels;
};
Fixture make_fixture() {
    Fixture f;
    std::mt19937_64 rng(2);
    const int n = 12;
    const Eigen::MatrixXd b = testutil::random_distance_matrix(n, rng, 1.0, 2.0);  // [head, head]
    for (const std::string& name : clustered_matrix_names()) f.matrices[name] = b;
    Eigen::MatrixXd reversed = (10.0 - b.array()).matrix();
    reversed.diagonal().setZero();
    f.matrices[head_matrix::kJsDrop] = reversed;
    for (int i = 0; i < n; ++i) f.labels.emplace_back(i / 4, i % 4);
    return f;
}

const RegimeRow& regime_row(const HeadAnalysisResults& r, const std::string& scope, int layer) {
    for (const RegimeRow& row : r.regime)
        if (row.scope == scope && row.layer == layer) return row;
    throw std::runtime_error("no regime row");
}

}  // namespace

// Spec 7: unsafe iff rho >= hi, safe iff rho <= lo (boundaries included), abstain between.
TEST(Regime, Thresholds) {
    EXPECT_EQ(predict_regime(0.0), Regime::ClassicalSafe);
    EXPECT_EQ(predict_regime(0.2), Regime::ClassicalSafe);
    EXPECT_EQ(predict_regime(0.2000001), Regime::Abstain);
    EXPECT_EQ(predict_regime(0.4999999), Regime::Abstain);
    EXPECT_EQ(predict_regime(0.5), Regime::ClassicalUnsafe);
    EXPECT_EQ(predict_regime(1.0), Regime::ClassicalUnsafe);
    EXPECT_EQ(predict_regime(0.3, 0.35, 0.6), Regime::ClassicalSafe);
    EXPECT_EQ(predict_regime(0.3, 0.1, 0.25), Regime::ClassicalUnsafe);
    EXPECT_EQ(predict_regime(std::numeric_limits<double>::quiet_NaN()), Regime::Abstain);
    EXPECT_EQ(regime_name(Regime::ClassicalUnsafe), "classical-unsafe");
    EXPECT_EQ(regime_name(Regime::ClassicalSafe), "classical-safe");
    EXPECT_EQ(regime_name(Regime::Abstain), "abstain");
}

// Thresholds outside 0 <= lo <= hi <= 1 are a usage error, never silently adjusted.
TEST(Regime, RejectsBadThresholds) {
    EXPECT_THROW(predict_regime(0.3, 0.6, 0.4), UsageError);
    EXPECT_THROW(predict_regime(0.3, -0.1, 0.4), UsageError);
    EXPECT_THROW(predict_regime(0.3, 0.1, 1.5), UsageError);
    HeadAnalysisOptions opts;
    opts.regime_lo = 0.7;
    const Fixture f = make_fixture();
    EXPECT_THROW(run_head_analyses(f.matrices, f.labels, {}, 0.3, opts), UsageError);
}

// Spec 7: measured unsafe iff the flip rate is >= 0.15; agreement compares the two.
TEST(Regime, MeasuredRegimeAndAgreement) {
    EXPECT_EQ(measured_regime(0.15), Regime::ClassicalUnsafe);
    EXPECT_EQ(measured_regime(0.1499999), Regime::ClassicalSafe);
    EXPECT_EQ(regime_agreement(Regime::ClassicalUnsafe, 0.2), "correct");
    EXPECT_EQ(regime_agreement(Regime::ClassicalSafe, 0.2), "wrong");
    EXPECT_EQ(regime_agreement(Regime::Abstain, 0.2), "abstained");
    EXPECT_EQ(regime_agreement(Regime::ClassicalSafe, std::numeric_limits<double>::quiet_NaN()),
              "unmeasured");
}

// Spec 10.g: validation uses the flip counts pooled over cosine, JS and Euclidean (here 1/3),
// at model scope for the model rho and within each layer for the layer rho.
TEST(Regime, ValidatesAgainstPooledFlipRate) {
    const Fixture f = make_fixture();
    const auto res = run_head_analyses(f.matrices, f.labels, {0.1, 0.3, 0.9}, 0.6, {});
    const RegimeRow& model = regime_row(res, "model", -1);
    EXPECT_EQ(model.flip.n_compared, 3 * count_triples(12));
    EXPECT_EQ(model.flip.n_disagree, count_triples(12));
    EXPECT_DOUBLE_EQ(model.flip_rate, 1.0 / 3.0);
    EXPECT_EQ(model.predicted, Regime::ClassicalUnsafe);
    EXPECT_EQ(model.measured, Regime::ClassicalUnsafe);
    EXPECT_EQ(model.agreement, "correct");
    for (int layer = 0; layer < 3; ++layer) {
        const RegimeRow& row = regime_row(res, "layer", layer);
        EXPECT_EQ(row.flip.n_compared, 3 * count_triples(4));
        EXPECT_DOUBLE_EQ(row.flip_rate, 1.0 / 3.0);
    }
    EXPECT_EQ(regime_row(res, "layer", 0).agreement, "wrong");
    EXPECT_EQ(regime_row(res, "layer", 1).agreement, "abstained");
    EXPECT_EQ(regime_row(res, "layer", 2).agreement, "correct");
}

// Reversal table of the driver: the JS flip is 1, the other flips 0, and with --scope layer the
// pooled row is the sum of the per-layer counts; sampled runs carry a Wilson interval.
TEST(HeadAnalyses, ReversalRowsPerScope) {
    const Fixture f = make_fixture();
    const auto model = run_head_analyses(f.matrices, f.labels, {}, 0.3, {});
    ASSERT_EQ(model.reversal.size(), 8u);  // 3 flip, 3 vs_content, dA vs dA_perp, check
    for (const ReversalRow& r : model.reversal) {
        EXPECT_EQ(r.method, "exact");
        EXPECT_EQ(r.counts.n_triples, count_triples(12));
        const bool js = r.metric == "js";  // js_keep = B is also compared with dA_perp = B
        EXPECT_EQ(r.rate, r.comparison == "flip" && js ? 1.0 : 0.0) << r.comparison << r.metric;
    }
    HeadAnalysisOptions opts;
    opts.scope = parse_reversal_scope("layer");
    const auto layer = run_head_analyses(f.matrices, f.labels, {}, 0.3, opts);
    ASSERT_EQ(layer.reversal.size(), 8u * 4u);  // 3 layers + pooled
    ReversalCounts sum;
    for (const ReversalRow& r : layer.reversal)
        if (r.comparison == "flip" && r.metric == "js" && r.layer >= 0) sum += r.counts;
    for (const ReversalRow& r : layer.reversal)
        if (r.comparison == "flip" && r.metric == "js" && r.layer == -1) {
            EXPECT_EQ(r.counts.n_triples, 3 * count_triples(4));
            EXPECT_EQ(r.counts.n_compared, sum.n_compared);
            EXPECT_EQ(r.counts.n_disagree, sum.n_disagree);
        }
    opts.triples = 500;  // of the model's 660 triples: a sample
    opts.seed = 9;
    opts.scope = parse_reversal_scope("model");
    const auto sampled = run_head_analyses(f.matrices, f.labels, {}, 0.3, opts);
    for (const ReversalRow& r : sampled.reversal) {
        EXPECT_EQ(r.method, "sampled");
        EXPECT_EQ(r.counts.n_examined, 500);
        EXPECT_LE(r.ci_lo, r.rate);
        EXPECT_GE(r.ci_hi, r.rate);
    }
    // A sample at least as large as the population is the exact count (sampling without
    // replacement would draw each triple once): 660 triples of 12 heads, 12 of each layer's 4.
    opts.triples = 660;
    const auto whole = run_head_analyses(f.matrices, f.labels, {}, 0.3, opts);
    ASSERT_EQ(whole.reversal.size(), model.reversal.size());
    for (size_t i = 0; i < whole.reversal.size(); ++i) {
        EXPECT_EQ(whole.reversal[i].method, "exact");
        EXPECT_EQ(whole.reversal[i].counts.n_disagree, model.reversal[i].counts.n_disagree);
        EXPECT_EQ(whole.reversal[i].ci_lo, whole.reversal[i].rate);
    }
    opts.triples = 500;
    opts.scope = parse_reversal_scope("layer");
    const auto per_layer = run_head_analyses(f.matrices, f.labels, {}, 0.3, opts);
    ASSERT_EQ(per_layer.reversal.size(), layer.reversal.size());
    for (size_t i = 0; i < per_layer.reversal.size(); ++i) {
        EXPECT_EQ(per_layer.reversal[i].method, "exact");
        EXPECT_EQ(per_layer.reversal[i].counts.n_examined, layer.reversal[i].counts.n_triples);
        EXPECT_EQ(per_layer.reversal[i].counts.n_disagree, layer.reversal[i].counts.n_disagree);
    }
    EXPECT_THROW(parse_reversal_scope("heads"), UsageError);
}

// Options that cannot fit the data are usage errors.
TEST(HeadAnalyses, RejectsBadOptions) {
    const Fixture f = make_fixture();
    HeadAnalysisOptions opts;
    opts.k = 13;
    EXPECT_THROW(run_head_analyses(f.matrices, f.labels, {}, 0.3, opts), UsageError);
    opts.k = 0;
    opts.triples = -1;
    EXPECT_THROW(run_head_analyses(f.matrices, f.labels, {}, 0.3, opts), UsageError);
}

// Matrices that do not match the head labels, or hold NaN, are refused before any work.
TEST(HeadAnalyses, RejectsMalformedMatrices) {
    Fixture f = make_fixture();
    f.matrices[head_matrix::kDA](3, 5) = std::numeric_limits<double>::quiet_NaN();
    EXPECT_THROW(run_head_analyses(f.matrices, f.labels, {}, 0.3, {}), InternalError);
    f = make_fixture();
    f.labels.pop_back();
    EXPECT_THROW(run_head_analyses(f.matrices, f.labels, {}, 0.3, {}), InternalError);
}

// The writer produces every table and one [head, 2] .npy per clustered matrix; the summary names
// the flip rates, the headline ARI pairs, rho and the prediction.
TEST(HeadAnalyses, WritesTablesAndSummary) {
    const Fixture f = make_fixture();
    HeadAnalysisOptions opts;
    opts.k = 3;
    const auto res = run_head_analyses(f.matrices, f.labels, {0.1, 0.3, 0.9}, 0.6, opts);
    testutil::ScratchDir tmp;
    analysis::write_output(analysis::head_analyses_output(res), RunFiles(tmp.path()));
    for (const char* stem : {"reversal", "silhouette", "clusters", "ari", "regime"}) {
        EXPECT_TRUE(std::filesystem::exists(tmp / (std::string(stem) + ".csv"))) << stem;
        EXPECT_TRUE(std::filesystem::exists(tmp / (std::string(stem) + ".jsonl"))) << stem;
    }
    const io::Table rev = io::Table::read_csv(tmp / "reversal.csv");
    EXPECT_EQ(rev.size(), 8u);
    EXPECT_EQ(io::Table::read_csv(tmp / "regime.csv").size(), 4u);
    EXPECT_EQ(io::Table::read_csv(tmp / "clusters.csv").size(), 8u * 12u);
    EXPECT_EQ(io::Table::read_csv(tmp / "ari.csv").size(), 28u);
    for (const std::string& name : clustered_matrix_names()) {
        const io::NpyArray a = io::read_npy(tmp / "mds" / (name + ".npy"));
        EXPECT_EQ(a.shape, (std::vector<int64_t>{12, 2})) << name;
    }
    const std::string s = analysis::head_analyses_output(res).summary;
    EXPECT_NE(s.find("flip rate keep vs drop: cosine 0 js 1 euclidean 0"), std::string::npos) << s;
    EXPECT_NE(s.find("ARI js_keep vs js_drop"), std::string::npos) << s;
    EXPECT_NE(s.find("ARI dA vs dA_perp: 1"), std::string::npos) << s;
    EXPECT_NE(s.find("rho 0.6 -> predicted classical-unsafe"), std::string::npos) << s;
    EXPECT_NE(s.find("(correct)"), std::string::npos) << s;
}

// The fixture as layer scope leaves it: pairs of heads in different layers (4 heads a layer)
// are NaN.
namespace {
Fixture layer_scope_fixture() {
    Fixture f = make_fixture();
    for (auto& [name, d] : f.matrices)
        for (int a = 0; a < 12; ++a)
            for (int b = 0; b < 12; ++b)
                if (a / 4 != b / 4) d(a, b) = std::numeric_limits<double>::quiet_NaN();
    return f;
}
}  // namespace

// Spec 2 "scope": with --scope layer the accumulator leaves cross-layer distances NaN; the
// driver reads only within-layer entries, validates each layer's rho against that layer's own
// flip rate (1/3 by the fixture's construction) and has no model row to validate.
TEST(HeadAnalyses, LayerScopeRunsPerLayerOnWithinLayerDistances) {
    Fixture f = layer_scope_fixture();
    HeadAnalysisOptions opts;
    opts.scope = ReversalScope::Layer;
    const auto res = run_head_analyses(f.matrices, f.labels, {0.1, 0.3, 0.9}, 0.6, opts);
    ASSERT_EQ(res.regime.size(), 3u);
    for (int layer = 0; layer < 3; ++layer) {
        const RegimeRow& row = regime_row(res, "layer", layer);
        EXPECT_EQ(row.flip.n_compared, 3 * count_triples(4));
        EXPECT_EQ(row.flip.n_disagree, count_triples(4));
    }
    for (const RegimeRow& row : res.regime) EXPECT_EQ(row.scope, "layer");
    EXPECT_EQ(res.ari.size(), 28u * 3u);  // the 8 clusterings of each layer, pairwise
}

// Scope layer: each layer is clustered alone (8 matrices x 3 layers, each over its 4 heads, k in
// 2..3); a NaN inside a layer is still refused, and --k above a layer's heads is a usage error.
TEST(HeadAnalyses, LayerScopeClustersEachLayerAlone) {
    Fixture f = layer_scope_fixture();
    HeadAnalysisOptions opts;
    opts.scope = ReversalScope::Layer;
    const auto res = run_head_analyses(f.matrices, f.labels, {0.1, 0.3, 0.9}, 0.6, opts);
    ASSERT_EQ(res.clusterings.size(), 8u * 3u);
    for (const Clustering& c : res.clusterings) {
        ASSERT_EQ(c.heads.size(), 4u);
        for (int head : c.heads) EXPECT_EQ(f.labels[size_t(head)].first, c.layer);
        EXPECT_GE(c.k, 2);
        EXPECT_LE(c.k, 3);  // 2..n-1 for 4 heads
    }
    // A NaN inside a layer is still refused.
    f.matrices[head_matrix::kDA](1, 2) = std::numeric_limits<double>::quiet_NaN();
    EXPECT_THROW(run_head_analyses(f.matrices, f.labels, {}, 0.3, opts), InternalError);
    // --k larger than a layer's heads is a usage error in layer scope.
    f = make_fixture();
    opts.k = 5;
    EXPECT_THROW(run_head_analyses(f.matrices, f.labels, {}, 0.3, opts), UsageError);
}

// Spec 10.d: in model scope a layer's regime row takes its flips from the per-layer-sink
// matrices when given (here: every verdict of layer 1 reversed in js_drop only there, so that
// layer's pooled flip rate is 1/3 while the model-sink matrices give 0 for it).
TEST(HeadAnalyses, LayerRegimeRowsUseTheLayerSinkMatrices) {
    Fixture f = make_fixture();
    f.matrices[head_matrix::kJsDrop] = f.matrices[head_matrix::kJsKeep];  // no flips at all
    std::map<std::string, Eigen::MatrixXd> layer = f.matrices;
    for (auto& [name, d] : layer)
        for (int a = 0; a < 12; ++a)
            for (int b = 0; b < 12; ++b)
                if (a / 4 != b / 4) d(a, b) = std::numeric_limits<double>::quiet_NaN();
    Eigen::MatrixXd& js_drop = layer[head_matrix::kJsDrop];
    for (int a = 4; a < 8; ++a)
        for (int b = 4; b < 8; ++b)
            if (a != b) js_drop(a, b) = 10.0 - js_drop(a, b);
    const auto res = run_head_analyses(f.matrices, f.labels, {0.1, 0.3, 0.9}, 0.6, {}, layer);
    EXPECT_EQ(regime_row(res, "model", -1).flip.n_disagree, 0);
    EXPECT_EQ(regime_row(res, "layer", 0).flip.n_disagree, 0);
    EXPECT_EQ(regime_row(res, "layer", 1).flip.n_disagree, count_triples(4));
    EXPECT_EQ(regime_row(res, "layer", 2).flip.n_disagree, 0);
}
