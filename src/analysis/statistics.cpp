// The statistics analysis: what the papers report over inputs and the summary tables cannot say.
// It reads the per-input values of the other analyses (registry.hpp) and writes
//  * bootstrap.csv (--bootstrap N): percentile intervals of the headline per-head / per-layer
//    numbers (sink mass and entropy parts, KL reduction, graph metrics, row entropy, relative
//    magnitude), resampling inputs with replacement; the estimate is the summary value (the
//    weighted mean over inputs, weights = rows for per-head means);
//  * correlations.csv: per layer (and threshold) across inputs, Pearson and Spearman r with
//    two-sided p of the Fiedler value vs degree centralization and vs degree variance (the
//    reference-frame paper's fiedler.ipynb, PAPERS.md B.4) and of the head-average row entropy
//    vs the transformation magnitude (B.7; model runs with the value analysis);
//  * paired_tests.csv: per layer and percentile, the paired t-test over inputs of the KL of heads
//    from their average before vs after sink removal (B.5);
//  * groups.csv and group_tests.csv (--group-by COLUMN): the inputs grouped by a column of their
//    data file; per group the mean of each headline number with its Student-t interval, and a
//    test between the groups (Welch's t for two groups, one-way ANOVA for more). Each input
//    counts once (unweighted), as the tests assume.
// Values that are not finite are left out (n says how many entered).
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/metrics/statistics.hpp"

namespace sinkscope::analysis {

namespace {

namespace t = tables;
namespace m = tables::metric;

struct Key {
    std::string table;
    int64_t layer = -1, head = -1;
    std::string metric, param;
    auto operator<=>(const Key&) const = default;
};

// One quantity over inputs: the inputs it exists for, its value and weight there.
struct Series {
    std::vector<int64_t> inputs;
    std::vector<double> values, weights;
};

// A headline number of its analysis' registry row (AnalysisInfo::headlines).
bool is_headline(const PerInputValue& v) {
    for (const AnalysisInfo& info : registry())
        for (const Headline& h : info.headlines)
            if (v.table == h.table && v.metric == h.metric &&
                (h.per_head || (v.head == -1 && v.layer >= 0)))
                return true;
    return false;
}

// Kept for correlations and paired tests (head-average, per layer).
bool is_paired_input(const PerInputValue& v) {
    if (v.head != -1 || v.layer < 0) return false;
    const std::string& x = v.metric;
    if (v.table == t::kGraphs)
        return x == m::kLambda2 || x == m::kCentralization || x == m::kDegreeVariance;
    if (v.table == t::kKl) return x == m::kKlBefore || x == m::kKlAfter;
    if (v.table == t::kEntropy) return x == m::kEntropyAllRows;
    if (v.table == t::kValueSpace.name) return x == m::kTransformationMagnitude;
    return false;
}

// The finite pairs of two series joined on the input.
std::pair<std::vector<double>, std::vector<double>> join(const Series& a, const Series& b) {
    std::map<int64_t, double> by_input;
    for (size_t k = 0; k < b.inputs.size(); ++k) by_input[b.inputs[k]] = b.values[k];
    std::vector<double> x, y;
    for (size_t k = 0; k < a.inputs.size(); ++k) {
        const auto it = by_input.find(a.inputs[k]);
        if (it == by_input.end() || !std::isfinite(a.values[k]) || !std::isfinite(it->second))
            continue;
        x.push_back(a.values[k]);
        y.push_back(it->second);
    }
    return {x, y};
}

// A series whose spread is below the float64 resolution of its mean (scipy's "nearly constant"
// test: ||x - mean|| < 1e-13 |mean|) carries only rounding noise, e.g. a Fiedler value that is
// exactly 1/2 for every input up to the eigensolver's rounding; a correlation with it would be a
// correlation of rounding errors, so it is reported as undefined (NaN), as for constant input.
bool nearly_constant(const std::vector<double>& v) {
    if (v.empty()) return true;
    double mean = 0;
    for (double x : v) mean += x;
    mean /= double(v.size());
    double ss = 0;
    for (double x : v) ss += (x - mean) * (x - mean);
    return std::sqrt(ss) < 1e-13 * std::abs(mean);
}

class Statistics final : public Analysis {
public:
    explicit Statistics(const AnalysisContext& c) : ctx_(c) {}

