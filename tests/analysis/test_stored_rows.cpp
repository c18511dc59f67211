// Attention read where it is stored (metrics/stored_rows.hpp): fp32 and fp64 rows widened
// exactly, rows valid for stable_rows() requests, and every analysis computing from them the
// numbers it computes from an fp64 copy of the same values, bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "sinkscope/analysis/pipeline.hpp"
#include "sinkscope/metrics/stored_rows.hpp"
#include "synthetic_attention.hpp"

using namespace sinkscope;
using namespace sinkscope::analysis;
using sinkscope::metrics::AttentionInput;
using sinkscope::metrics::Masking;
using sinkscope::metrics::StoredRows;

namespace {

// Per-layer pointers into [L, H, T, T] C-order values.
template <class T>
std::vector<const void*> layers(const std::vector<T>& v, int64_t n_layers) {
    std::vector<const void*> out;
    const size_t per_layer = v.size() / size_t(n_layers);
    for (int64_t l = 0; l < n_layers; ++l) out.push_back(v.data() + size_t(l) * per_layer);
    return out;
}

// `x` with its pattern and scores rounded to fp32, as an fp64 copy (stored) and as StoredRows
// over the fp32 values (the vectors behind it are held by the source).
struct Twins {
    AttentionInput copy, held;
};
Twins twins(const AttentionInput& x) {
    auto pattern = std::make_shared<std::vector<float>>(x.pattern.begin(), x.pattern.end());
    auto scores = std::make_shared<std::vector<float>>(x.scores.begin(), x.scores.end());
    Twins t;
    t.copy = x;
    t.copy.pattern.assign(pattern->begin(), pattern->end());
    t.copy.scores.assign(scores->begin(), scores->end());
    t.held = x;
    t.held.pattern.clear();
    t.held.scores.clear();
    auto owner = std::make_shared<std::pair<decltype(pattern), decltype(scores)>>(pattern, scores);
    t.held.source_owner = std::make_shared<const StoredRows>(
        StoredRows::Precision::F32, x.n_layers, x.n_heads, x.n_tokens, layers(*pattern, x.n_layers),
        scores->empty() ? std::vector<const void*>{} : layers(*scores, x.n_layers), owner);
    t.held.source = t.held.source_owner.get();
    return t;
}

}  // namespace

// Every row (pattern, scores, blocks of rows) is the stored values widened, fp32 and fp64 alike,
// including zeros, subnormals, -inf scores and values outside the visible keys.
TEST(StoredRows, WidensExactly) {
    const int64_t L = 2, H = 3, T = 5, n = L * H * T * T;
    std::vector<float> p32(static_cast<size_t>(n)), z32(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
        p32[size_t(k)] = float(k % 7) / 7.0f + 1e-3f * float(k);
        z32[size_t(k)] = float(k) * -0.37f;
    }
    p32[3] = std::numeric_limits<float>::denorm_min();
    p32[4] = 0.0f;
    z32[5] = -std::numeric_limits<float>::infinity();
    const std::vector<double> p64(p32.begin(), p32.end()), z64(z32.begin(), z32.end());
    const StoredRows f32(StoredRows::Precision::F32, L, H, T, layers(p32, L), layers(z32, L),
                         nullptr);
    const StoredRows f64(StoredRows::Precision::F64, L, H, T, layers(p64, L), layers(z64, L),
                         nullptr);
    for (const StoredRows* s : {&f32, &f64}) {
        EXPECT_TRUE(s->has_scores());
        EXPECT_TRUE(s->holds_all_rows());
        std::vector<double> block(size_t(3 * T));
        for (int64_t l = 0; l < L; ++l)
            for (int64_t h = 0; h < H; ++h) {
                s->copy_rows(l, h, 1, 4, block.data());
                for (int64_t i = 0; i < T; ++i) {
                    const int64_t at = ((l * H + h) * T + i) * T;
                    const double* p = s->row(l, h, i);
                    const double* z = s->score_row(l, h, i);
                    for (int64_t j = 0; j < T; ++j) {
                        EXPECT_EQ(std::memcmp(&p[j], &p64[size_t(at + j)], 8), 0) << l << h << i;
                        EXPECT_EQ(std::memcmp(&z[j], &z64[size_t(at + j)], 8), 0) << l << h << i;
                        if (i >= 1 && i < 4) {
                            EXPECT_EQ(block[size_t((i - 1) * T + j)], p64[size_t(at + j)]);
                        }
                    }
                }
            }
    }
    const StoredRows no_scores(StoredRows::Precision::F32, L, H, T, layers(p32, L), {}, nullptr);
    EXPECT_FALSE(no_scores.has_scores());
}

