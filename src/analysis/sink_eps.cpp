// The Sink_eps analysis (spec/METRICS.md 8.q; Gu et al., ICLR 2025, "When attention sink emerges
// in language models"): alpha[l,h] = mean attention of the queries that see key k to it, averaged
// over inputs; Sink_eps = share of heads with alpha > eps, per layer and for the model (all L*H
// heads). Table sink_eps (long format).
#include <algorithm>
#include <cmath>

#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/metrics/sink_eps.hpp"

namespace sinkscope::analysis {

namespace {

namespace t = tables;

class SinkEps final : public Analysis {
public:
    explicit SinkEps(const AnalysisContext& c)
        : ctx_(c),
          eps_(c.options->raw.sink_eps),
          key_(c.options->raw.sink_eps_key),
          sum_(size_t(c.n_layers * c.n_heads), 0.0) {}

    void add(const InputView& in, PerInputValues* per_input) override {
        const metrics::AttentionInput& a = *in.attention;
        if (key_ >= a.length) {  // the input is too short to have the key: not counted
            ++n_short_;
            return;
        }
        std::vector<double> alpha(sum_.size());
        // The rows (queries) that see the key: causal t >= k (and inside the window).
        auto sees = [&](int64_t i) { return a.key_begin(i) <= key_ && key_ < a.key_end(i); };
        int64_t first = 0;  // rows before the first that sees the key are not read
        while (first < a.length && !sees(first)) ++first;
        std::vector<double> buffer;  // recomputed rows of a long input
        for (int64_t l = 0; l < a.n_layers; ++l)
            for (int64_t h = 0; h < a.n_heads; ++h) {
                double s = 0;
                int64_t n = 0;
                a.for_each_row(l, h, first, a.length, buffer, [&](int64_t i, const double* row) {
                    if (!sees(i)) return;
                    s += row[key_];
                    ++n;
                });
                alpha[size_t(l * a.n_heads + h)] = n > 0 ? s / double(n) : std::nan("");
            }
        for (size_t i = 0; i < alpha.size(); ++i) sum_[i] += alpha[i];
        ++n_inputs_;
        if (!per_input) return;
        for (int64_t l = 0; l < a.n_layers; ++l)
            for (int64_t h = 0; h < a.n_heads; ++h)
                per_input->push_back({t::kSinkEps.name, l, h, "alpha", key_param(),
                                      alpha[size_t(l * a.n_heads + h)], 1.0});
    }
    void merge(const Analysis& other) override {
        const auto& o = dynamic_cast<const SinkEps&>(other);
        for (size_t i = 0; i < sum_.size(); ++i) sum_[i] += o.sum_[i];
        n_inputs_ += o.n_inputs_;
        n_short_ += o.n_short_;
    }
    void save(BinaryWriter& w) const override {
        w.tag("sink_eps");
        w.put_vector(sum_);
        w.put(n_inputs_);
        w.put(n_short_);
    }
    void load(BinaryReader& r) override {
        r.expect_tag("sink_eps");
        std::vector<double> sum = r.get_vector<double>();
        if (sum.size() != sum_.size()) r.fail("sink_eps state has another number of heads");
        sum_ = std::move(sum);
        n_inputs_ = r.get<int64_t>();
        n_short_ = r.get<int64_t>();
    }

    AnalysisOutput finish(const FinishContext&) override {
        io::Table table(t::kSinkEps.columns);
        const int64_t L = ctx_.n_layers, H = ctx_.n_heads;
        std::vector<double> alpha(sum_.size(), std::nan(""));
        if (n_inputs_ > 0)
            for (size_t i = 0; i < sum_.size(); ++i) alpha[i] = sum_[i] / double(n_inputs_);
        const std::string eps = "eps=" + format_number(eps_);
        for (int64_t l = 0; l < L; ++l) {
            for (int64_t h = 0; h < H; ++h)
                table.add_row({ctx_.model_name, std::string(), l, h, std::string("alpha"),
                               key_param(), alpha[size_t(l * H + h)]});
            const std::vector<double> layer(alpha.begin() + l * H, alpha.begin() + (l + 1) * H);
            table.add_row({ctx_.model_name, std::string(), l, int64_t(-1),
                           std::string(t::metric::kSinkEps), eps,
                           n_inputs_ > 0 ? metrics::sink_eps_share(layer, eps_) : std::nan("")});
        }
        const double model = n_inputs_ > 0 ? metrics::sink_eps_share(alpha, eps_) : std::nan("");
        table.add_row({ctx_.model_name, std::string(), int64_t(-1), int64_t(-1),
                       std::string(t::metric::kSinkEps), eps, model});
        AnalysisOutput out;
        out.tables.push_back({t::kSinkEps.name, std::move(table), false});
        out.record["sink_eps"] = {{"eps", eps_},
                                  {"key", key_},
                                  {"value", io::json_number(model)},
                                  {"n_inputs", n_inputs_},
                                  {"n_inputs_too_short", n_short_}};
        out.summary = "Sink_" + format_number(eps_) + " (heads whose mean attention to position " +
                      std::to_string(key_) + " exceeds " + format_number(eps_) +
                      "): " + console_number(model) + "\n";
        if (n_short_ > 0)
            out.warnings.push_back(count_of(n_short_, "input") + (n_short_ == 1 ? " is" : " are") +
                                   " too short to have key position " + std::to_string(key_) +
                                   " and were left out of Sink_eps");
        return out;
    }

private:
    std::string key_param() const { return "#" + std::to_string(key_); }

    AnalysisContext ctx_;
    double eps_;
    int64_t key_;
    std::vector<double> sum_;  // [L * H] sum over inputs of alpha
    int64_t n_inputs_ = 0, n_short_ = 0;
};

}  // namespace

// Sink_eps rows of sink_eps.csv (param: the eps, from the convention column): compare reads the
// model's (layer and head -1), dynamics every layer's and the model's.
void sink_eps_values(const RunFiles& dir, std::vector<RunValue>& out, bool model) {
    if (RunTable s(dir, t::kSinkEps.name); s.present())
        for (size_t i = 0; i < s.size(); ++i)
            if (s.text(i, "metric") == t::metric::kSinkEps &&
                (!model || (s.num(i, "layer") < 0 && s.num(i, "head") < 0)))
                out.push_back({int64_t(s.num(i, "layer")), t::metric::kSinkEps,
                               s.text(i, "convention"), s.num(i, "value")});
}
void sink_eps_compare_values(const RunFiles& dir, std::vector<RunValue>& out) {
    sink_eps_values(dir, out, true);
}
void sink_eps_trajectory_values(const RunFiles& dir, std::vector<RunValue>& out) {
    sink_eps_values(dir, out, false);
}

std::unique_ptr<Analysis> make_sink_eps(const AnalysisContext& c) {
    return std::make_unique<SinkEps>(c);
}

}  // namespace sinkscope::analysis