    void add(const InputView&, PerInputValues*) override { ++n_inputs_; }
    void add_per_input(int64_t input, const PerInputValues& values) override {
        const bool headline =
            ctx_.options->raw.bootstrap > 0 || !ctx_.options->raw.group_by.empty();
        for (const auto& v : values) {
            if (!((headline && is_headline(v)) || is_paired_input(v))) continue;
            Series& s = series_[{v.table, v.layer, v.head, v.metric, v.param}];
            s.inputs.push_back(input);
            s.values.push_back(v.value);
            s.weights.push_back(v.weight);
        }
    }
    void merge(const Analysis& other) override {
        const auto& o = dynamic_cast<const Statistics&>(other);
        const int64_t offset = n_inputs_;
        n_inputs_ += o.n_inputs_;
        for (const auto& [k, s] : o.series_) {
            Series& d = series_[k];
            for (int64_t i : s.inputs) d.inputs.push_back(i + offset);
            d.values.insert(d.values.end(), s.values.begin(), s.values.end());
            d.weights.insert(d.weights.end(), s.weights.begin(), s.weights.end());
        }
    }
    void save(BinaryWriter& w) const override {
        w.tag("statistics");
        w.put(n_inputs_);
        w.put<uint64_t>(series_.size());
        for (const auto& [k, s] : series_) {
            w.put_string(k.table);
            w.put(k.layer);
            w.put(k.head);
            w.put_string(k.metric);
            w.put_string(k.param);
            w.put_vector(s.inputs);
            w.put_vector(s.values);
            w.put_vector(s.weights);
        }
    }
    void load(BinaryReader& r) override {
        r.expect_tag("statistics");
        series_.clear();
        n_inputs_ = r.get<int64_t>();
        const auto n = r.get<uint64_t>();
        for (uint64_t i = 0; i < n; ++i) {
            Key k;
            k.table = r.get_string();
            k.layer = r.get<int64_t>();
            k.head = r.get<int64_t>();
            k.metric = r.get_string();
            k.param = r.get_string();
            Series& s = series_[k];
            s.inputs = r.get_vector<int64_t>();
            s.values = r.get_vector<double>();
            s.weights = r.get_vector<double>();
            if (s.values.size() != s.inputs.size() || s.weights.size() != s.inputs.size())
                r.fail("statistics state: series of different lengths");
        }
    }

