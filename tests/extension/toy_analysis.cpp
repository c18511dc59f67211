// A toy analysis defined in the test tree alone (issue 48's proof that an analysis is one file,
// one registry row and one test): "toy" reports, per layer, the mean attention of every row to
// key 0 averaged over heads and inputs, times its own option --toy-scale. It registers its row
// (with the option) and its report figure from static initialisers; nothing under src/, apps/ or
// python/ names it. integration_toy_analysis.cpp checks that it reaches --help, the Python
// keywords, run.json, its table and the report.
#include <cmath>
#include <string>
#include <vector>

#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/io/table.hpp"
#include "sinkscope/report/report.hpp"

namespace sinkscope::toy {

namespace {

using analysis::AnalysisContext;
using analysis::AnalysisOutput;
using analysis::InputView;

constexpr const char* kTable = "toy";
constexpr const char* kScale = "toy_scale";

class Toy final : public analysis::Analysis {
public:
    explicit Toy(const AnalysisContext& c)
        : ctx_(c), scale_(c.options->raw.value<double>(kScale)), sum_(size_t(c.n_layers), 0.0) {}

    void add(const InputView& in, analysis::PerInputValues* per_input) override {
        const metrics::AttentionInput& a = *in.attention;
        std::vector<double> buffer;
        for (int64_t l = 0; l < a.n_layers; ++l) {
            double s = 0;
            int64_t n = 0;
            for (int64_t h = 0; h < a.n_heads; ++h)
                a.for_each_row(l, h, 0, a.length, buffer, [&](int64_t i, const double* row) {
                    if (a.key_begin(i) > 0) return;  // the row does not see key 0
                    s += row[0];
                    ++n;
                });
            const double mean = n > 0 ? s / double(n) : std::nan("");
            sum_[size_t(l)] += mean;
            if (per_input) per_input->push_back({kTable, l, -1, "first_key", "", mean, 1.0});
        }
        ++n_inputs_;
    }
    void merge(const Analysis& other) override {
        const auto& o = dynamic_cast<const Toy&>(other);
        for (size_t l = 0; l < sum_.size(); ++l) sum_[l] += o.sum_[l];
        n_inputs_ += o.n_inputs_;
    }
    void save(BinaryWriter& w) const override {
        w.tag(kTable);
        w.put_vector(sum_);
        w.put(n_inputs_);
    }
    void load(BinaryReader& r) override {
        r.expect_tag(kTable);
        sum_ = r.get_vector<double>();
        if (sum_.size() != size_t(ctx_.n_layers)) r.fail("toy state has another layer count");
        n_inputs_ = r.get<int64_t>();
    }
    AnalysisOutput finish(const analysis::FinishContext&) override {
        io::Table table({"model", "layer", "metric", "value"});
        for (int64_t l = 0; l < ctx_.n_layers; ++l)
            table.add_row({ctx_.model_name, l, std::string("scaled_first_key"),
                           scale_ * sum_[size_t(l)] / double(n_inputs_)});
        AnalysisOutput out;
        out.tables.push_back({kTable, std::move(table), false});
        out.summary =
            "toy: scaled first-key attention of " + std::to_string(ctx_.n_layers) + " layers\n";
        return out;
    }

private:
    AnalysisContext ctx_;
    double scale_;
    std::vector<double> sum_;  // [L] sum over inputs of the layer's mean first-key attention
    int64_t n_inputs_ = 0;
};

const analysis::RegisterAnalysis row({
    .name = "toy",
    .description = "toy analysis of the test tree: scaled first-key attention per layer",
    .options = {analysis::extra_option<double>(kScale, 2.0, "Factor of the toy analysis' values")
                    .in("Toy")
                    .checked([](const analysis::AnalysisOptions& o,
                                const analysis::OptionCheckContext&) {
                        const double v = o.value<double>(kScale);
                        if (!(std::isfinite(v) && v > 0))
                            throw UsageError("--toy-scale must be a number > 0");
                    })},
    .make = [](const AnalysisContext& c) { return std::make_unique<Toy>(c); },
});

const report::RegisterFigureSection figure([](const std::filesystem::path& dir,
                                              report::ReportContent& c) {
    if (!std::filesystem::exists(dir / "toy.csv")) return;
    c.figures.push_back({"Toy", "Toy: scaled first-key attention per layer",
                         "The toy analysis of the test tree (toy.csv).",
                         report::line_spec(report::table_rows(dir / "toy.csv"), "layer", "value",
                                           "metric", {"layer", "scaled first-key attention", ""})});
});

}  // namespace

}  // namespace sinkscope::toy
