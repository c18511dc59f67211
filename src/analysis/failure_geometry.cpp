// The failure-geometry analysis (metrics/failure_geometry.hpp; docs/metrics.md
// "failure_geometry.csv"): every classical head distance, in both conventions, and the two
// Aitchison ones, against the head pair's sink mass, as quantile bands per sink-mass bin. Reads
// the compositional analysis' head distances and sink masses; adds nothing per input.
#include <cmath>
#include <sstream>

#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/metrics/failure_geometry.hpp"
#include "sinkscope/metrics/head.hpp"

namespace sinkscope::analysis {

namespace {

namespace t = tables;

// The distances banded, classical first (keep, drop), then the Aitchison pair for contrast.
constexpr const char* kBanded[] = {"cosine_keep",    "cosine_drop",    "js_keep", "js_drop",
                                   "euclidean_keep", "euclidean_drop", "dA",      "dA_perp"};

class FailureGeometry final : public Analysis {
public:
    explicit FailureGeometry(const AnalysisContext& c)
        : ctx_(c), bins_(c.options->raw.failure_bins) {}
    void add(const InputView&, PerInputValues*) override {}  // reads compositional's results
    void merge(const Analysis&) override {}
    void save(BinaryWriter& w) const override { w.tag("failure_geometry"); }
    void load(BinaryReader& r) override { r.expect_tag("failure_geometry"); }

    AnalysisOutput finish(const FinishContext& context) override {
        const metrics::HeadResults& r = context.result(kCompositionalResult);
        std::vector<double> mass;
        for (const metrics::HeadMeans& m : r.means) mass.push_back(m.sink_mass);
        std::vector<std::pair<std::string, const Eigen::MatrixXd*>> matrices;
        for (const char* name : kBanded)
            if (const auto it = r.distances.find(name); it != r.distances.end())
                matrices.emplace_back(name, &it->second);
        const std::vector<metrics::FailureBand> bands =
            metrics::failure_geometry(matrices, mass, bins_);
        io::Table table(t::kFailureGeometry.columns);
        for (const metrics::FailureBand& b : bands)
            table.add_row({ctx_.model_name, b.matrix, b.bin_lo, b.bin_hi, b.n_pairs, b.min, b.q05,
                           b.q25, b.median, b.q75, b.q95, b.max});
        AnalysisOutput out;
        out.tables.push_back({t::kFailureGeometry.name, std::move(table), false});
        out.record["failure_geometry"] = {
            {"bins", bins_},
            {"pairs", std::string(r.scope == metrics::Scope::Layer ? "heads of one layer"
                                                                   : "every pair of heads")},
            {"pair_sink_mass", "mean of the two heads' mean sink mass (heads.csv sink_mass)"},
            {"quantiles", "numpy default (linear interpolation)"}};
        // Console: the classical keep metrics' median in the lowest and highest occupied bins.
        std::ostringstream s;
        s << "failure geometry (median head-pair distance at the lowest and highest pair sink "
             "mass, "
          << bins_ << " bins):";
        const char* sep = " ";
        for (const char* name : {"cosine_keep", "js_keep", "euclidean_keep"}) {
            const metrics::FailureBand *lo = nullptr, *hi = nullptr;
            for (const metrics::FailureBand& b : bands)
                if (b.matrix == name && b.n_pairs > 0) {
                    if (!lo) lo = &b;
                    hi = &b;
                }
            if (!lo || lo == hi) continue;
            s << sep << name << " " << console_number(lo->median) << " at "
              << console_number(lo->bin_lo) << "-" << console_number(lo->bin_hi) << ", "
              << console_number(hi->median) << " at " << console_number(hi->bin_lo) << "-"
              << console_number(hi->bin_hi);
            sep = "; ";
        }
        out.summary = s.str() + "\n";
        return out;
    }

private:
    AnalysisContext ctx_;
    int bins_;
};

}  // namespace

std::unique_ptr<Analysis> make_failure_geometry(const AnalysisContext& c) {
    return std::make_unique<FailureGeometry>(c);
}

}  // namespace sinkscope::analysis
