// The compositional analysis (spec 1-2): per-head sink/content means, head distance matrices and
// dispersion, streamed through metrics::HeadAccumulator. Tables heads, distances, dispersion;
// arrays distances/<name>.npy; its HeadResults feed the head-level analyses.
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>

#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/metrics/head.hpp"

namespace sinkscope::analysis {

namespace {

namespace t = tables;

// Three significant digits, for console lines (the tables hold every digit).
std::string sig3(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
}

// The per-row quantities of one head, as heads.csv names them (its summary rows and the
// --per-input rows write the same list).
std::array<std::pair<const char*, double>, 7> row_metrics(const metrics::HeadMeans& m) {
    return {{{t::metric::kSinkMass, m.sink_mass},
             {t::metric::kSinkBalance, m.sink_balance},
             {t::metric::kEntropy, m.entropy},
             {t::metric::kBinarySinkEntropy, m.binary_sink_entropy},
             {t::metric::kContentEntropyRenorm, m.content_entropy},
             {t::metric::kContentEntropyWeighted, m.content_entropy_weighted},
             {t::metric::kContentConcentration, m.content_concentration}}};
}

// distances.csv: every pair a < b of heads for each distance of kDistanceNames, NaN pairs left
// out. Generated while it is written (4.7 million rows for 1,024 heads), from the results it
// shares with the analyses after this one (no copy of the matrices: 72 MB for 1,024 heads).
io::Table distances_table(std::shared_ptr<const metrics::HeadResults> r) {
    std::vector<const Eigen::MatrixXd*> matrices;  // kDistanceNames order
    size_t n_rows = 0;
    for (const char* name : metrics::kDistanceNames) {
        const Eigen::MatrixXd& m = r->distances.at(name);
        for (int64_t a = 0; a < m.rows(); ++a)
            for (int64_t b = a + 1; b < m.cols(); ++b) n_rows += std::isnan(m(a, b)) ? 0 : 1;
        matrices.push_back(&m);
    }
    // The cells, for rows() and for_each_row: a cursor over (distance, a, b), b fastest.
    auto cells = [r, matrices] {
        return [r, matrices, d = size_t(0), a = int64_t(0),
                b = int64_t(0)](std::vector<io::Cell>& cells) mutable {
            for (; d < matrices.size(); ++d, a = 0, b = 0) {
                const Eigen::MatrixXd& m = *matrices[d];
                for (; a < m.rows(); ++a, b = a + 1) {
                    if (b <= a) b = a + 1;
                    for (; b < m.cols(); ++b) {
                        if (std::isnan(m(a, b))) continue;
                        const auto& ha = r->heads[size_t(a)];
                        const auto& hb = r->heads[size_t(b)];
                        cells[0] = std::string(metrics::kDistanceNames[d]);
                        cells[1] = ha.layer;
                        cells[2] = ha.head;
                        cells[3] = hb.layer;
                        cells[4] = hb.head;
                        cells[5] = m(a, b);
                        ++b;
                        return true;
                    }
                }
            }
            return false;
        };
    };
    // The same rows as CSV text, the pairs of one head a a call, with each head's
    // "layer,head" formatted once: the file is written from this (0.5-1 s less CPU at 1,024
    // heads than formatting 28 million cells; bench/README.md).
    auto labels = std::make_shared<std::vector<std::string>>();
    for (const auto& h : r->heads) {
        std::string l;
        io::append_csv_number(l, int64_t(h.layer));
        l += ',';
        io::append_csv_number(l, int64_t(h.head));
        labels->push_back(std::move(l));
    }
    auto text = [r, matrices, labels] {
        return [r, matrices, labels, d = size_t(0), a = int64_t(0)](std::string& out) mutable {
            for (; d < matrices.size(); ++d, a = 0) {
                const Eigen::MatrixXd& m = *matrices[d];
                if (a >= m.rows()) continue;
                std::string prefix = metrics::kDistanceNames[d];
                prefix += ',';
                prefix += (*labels)[size_t(a)];
                prefix += ',';
                for (int64_t b = a + 1; b < m.cols(); ++b) {
                    if (std::isnan(m(a, b))) continue;
                    out += prefix;
                    out += (*labels)[size_t(b)];
                    out += ',';
                    io::append_csv_number(out, m(a, b));
                    out += '\n';
                }
                ++a;
                return true;
            }
            return false;
        };
    };
    return io::Table::generated(t::kDistances.columns, n_rows, std::move(cells), std::move(text));
}

class Compositional final : public Analysis {
public:
    explicit Compositional(const AnalysisContext& c)
        : ctx_(c), acc_(c.n_layers, c.n_heads, head_options(c)) {}

    void add(const InputView& in, PerInputValues* per_input) override {
        std::vector<metrics::HeadMeans> means;
        acc_.add(*in.attention, in.index, in.sinks, per_input ? &means : nullptr);
        if (!per_input) return;
        for (size_t r = 0; r < means.size(); ++r) {
            const auto& m = means[r];
            if (m.n_rows == 0) continue;  // no row of this head entered the summary
            const int64_t l = int64_t(r) / ctx_.n_heads, h = int64_t(r) % ctx_.n_heads;
            const double w = double(m.n_rows);
            for (auto [metric, v] : row_metrics(m))
                per_input->push_back({t::kHeads.name, l, h, metric, "", v, w});
        }
    }
    void merge(const Analysis& other) override {
        acc_.merge(dynamic_cast<const Compositional&>(other).acc_);
    }
    void save(BinaryWriter& w) const override { acc_.save(w); }
    void load(BinaryReader& r) override { acc_.load(r); }
    void set_progress(const StageProgress& fn) override { acc_.set_progress(fn); }

