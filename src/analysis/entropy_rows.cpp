// The per-row entropy parts of spec/METRICS.md section 6 (H = H_b(s) + (1 - s) H(pi)), kept for
// every row, so that two runs on the same inputs (checkpoints of one training run) can be paired
// row by row and their entropy change split exactly into a sink and a content term afterwards
// (`sinkscope dynamics`). Not part of "all": a run asks for it (--analyses all,entropy_rows).
//
// Output: entropy_rows.npy, float64 [R, 8], one row per (input, layer, head, query) with at least
// min_parts visible keys and the layer's sink among them (the rows of heads.csv):
//   input, layer, head, query, sink_mass s, content_mass (1 - s summed from the content parts,
//   accurate near s = 1), content_entropy H(pi), entropy H(p) (nats, measured on the whole row).
// The entropies come from the closed row (10.a), or from the fp64 log-softmax of the scores
// (10.b); the zero policy never enters (10.c: zeros are harmless to entropies).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/metrics/row.hpp"

namespace sinkscope::analysis {

namespace {

namespace col = tables::entropy_row;
constexpr int64_t kColumns = col::kCount;

class EntropyRows final : public Analysis {
public:
    explicit EntropyRows(const AnalysisContext& c) : ctx_(c) {}

    void add(const InputView& in, PerInputValues*) override {
        const metrics::AttentionInput& a = *in.attention;
        const int64_t min_parts = ctx_.options->head.min_parts;
        // Entropies are read before any log-ratio, so zeros need no replacement; a replacement
        // this small leaves every other output of compose_row_probabilities unused anyway.
        const metrics::ZeroPolicy zeros{metrics::ZeroPolicy::Kind::Replace, 1e-300};
        std::vector<double> p(size_t(a.n_tokens)), pi(p.size()), clr(p.size()), clr_c(p.size()),
            scratch(p.size());
        for (int64_t l = 0; l < a.n_layers; ++l) {
            const int64_t sink = in.sinks->per_layer[size_t(l)];
            for (int64_t h = 0; h < a.n_heads; ++h)
                for (int64_t i = 0; i < a.length; ++i) {
                    const int64_t kb = a.key_begin(i), d = a.key_end(i) - kb;
                    if (d < min_parts || sink < kb || sink >= kb + d) continue;
                    metrics::RowOut o{p.data(), pi.data(), clr.data(), clr_c.data(), 0, 0, 0,
                                      0,        0,         0};
                    if (a.has_scores())
                        metrics::compose_row_scores(a.score_row(l, h, i) + kb, d, sink - kb, o);
                    else
                        metrics::compose_row_probabilities(a.row(l, h, i) + kb, d, sink - kb, zeros,
                                                           o, scratch.data());
                    double row[kColumns];
                    row[col::kInput] = double(in.index);
                    row[col::kLayer] = double(ctx_.layer_id(l));
                    row[col::kHead] = double(h);
                    row[col::kQuery] = double(i);
                    row[col::kSinkMass] = o.sink_mass;
                    row[col::kContentMass] = o.content_mass;
                    row[col::kContentEntropy] = o.content_entropy;
                    row[col::kEntropy] = o.entropy;
                    rows_.insert(rows_.end(), row, row + kColumns);
                }
        }
        ++n_inputs_;
    }
    void merge(const Analysis& other) override {
        // The other shard's inputs come after this one's: its input column moves up by the
        // number of inputs seen here (registry.hpp's merge contract).
        const auto& o = dynamic_cast<const EntropyRows&>(other);
        const size_t start = rows_.size();
        rows_.insert(rows_.end(), o.rows_.begin(), o.rows_.end());
        for (size_t k = start + col::kInput; k < rows_.size(); k += kColumns)
            rows_[k] += double(n_inputs_);
        n_inputs_ += o.n_inputs_;
    }
    void save(BinaryWriter& w) const override {
        w.tag("entropy_rows");
        w.put_vector(rows_);
        w.put(n_inputs_);
    }
    void load(BinaryReader& r) override {
        r.expect_tag("entropy_rows");
        std::vector<double> rows = r.get_vector<double>();
        if (rows.size() % kColumns != 0) r.fail("entropy_rows state is not whole rows");
        rows_ = std::move(rows);
        n_inputs_ = r.get<int64_t>();
    }
    AnalysisOutput finish(const FinishContext&) override {
        io::NpyArray array;
        array.dtype = io::DType::F64;
        array.shape = {int64_t(rows_.size()) / kColumns, kColumns};
        array.data.resize(rows_.size() * sizeof(double));
        if (!rows_.empty()) std::memcpy(array.data.data(), rows_.data(), array.data.size());
        AnalysisOutput out;
        out.arrays.emplace_back(tables::kEntropyRowsFile, std::move(array));
        out.record["entropy_rows"] = {{"file", tables::kEntropyRowsFile},
                                      {"n_rows", rows_.size() / kColumns},
                                      {"columns", tables::kEntropyRowColumns}};
        return out;
    }

private:
    AnalysisContext ctx_;
    std::vector<double> rows_;  // [R * kColumns]
    int64_t n_inputs_ = 0;      // inputs added (the offset of a merged shard's input column)
};

}  // namespace

// dynamics: the means over each layer's rows, and over every row (layer -1), of the entropy parts
// of spec 6: sink mass s, H(p), H_b(s), (1 - s) H(pi) and H(pi).
void entropy_rows_trajectory_values(const RunFiles& dir, std::vector<RunValue>& out) {
    if (!dir.exists(tables::kEntropyRowsFile)) return;
    const io::NpyArray a = io::read_npy(dir, tables::kEntropyRowsFile);
    SS_CHECK_INPUT(a.shape.size() == 2 && a.shape[1] == kColumns,
                   dir.shown(tables::kEntropyRowsFile),
                   "expected shape (rows, " + std::to_string(kColumns) + ")");
    const std::vector<double> rows = a.to_f64();
    struct Mean {
        double s = 0, h = 0, hb = 0, wh = 0, hc = 0;
        int64_t n = 0;
    };
    std::map<int64_t, Mean> means;
    for (int64_t r = 0; r < a.shape[0]; ++r) {
        const double* x = rows.data() + r * kColumns;
        const double s = x[col::kSinkMass], c = x[col::kContentMass];
        const double hb = -(s > 0 ? s * std::log(s) : 0) - (c > 0 ? c * std::log(c) : 0);
        for (int64_t l : {int64_t(x[col::kLayer]), int64_t(-1)}) {
            Mean& mean = means[l];
            mean.s += s;
            mean.h += x[col::kEntropy];
            mean.hb += hb;
            mean.wh += c * x[col::kContentEntropy];
            mean.hc += x[col::kContentEntropy];
            ++mean.n;
        }
    }
    namespace m = tables::metric;
    for (const auto& [l, mean] : means) {
        const double n = double(std::max<int64_t>(mean.n, 1));
        out.push_back({l, m::kSinkMass, "", mean.s / n});
        out.push_back({l, m::kEntropy, "", mean.h / n});
        out.push_back({l, m::kBinarySinkEntropy, "", mean.hb / n});
        out.push_back({l, m::kContentEntropyWeighted, "", mean.wh / n});
        out.push_back({l, m::kContentEntropy, "", mean.hc / n});
    }
}

std::unique_ptr<Analysis> make_entropy_rows(const AnalysisContext& c) {
    return std::make_unique<EntropyRows>(c);
}

}  // namespace sinkscope::analysis
