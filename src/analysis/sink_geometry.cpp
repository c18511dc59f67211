// The sink-geometry analysis (reference-frame paper, section 3.3, after Gu et al., ICLR 2025):
// per head, the key norm at the layer's sink position against the other keys' norms, and the
// cosine of the queries with the sink's key against their cosine with the other keys
// (metrics/sink_geometry.hpp), averaged over inputs. Needs the queries and keys, so only model
// runs offer it. Models with a slot outside the tokens (softmax_one's zero logit, the learnable
// kv slot of `train --kv-bias`) add "slot_mass": the mean over query rows of the weight the slot
// took (1 - the row's sum over the tokens before closure), the explicit sink of Gu et al.'s
// section 7. Table sink_geometry (long format); dynamics follows the model's values over
// checkpoints (sink_geometry_trajectory_values).
#include <algorithm>
#include <array>
#include <cmath>

#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/analysis/run_values.hpp"
#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/metrics/sink_geometry.hpp"

namespace sinkscope::analysis {

namespace {

namespace t = tables;
using metrics::kSinkGeometryCount;
// The metric after the query-key quantities: the weight outside the tokens (ModelVectors).
constexpr int kSlotMass = kSinkGeometryCount;
constexpr int kMetricCount = kSinkGeometryCount + 1;
const char* metric_name(int m) {
    return m == kSlotMass ? "slot_mass" : metrics::k_sink_geometry_metrics[size_t(m)];
}

class SinkGeometry final : public Analysis {
public:
    explicit SinkGeometry(const AnalysisContext& c)
        : ctx_(c), sum_(size_t(c.n_layers * c.n_heads * kMetricCount), 0.0), n_(sum_.size(), 0) {}

    void add(const InputView& in, PerInputValues* per_input) override {
        SS_CHECK(in.vectors && in.vectors->queries.size() == size_t(ctx_.n_layers),
                 "the sink-geometry analysis needs the queries and keys");
        const metrics::AttentionInput& a = *in.attention;
        const ModelVectors& v = *in.vectors;
        const bool slot = v.outside_mass.size() == size_t(a.n_layers);
        for (int64_t l = 0; l < a.n_layers; ++l) {
            const int64_t s = in.sinks->per_layer[size_t(l)];
            for (int64_t h = 0; h < a.n_heads; ++h) {
                const size_t at = size_t(h * a.length * v.d_head);
                std::array<double, kMetricCount> g{};
                const auto qk =
                    metrics::sink_geometry(v.queries[size_t(l)].data() + at,
                                           v.keys[size_t(l)].data() + at, v.d_head, a, s);
                std::copy(qk.begin(), qk.end(), g.begin());
                // The rows' mean weight outside the tokens (real rows: the first a.length).
                g[kSlotMass] = std::nan("");
                if (slot && a.length > 0) {
                    const double* row_mass = v.outside_mass[size_t(l)].data() + h * a.n_tokens;
                    double total = 0;
                    for (int64_t i = 0; i < a.length; ++i) total += row_mass[i];
                    g[kSlotMass] = total / double(a.length);
                }
                for (int m = 0; m < kMetricCount; ++m) {
                    if (!std::isfinite(g[size_t(m)])) continue;
                    const size_t i = index(l, h, m);
                    sum_[i] += g[size_t(m)];
                    ++n_[i];
                    if (per_input)
                        per_input->push_back({t::kSinkGeometry.name, l, h, metric_name(m),
                                              convention(m), g[size_t(m)], 1.0});
                }
            }
        }
    }
    void merge(const Analysis& other) override {
        const auto& o = dynamic_cast<const SinkGeometry&>(other);
        for (size_t i = 0; i < sum_.size(); ++i) sum_[i] += o.sum_[i], n_[i] += o.n_[i];
    }
    void save(BinaryWriter& w) const override {
        w.tag("sink_geometry");
        w.put_vector(sum_);
        w.put_vector(n_);
    }
    void load(BinaryReader& r) override {
        r.expect_tag("sink_geometry");
        std::vector<double> sum = r.get_vector<double>();
        std::vector<int64_t> n = r.get_vector<int64_t>();
        if (sum.size() != sum_.size() || n.size() != n_.size())
            r.fail("sink_geometry state has another number of heads");
        sum_ = std::move(sum);
        n_ = std::move(n);
    }