    AnalysisOutput finish(const FinishContext&) override {
        // Shared by distances.csv (written later) and the head-level analyses (out.result).
        const auto shared = std::make_shared<const metrics::HeadResults>(acc_.finish());
        const metrics::HeadResults& r = *shared;
        AnalysisOutput out;
        out.tables.push_back({t::kHeads.name, heads_table(r), true});
        io::Table by_position(t::kSinkByPosition.columns);
        for (const auto& p : r.by_position)
            by_position.add_row({p.layer, p.position, p.sink_mass, p.n_rows});
        out.tables.push_back({t::kSinkByPosition.name, std::move(by_position), false});
        for (const char* name : metrics::kDistanceNames) {
            const Eigen::MatrixXd& m = r.distances.at(name);
            const int64_t n = m.rows();
            std::vector<double> values(static_cast<size_t>(n * n));
            for (int64_t a = 0; a < n; ++a)
                for (int64_t b = 0; b < n; ++b) values[size_t(a * n + b)] = m(a, b);
            out.arrays.emplace_back("distances/" + std::string(name) + ".npy",
                                    io::make_npy_f64({n, n}, values));
        }
        io::Table dist = distances_table(shared);
        out.tables.push_back({t::kDistances.name, std::move(dist), false});
        io::Table disp(t::kDispersion.columns);
        for (const auto& d : r.layers)
            disp.add_row({std::string("layer"), d.layer, d.c_perp, d.v_b, d.rho, d.n_rows});
        disp.add_row({std::string("model"), int64_t(-1), r.model.c_perp, r.model.v_b, r.model.rho,
                      r.model.n_rows});
        out.tables.push_back({t::kDispersion.name, std::move(disp), true});

        const auto& c = r.counts;
        const auto& o = ctx_.options->head;
        out.record = {{"aggregation",
                       {{"aitchison", "root mean square over rows"},
                        {"classical", "arithmetic mean over rows"},
                        {"js_units", "nats"},
                        {"dispersion_variance", "population (ddof 0)"}}},
                      {"counts",
                       {{"n_inputs", c.n_inputs},
                        {"rows_total", c.rows_total},
                        {"rows_used", c.rows_used},
                        {"rows_excluded", c.rows_excluded},
                        {"sink_not_visible", c.sink_not_visible},
                        {"rows_used_model", c.rows_used_model},
                        {"sink_not_visible_model", c.sink_not_visible_model}}},
                      {"model_rho", io::json_number(r.model.rho)},
                      {"min_parts", o.min_parts},
                      {"zero_policy", metrics::to_string(o.zeros)},
                      {"scope", metrics::to_string(o.scope)}};
        std::ostringstream s;
        s << "compositional: model rho " << sig3(r.model.rho) << "; rows used " << c.rows_used
          << ", excluded " << c.rows_excluded << ", sink not visible " << c.sink_not_visible
          << " (definitions: docs/metrics.md)\n";
        // The central number: per layer, the heads' mean sink mass (heads.csv sink_mass, each
        // head's mean over its rows with >= min_parts visible keys that see the sink).
        s << "  sink mass per layer (heads.csv sink_mass, mean over heads):";
        for (int64_t l = 0; l < r.n_layers; ++l) {
            double sum = 0;
            int64_t n = 0;
            for (size_t k = 0; k < r.heads.size(); ++k)
                if (r.heads[k].layer == l && r.means[k].n_rows > 0)
                    sum += r.means[k].sink_mass, ++n;
            s << " " << (n > 0 ? sig3(sum / double(n)) : std::string("n/a"));
        }
        s << "\n";
        out.summary = s.str();
        out.set_result(kCompositionalResult, shared);
        return out;
    }

private:
    static metrics::HeadOptions head_options(const AnalysisContext& c) {
        metrics::HeadOptions o = c.options->head;
        o.origin = c.origin;
        return o;
    }
    io::Table heads_table(const metrics::HeadResults& r) const {
        io::Table heads(t::kHeads.columns);
        const std::string& model = ctx_.model_name;
        for (size_t k = 0; k < r.heads.size(); ++k) {
            const auto& m = r.means[k];
            const int64_t l = r.heads[k].layer, h = r.heads[k].head;
            auto add = [&](const char* metric, double v) {
                heads.add_row({model, std::string(), l, h, std::string(metric), std::string(), v});
            };
            for (auto [metric, v] : row_metrics(m)) add(metric, v);
            add(t::metric::kNRows, double(m.n_rows));
        }
        return heads;
    }

    AnalysisContext ctx_;
    metrics::HeadAccumulator acc_;
};

}  // namespace

// compare: the unweighted mean over the model's heads of heads.csv sink_mass, and rho (spec 2)
// of the model row of dispersion.csv.
void compositional_compare_values(const RunFiles& dir, std::vector<RunValue>& out) {
    if (RunTable h(dir, t::kHeads.name); h.present()) {
        double sum = 0;
        int64_t n = 0;
        for (size_t i = 0; i < h.size(); ++i)
            if (h.text(i, "metric") == t::metric::kSinkMass && h.num(i, "layer") >= 0 &&
                h.num(i, "head") >= 0) {
                sum += h.num(i, "value");
                ++n;
            }
        if (n > 0) out.push_back({-1, t::metric::kSinkMass, "mean over heads", sum / double(n)});
    }
    if (RunTable d(dir, t::kDispersion.name); d.present())
        for (size_t i = 0; i < d.size(); ++i)
            if (d.text(i, "scope") == "model") {
                out.push_back({-1, "rho", "", d.num(i, "rho")});
                out.push_back({-1, "v_b", "", d.num(i, "v_b")});
            }
}

std::unique_ptr<Analysis> make_compositional(const AnalysisContext& c) {
    return std::make_unique<Compositional>(c);
}

}  // namespace sinkscope::analysis
