// The value-space analysis (spec 8, PAPERS.md B.6-B.7): reference tokens and their share of each
// query's update, on the residual stream and on the true V projections; transformation magnitude
// and geometric-semantic alignment; the entropy-magnitude and PCA correlations (B.7) and the
// true-V results per head. Needs hidden states, so only model runs offer it. Table value_space
// (long format, also .jsonl): the rows of each layer, then the B.7 correlations of each layer,
// then the per-head rows, so the earlier rows keep their place.
#include <cmath>

#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/value_space.hpp"

namespace sinkscope::analysis {

namespace {

namespace t = tables;

// The eight per-layer values of value_space.csv from one layer's sums: (metric, convention,
// mean, count). `mode` is "principled" or "ruscio2025".
struct LayerValue {
    const char* metric;
    std::string convention;
    double sum;
    int64_t n;
};
std::vector<LayerValue> layer_values(const metrics::ValueSpaceLayer& L, const std::string& mode) {
    return {{"reference_count", mode, L.sum_reference_count, L.n_inputs},
            {t::metric::kRelativeMagnitude, "hidden", L.sum_rel_magnitude_hidden, L.n_hidden},
            {"directional_influence", "hidden", L.sum_direction_hidden, L.n_hidden},
            {t::metric::kRelativeMagnitude, "value", L.sum_rel_magnitude_value, L.n_value},
            {"directional_influence", "value", L.sum_direction_value, L.n_value},
            {t::metric::kTransformationMagnitude, mode, L.sum_transformation, L.n_transformation},
            {"geometric_semantic_alignment", mode, L.sum_alignment, L.n_alignment}};
}

// The B.7 correlations of one layer (head -1), each the mean over the inputs where it is defined:
// entropy_magnitude_r, pca_correlation (mean |r_k|), pca_correlation_signed.
std::vector<LayerValue> correlation_values(const metrics::ValueSpaceLayer& L,
                                           const std::string& mode) {
    return {{"entropy_magnitude_r", mode, L.sum_entropy_magnitude, L.n_entropy_magnitude},
            {"pca_correlation", mode, L.sum_pca, L.n_pca},
            {"pca_correlation_signed", mode, L.sum_pca_signed, L.n_pca}};
}

// The true-V values of head h: relative magnitude and directional influence.
std::vector<LayerValue> head_values(const metrics::ValueSpaceHead& h) {
    return {{t::metric::kRelativeMagnitude, "value", h.sum_rel_magnitude, h.n},
            {"directional_influence", "value", h.sum_direction, h.n}};
}

double mean(double sum, int64_t n) {
    return n > 0 ? sum / double(n) : std::nan("");
}

class ValueSpace final : public Analysis {
public:
    explicit ValueSpace(const AnalysisContext& c)
        : ctx_(c),
          acc_(c.n_layers, c.options->value),
          mode_(c.options->value.compat ? "ruscio2025" : "principled") {}

    void add(const InputView& in, PerInputValues* per_input) override {
        SS_CHECK(in.vectors, "the value-space analysis needs hidden states");
        const ModelVectors& v = *in.vectors;
        std::vector<metrics::ValueSpaceLayer> mine;
        acc_.add(*in.attention, v.hidden, v.d_model, v.values, v.d_head,
                 per_input ? &mine : nullptr);
        if (!per_input) return;
        auto put = [&](size_t l, int64_t head, const LayerValue& v) {
            if (v.n > 0)
                per_input->push_back({t::kValueSpace.name, int64_t(l), head, v.metric, v.convention,
                                      v.sum / double(v.n), double(v.n)});
        };
        for (size_t l = 0; l < mine.size(); ++l)
            for (const auto& v : layer_values(mine[l], mode_)) put(l, -1, v);
        for (size_t l = 0; l < mine.size(); ++l)
            for (const auto& v : correlation_values(mine[l], mode_)) put(l, -1, v);
        for (size_t l = 0; l < mine.size(); ++l)
            for (size_t h = 0; h < mine[l].heads.size(); ++h)
                for (const auto& v : head_values(mine[l].heads[h])) put(l, int64_t(h), v);
    }
    void merge(const Analysis& other) override {
        acc_.merge(dynamic_cast<const ValueSpace&>(other).acc_);
    }
    void save(BinaryWriter& w) const override { acc_.save(w); }
    void load(BinaryReader& r) override { acc_.load(r); }

    AnalysisOutput finish(const FinishContext&) override {
        io::Table table(t::kValueSpace.columns);
        for (size_t l = 0; l < acc_.layers().size(); ++l) {
            const auto& L = acc_.layers()[l];
            for (const auto& v : layer_values(L, mode_))
                table.add_row({ctx_.model_name, std::string(), int64_t(l), int64_t(-1),
                               std::string(v.metric), v.convention, mean(v.sum, v.n)});
            table.add_row({ctx_.model_name, std::string(), int64_t(l), int64_t(-1),
                           std::string("rows_without_visible_reference"), mode_,
                           double(L.n_no_reference_visible)});
        }
        for (size_t l = 0; l < acc_.layers().size(); ++l) {
            const auto& L = acc_.layers()[l];
            for (const auto& v : correlation_values(L, mode_))
                table.add_row({ctx_.model_name, std::string(), int64_t(l), int64_t(-1),
                               std::string(v.metric), v.convention, mean(v.sum, v.n)});
            for (const auto& [metric, undefined] :
                 {std::pair{"entropy_magnitude_r_undefined", L.n_entropy_magnitude_undefined},
                  std::pair{"pca_correlation_undefined", L.n_pca_undefined}})
                table.add_row({ctx_.model_name, std::string(), int64_t(l), int64_t(-1),
                               std::string(metric), mode_, double(undefined)});
        }
        for (size_t l = 0; l < acc_.layers().size(); ++l)
            for (size_t h = 0; h < acc_.layers()[l].heads.size(); ++h)
                for (const auto& v : head_values(acc_.layers()[l].heads[h]))
                    table.add_row({ctx_.model_name, std::string(), int64_t(l), int64_t(h),
                                   std::string(v.metric), v.convention, mean(v.sum, v.n)});
        AnalysisOutput out;
        out.tables.push_back({t::kValueSpace.name, std::move(table), true});
        const auto& o = acc_.options();
        out.record["value_space"] = {{"variants",
                                      {"hidden (residual stream entering the layer)",
                                       "value (V projections, GQA-expanded)"}},
                                     {"reference_threshold", o.reference_threshold},
                                     {"fallback_fraction", o.fallback_fraction},
                                     {"cap_fraction", o.cap_fraction},
                                     {"pca",
                                      {{"components", 3},
                                       {"method",
                                        "exact symmetric eigendecomposition of the "
                                        "smaller Gram matrix of the centred data"},
                                       {"pca_correlation", "mean over components of |r_k|"},
                                       {"pca_correlation_signed",
                                        "mean of r_k, each score vector's largest-|x| entry "
                                        "positive"}}}};
        return out;
    }

private:
    AnalysisContext ctx_;
    metrics::ValueSpaceAccumulator acc_;
    std::string mode_;
};

}  // namespace

std::unique_ptr<Analysis> make_value_space(const AnalysisContext& c) {
    return std::make_unique<ValueSpace>(c);
}

}  // namespace sinkscope::analysis