    // Per head: the mean over the inputs where the value exists; per layer (head -1) and for the
    // model (layer -1): the mean of those head means.
    AnalysisOutput finish(const FinishContext&) override {
        io::Table table(t::kSinkGeometry.columns);
        const int64_t L = ctx_.n_layers, H = ctx_.n_heads;
        bool any_slot = false;  // slot_mass rows only for a model with a slot
        for (int64_t l = 0; l < L; ++l)
            for (int64_t h = 0; h < H; ++h) any_slot = any_slot || n_[index(l, h, kSlotMass)] > 0;
        for (int m = 0; m < kMetricCount; ++m) {
            if (m == kSlotMass && !any_slot) continue;
            const std::string metric = metric_name(m);
            double model_sum = 0;
            int64_t model_n = 0;
            for (int64_t l = 0; l < L; ++l) {
                double layer_sum = 0;
                int64_t layer_n = 0;
                for (int64_t h = 0; h < H; ++h) {
                    const size_t i = index(l, h, m);
                    const double v = n_[i] > 0 ? sum_[i] / double(n_[i]) : std::nan("");
                    table.add_row({ctx_.model_name, std::string(), l, h, metric,
                                   std::string(convention(m)), v});
                    if (std::isfinite(v)) layer_sum += v, ++layer_n;
                }
                model_sum += layer_sum, model_n += layer_n;
                table.add_row({ctx_.model_name, std::string(), l, int64_t(-1), metric,
                               std::string(convention(m)),
                               layer_n > 0 ? layer_sum / double(layer_n) : std::nan("")});
            }
            table.add_row({ctx_.model_name, std::string(), int64_t(-1), int64_t(-1), metric,
                           std::string(convention(m)),
                           model_n > 0 ? model_sum / double(model_n) : std::nan("")});
        }
        AnalysisOutput out;
        out.tables.push_back({t::kSinkGeometry.name, std::move(table), false});
        out.record["sink_geometry"] = {
            {"vectors",
             "queries and keys after any rotary embedding (hook_rot_q, hook_rot_k), "
             "keys GQA-expanded"},
            {"sink", "the layer's resolved sink position (sinks.csv)"},
            {"cosine_pairs", "visible (query, key) pairs, a query with itself excluded"}};
        if (any_slot)
            out.record["sink_geometry"]["slot_mass"] =
                "mean over query rows of the weight outside the tokens (softmax_one's zero "
                "logit, the kv slot): 1 - the row's sum before it is closed";
        return out;
    }

private:
    // The vectors' convention; slot_mass is read from the rows before they are closed.
    static const char* convention(int m) { return m == kSlotMass ? "unclosed" : "rotated"; }
    size_t index(int64_t l, int64_t h, int m) const {
        return size_t((l * ctx_.n_heads + h) * kMetricCount + m);
    }

    AnalysisContext ctx_;
    std::vector<double> sum_;
    std::vector<int64_t> n_;
};

}  // namespace

// dynamics: the model's values (layer and head -1, the mean of the head means) of every quantity
// of sink_geometry.csv, param the vectors' convention; with the Sink_eps rows they show when the
// sink formed over training (the sink's key norm and the queries' cosine with its key).
void sink_geometry_trajectory_values(const RunFiles& dir, std::vector<RunValue>& out) {
    if (RunTable g(dir, t::kSinkGeometry.name); g.present())
        for (size_t i = 0; i < g.size(); ++i)
            if (g.num(i, "layer") < 0 && g.num(i, "head") < 0)
                out.push_back(
                    {-1, g.text(i, "metric"), g.text(i, "convention"), g.num(i, "value")});
}

std::unique_ptr<Analysis> make_sink_geometry(const AnalysisContext& c) {
    return std::make_unique<SinkGeometry>(c);
}

}  // namespace sinkscope::analysis