    AnalysisOutput finish(const FinishContext&) override {
        AnalysisOutput out;
        const std::string& model = ctx_.model_name;
        const auto& o = ctx_.options->raw;
        const uint64_t seed = ctx_.options->seed;

        if (o.bootstrap > 0) {
            io::Table boot(t::kBootstrap.columns);
            for (const auto& [k, s] : series_) {
                const bool headline = is_headline({k.table, k.layer, k.head, k.metric, k.param});
                if (!headline) continue;
                const bool weighted = k.table == t::kHeads.name || k.table == t::kValueSpace.name;
                const metrics::BootstrapInterval b =
                    metrics::bootstrap_mean(s.values, weighted ? s.weights : std::vector<double>{},
                                            o.bootstrap, seed, o.confidence);
                boot.add_row({model, std::string(), k.table, k.layer, k.head, k.metric, k.param,
                              b.estimate, b.lo, b.hi, o.confidence, b.n_used, int64_t(o.bootstrap),
                              int64_t(seed)});
            }
            layer_means(boot, model, seed);
            out.tables.push_back({t::kBootstrap.name, std::move(boot), false});
        }

        io::Table corr(t::kCorrelations.columns);
        auto correlate = [&](const Series& a, const Series& b, const Key& ka, const Key& kb) {
            const auto [x, y] = join(a, b);
            metrics::Correlation p = metrics::pearson(x, y);
            metrics::Correlation r = metrics::spearman(x, y);
            if (nearly_constant(x) || nearly_constant(y)) p.r = p.p = r.r = r.p = std::nan("");
            const std::string xn = ka.table + "." + ka.metric, yn = kb.table + "." + kb.metric;
            corr.add_row({model, std::string(), ka.layer, ka.param, xn, yn, std::string("pearson"),
                          p.r, p.p, int64_t(x.size())});
            corr.add_row({model, std::string(), ka.layer, ka.param, xn, yn, std::string("spearman"),
                          r.r, r.p, int64_t(x.size())});
        };
        io::Table paired(t::kPairedTests.columns);
        for (const auto& [k, s] : series_) {
            if (k.table == t::kGraphs && k.metric == m::kLambda2)
                for (const char* other : {m::kCentralization, m::kDegreeVariance}) {
                    const Key ko{k.table, k.layer, k.head, other, k.param};
                    if (const auto it = series_.find(ko); it != series_.end())
                        correlate(s, it->second, k, ko);
                }
            if (k.table == t::kEntropy && k.metric == m::kEntropyAllRows) {
                for (const auto& [kv, sv] : series_)
                    if (kv.table == t::kValueSpace.name && kv.layer == k.layer &&
                        kv.metric == m::kTransformationMagnitude)
                        correlate(s, sv, k, kv);
            }
            if (k.table == t::kKl && k.metric == m::kKlBefore) {
                const Key ka{k.table, k.layer, k.head, m::kKlAfter, k.param};
                const auto it = series_.find(ka);
                if (it == series_.end()) continue;
                const auto [x, y] = join(s, it->second);
                const metrics::PairedTest p = metrics::paired_t_test(x, y);
                paired.add_row({model, std::string(), k.table, k.layer, k.param,
                                std::string(m::kKlBefore), std::string(m::kKlAfter),
                                std::string("paired t"), p.mean_difference, p.t, p.df, p.p,
                                int64_t(x.size())});
            }
        }
        if (!corr.empty()) out.tables.push_back({t::kCorrelations.name, std::move(corr), false});
        if (!paired.empty()) out.tables.push_back({t::kPairedTests.name, std::move(paired), false});
        std::pair<nlohmann::json, std::string> grouped;
        if (!o.group_by.empty()) grouped = add_group_tables(out);

        out.record["statistics"] = {
            {"bootstrap", o.bootstrap > 0
                              ? nlohmann::json{{"resamples", o.bootstrap},
                                               {"seed", seed},
                                               {"level", o.confidence},
                                               {"interval",
                                                "percentile (linear interpolation), inputs "
                                                "resampled with replacement"},
                                               {"statistic",
                                                "weighted mean over inputs (weights: rows for "
                                                "per-head means and value space, else 1)"}}
                              : nlohmann::json("off (--bootstrap N)")},
            {"correlations",
             "Pearson and Spearman (average ranks) r over inputs, two-sided p "
             "from Student t with n - 2 df; non-finite pairs left out"},
            {"paired_tests", "paired t-test over inputs (two-sided, df n - 1)"}};
        std::ostringstream summary;
        summary << "statistics over " << count_of(n_inputs_, "input") << ": "
                << (o.bootstrap > 0 ? std::to_string(o.bootstrap) + " bootstrap resamples, "
                                    : std::string())
                << "correlations and paired tests in correlations.csv, paired_tests.csv\n";
        if (!o.group_by.empty()) {
            out.record["statistics"]["groups"] = grouped.first;
            summary << grouped.second;
        }
        out.summary = summary.str();
        return out;
    }

private:
    // heads.csv's per-layer figure values (the mean over a layer's heads of their means over
    // inputs) get their interval too, as head -1 rows: one resample of the inputs for all the
    // layer's heads (metrics::bootstrap_mean_of_means).
    void layer_means(io::Table& boot, const std::string& model, uint64_t seed) const {
        const auto& o = ctx_.options->raw;
        std::map<std::tuple<int64_t, std::string, std::string>, std::vector<const Series*>> heads;
        for (const auto& [k, s] : series_)
            if (k.table == t::kHeads.name && k.head >= 0 &&
                is_headline({k.table, k.layer, k.head, k.metric, k.param}))
                heads[{k.layer, k.metric, k.param}].push_back(&s);
        for (const auto& [key, series] : heads) {
            std::map<int64_t, size_t> column;  // input -> position, over every head's inputs
            for (const Series* s : series)
                for (int64_t i : s->inputs) column.emplace(i, 0);
            size_t next = 0;
            for (auto& [input, at] : column) at = next++;
            std::vector<std::vector<double>> v(series.size(),
                                               std::vector<double>(column.size(), std::nan("")));
            std::vector<std::vector<double>> w(series.size(),
                                               std::vector<double>(column.size(), 1));
            for (size_t h = 0; h < series.size(); ++h)
                for (size_t k = 0; k < series[h]->inputs.size(); ++k) {
                    const size_t at = column.at(series[h]->inputs[k]);
                    v[h][at] = series[h]->values[k];
                    w[h][at] = series[h]->weights[k];
                }
            const metrics::BootstrapInterval b =
                metrics::bootstrap_mean_of_means(v, w, o.bootstrap, seed, o.confidence);
            const auto& [layer, metric, param] = key;
            boot.add_row({model, std::string(), std::string(t::kHeads.name), layer, int64_t(-1),
                          metric, param, b.estimate, b.lo, b.hi, o.confidence, b.n_used,
                          int64_t(o.bootstrap), int64_t(seed)});
        }
    }