// A row stays as handed out while stable_rows() - 1 other rows are requested (the contract of
// RowSource::row, attention.hpp), for pattern and scores independently.
TEST(StoredRows, RowsStayValidForStableRows) {
    const int64_t L = 2, H = 2, T = 3, n = L * H * T * T;
    std::vector<float> p(static_cast<size_t>(n)), z(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) p[size_t(k)] = float(k), z[size_t(k)] = -float(k);
    const StoredRows s(StoredRows::Precision::F32, L, H, T, layers(p, L), layers(z, L), nullptr);
    ASSERT_GE(s.stable_rows(), 2 * L * H);
    const double* first = s.row(1, 1, 2);
    const double* first_z = s.score_row(0, 1, 1);
    for (int64_t k = 1; k < s.stable_rows(); ++k) {
        s.row(k % L, (k / L) % H, k % T);
        s.score_row((k + 1) % L, k % H, (k / 2) % T);
    }
    for (int64_t j = 0; j < T; ++j) {
        EXPECT_EQ(first[j], double(((1 * H + 1) * T + 2) * T + j));
        EXPECT_EQ(first_z[j], -double(((0 * H + 1) * T + 1) * T + j));
    }
}

// Every analysis of the pipeline (sections 1-4, 7, 8) gives the same tables, arrays, run record
// and summary from StoredRows as from the fp64 copy of the same values: causal inputs with
// scores, bidirectional ones without (probabilities only), two inputs each.
TEST(StoredRows, EveryAnalysisComputesTheSameNumbersAsFromACopy) {
    struct Case {
        Masking masking;
        bool scores;
    };
    for (const Case c : {Case{Masking::Causal, true}, Case{Masking::Bidirectional, false}}) {
        const int64_t L = 3, H = 4, T = 24;
        const AnalysisOptions o;  // every analysis that needs no hidden states
        AnalysisPipeline from_copy(L, H, resolve(o, {}), "synthetic", "synthetic");
        AnalysisPipeline from_held(L, H, resolve(o, {}), "synthetic", "synthetic");
        for (uint64_t seed : {11u, 12u}) {
            Twins t = twins(testutil::random_input(seed, L, H, T, c.masking, c.scores));
            ASSERT_TRUE(t.copy.stored());
            ASSERT_FALSE(t.held.stored());
            from_copy.add(t.copy);
            from_held.add(t.held);
        }
        const PipelineResults a = from_copy.finish(), b = from_held.finish();
        ASSERT_EQ(a.outputs.size(), b.outputs.size());
        EXPECT_GE(a.outputs.size(), 8u);
        for (size_t k = 0; k < a.outputs.size(); ++k) {
            const auto& [name, x] = a.outputs[k];
            const auto& y = b.outputs[k].second;
            ASSERT_EQ(name, b.outputs[k].first);
            ASSERT_EQ(x.tables.size(), y.tables.size()) << name;
            for (size_t t = 0; t < x.tables.size(); ++t)
                EXPECT_EQ(x.tables[t].table.to_csv(), y.tables[t].table.to_csv())
                    << name << " " << x.tables[t].name;
            ASSERT_EQ(x.arrays.size(), y.arrays.size()) << name;
            for (size_t t = 0; t < x.arrays.size(); ++t)
                EXPECT_EQ(x.arrays[t].second.data, y.arrays[t].second.data)
                    << name << " " << x.arrays[t].first;
            EXPECT_EQ(x.record, y.record) << name;
            EXPECT_EQ(x.summary, y.summary) << name;
        }
    }
}
