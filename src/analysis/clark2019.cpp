// The clark2019 analysis (metrics/clark2019.hpp; docs/metrics.md "clark2019.csv"): head
// distances as the standard BERT head-clustering pipeline computes them, with the sink kept and
// dropped, each clustered (spec 4: --linkage, --k or the best mean silhouette of the keep
// matrix) and the two clusterings compared by the adjusted Rand index: how much of that
// pipeline's head taxonomy the sink decides. Arrays clark2019/js_keep.npy, js_drop.npy; tables
// clark2019 (per head) and clark2019_ari.
#include <cmath>
#include <limits>

#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/metrics/clark2019.hpp"
#include "sinkscope/metrics/cluster.hpp"

namespace sinkscope::analysis {

namespace {

namespace t = tables;

class Clark2019 final : public Analysis {
public:
    explicit Clark2019(const AnalysisContext& c)
        : ctx_(c), acc_(c.n_layers, c.n_heads, c.options->threads) {}
    void add(const InputView& in, PerInputValues*) override {
        acc_.add(*in.attention, in.sinks->model);
    }
    void merge(const Analysis& other) override {
        acc_.merge(dynamic_cast<const Clark2019&>(other).acc_);
    }
    void save(BinaryWriter& w) const override { acc_.save(w); }
    void load(BinaryReader& r) override { acc_.load(r); }

    AnalysisOutput finish(const FinishContext&) override {
        const metrics::ClarkResults r = acc_.finish();
        const metrics::HeadAnalysisOptions& o = ctx_.options->head_analyses;
        AnalysisOutput out;
        const int n = int(r.keep.rows());
        const int k = o.k > 0 ? o.k : metrics::best_k_by_silhouette(r.keep, o.linkage);
        if (o.k > n - 1)
            throw UsageError("--k " + std::to_string(o.k) + " needs at least " +
                             std::to_string(o.k + 1) + " heads; the model has " +
                             std::to_string(n));
        io::Table heads(t::kClark2019.columns);
        std::vector<int> keep_labels, drop_labels;
        for (const auto& [name, d] :
             {std::pair<std::string, const Eigen::MatrixXd*>{"js_keep", &r.keep},
              {"js_drop", &r.drop}}) {
            out.arrays.emplace_back(
                "clark2019/" + name + ".npy",
                io::make_npy_f64({d->rows(), d->cols()},
                                 std::vector<double>(d->data(), d->data() + d->size())));
            if (k < 2) continue;
            const std::vector<int> labels = metrics::cluster_linkage(*d, k, o.linkage);
            const Eigen::MatrixXd mds = metrics::classical_mds(*d, 2);
            for (int h = 0; h < n; ++h)
                heads.add_row({name, ctx_.layer_id(h / ctx_.n_heads), int64_t(h % ctx_.n_heads),
                               int64_t(labels[size_t(h)]), int64_t(k), mds(h, 0), mds(h, 1)});
            (name == "js_keep" ? keep_labels : drop_labels) = labels;
        }
        const double ari = k >= 2 && r.rows_drop > 0
                               ? metrics::adjusted_rand_index(keep_labels, drop_labels)
                               : std::numeric_limits<double>::quiet_NaN();
        io::Table ari_table(t::kClark2019Ari.columns);
        ari_table.add_row({std::string("js_keep"), std::string("js_drop"), int64_t(k), ari});
        out.tables.push_back({t::kClark2019.name, std::move(heads), false});
        out.tables.push_back({t::kClark2019Ari.name, std::move(ari_table), false});
        out.record["clark2019"] = {
            {"distance",
             "sum over inputs and query rows of JS(p~_a, p~_b) in nats, p~ = 0.001 / T + 0.999 p "
             "(Clark et al. 2019, head_distances.py); drop: the same on the content "
             "composition, smoothed over T - 1"},
            {"rows_keep", r.rows_keep},
            {"rows_drop", r.rows_drop},
            {"k", k},
            {"k_selected_by_silhouette", o.k == 0},
            {"linkage", metrics::to_string(o.linkage)},
            {"ari_keep_drop", io::json_number(ari)}};
        out.summary = "clark2019 (Clark et al. 2019 head distances, " +
                      std::string(to_string(o.linkage)) + " linkage, k = " + std::to_string(k) +
                      "): ARI js_keep vs js_drop " + console_number(ari) + "\n";
        return out;
    }

private:
    AnalysisContext ctx_;
    metrics::ClarkAccumulator acc_;
};

}  // namespace

std::unique_ptr<Analysis> make_clark2019(const AnalysisContext& c) {
    return std::make_unique<Clark2019>(c);
}

}  // namespace sinkscope::analysis