    // groups.csv and group_tests.csv: each headline series split by the --group-by column; returns
    // run.json's statistics.groups and a summary line.
    std::pair<nlohmann::json, std::string> add_group_tables(AnalysisOutput& out) const {
        const auto& o = ctx_.options->raw;
        const InputLabels& labels = *ctx_.labels;
        const auto col = std::find(labels.columns.begin(), labels.columns.end(), o.group_by);
        SS_CHECK(col != labels.columns.end(), "--group-by ", o.group_by, " is not a data column");
        const size_t c = size_t(col - labels.columns.begin());
        const std::string& model = ctx_.model_name;
        io::Table groups(t::kGroups.columns), tests(t::kGroupTests.columns);
        std::map<std::string, int64_t> sizes;  // inputs per group, for the summary
        for (int64_t i = 0; i < n_inputs_ && size_t(i) < labels.values.size(); ++i)
            ++sizes[labels.values[size_t(i)][c]];
        for (const auto& [k, s] : series_) {
            if (!is_headline({k.table, k.layer, k.head, k.metric, k.param})) continue;
            std::map<std::string, std::vector<double>> by_group;  // sorted by the group's value
            for (size_t n = 0; n < s.inputs.size(); ++n) {
                const size_t input = size_t(s.inputs[n]);
                SS_CHECK(input < labels.values.size(), "input ", input, " has no data columns");
                if (std::isfinite(s.values[n]))
                    by_group[labels.values[input][c]].push_back(s.values[n]);
            }
            std::vector<std::vector<double>> values;
            int64_t n_used = 0;
            for (const auto& [group, v] : by_group) {
                const metrics::MeanInterval m = metrics::mean_interval(v, o.confidence);
                groups.add_row({model, std::string(), k.table, k.layer, k.head, k.metric, k.param,
                                o.group_by, group, m.n, m.mean, m.sd, m.lo, m.hi, o.confidence});
                values.push_back(v);
                n_used += m.n;
            }
            if (values.size() == 2) {
                const metrics::WelchTest w = metrics::welch_t_test(values[0], values[1]);
                tests.add_row({model, std::string(), k.table, k.layer, k.head, k.metric, k.param,
                               o.group_by, int64_t(2), std::string("welch t"), w.t, w.df,
                               std::nan(""), w.p, n_used});
            } else if (values.size() > 2) {
                const metrics::AnovaTest a = metrics::one_way_anova(values);
                tests.add_row({model, std::string(), k.table, k.layer, k.head, k.metric, k.param,
                               o.group_by, int64_t(values.size()), std::string("one-way anova F"),
                               a.f, a.df_between, a.df_within, a.p, n_used});
            }
        }
        out.tables.push_back({t::kGroups.name, std::move(groups), false});
        out.tables.push_back({t::kGroupTests.name, std::move(tests), false});
        nlohmann::json counts = nlohmann::json::object();
        for (const auto& [group, n] : sizes) counts[group] = n;
        const nlohmann::json record = {
            {"column", o.group_by},
            {"inputs_per_group", counts},
            {"interval",
             "mean -+ t((1 + level) / 2, n - 1) sd / sqrt(n) over the group's inputs (each input "
             "once, unweighted); level = --confidence"},
            {"test",
             "two groups: Welch's t-test (unequal variances, Welch-Satterthwaite df, two-sided); "
             "more: one-way ANOVA F-test (equal variances; df1 = groups - 1, df2 = inputs - "
             "groups); non-finite values left out"}};
        std::ostringstream line;
        line << "groups by " << o.group_by << ":";
        for (const auto& [group, n] : sizes)
            line << " " << (group.empty() ? "(empty)" : group) << " " << n << ",";
        std::string text = line.str();
        text.back() = ';';
        return {record, text + " means and intervals in groups.csv, tests in group_tests.csv\n"};
    }

    AnalysisContext ctx_;
    int64_t n_inputs_ = 0;
    std::map<Key, Series> series_;
};

}  // namespace

std::unique_ptr<Analysis> make_statistics(const AnalysisContext& c) {
    return std::make_unique<Statistics>(c);
}

}  // namespace sinkscope::analysis
