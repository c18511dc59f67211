// The shared analysis pipeline on attention inputs (see pipeline.hpp).
#include "sinkscope/metrics/pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/io/table.hpp"

namespace sinkscope::metrics {

namespace {
const std::vector<std::string> kP2Names = {"graphs", "topology", "kl",   "spectra",
                                           "entropy", "tokens",  "frame"};
}

const std::vector<std::string>& pipeline_analysis_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n = {"compositional", "heads"};
        n.insert(n.end(), kP2Names.begin(), kP2Names.end());
        n.push_back("value");
        return n;
    }();
    return names;
}

PipelineSelection select_analyses(const std::vector<std::string>& names, bool allow_value) {
    PipelineSelection s;
    std::vector<std::string> list = names;
    if (list.empty() || (list.size() == 1 && list[0] == "all")) {
        list = pipeline_analysis_names();
        if (!allow_value) list.pop_back();
    }
    for (const auto& n : list) {
        if (n == "compositional") {
            s.compositional = true;
        } else if (n == "heads") {
            s.heads = s.compositional = true;  // head analyses run on the distance matrices
        } else if (n == "value") {
            if (!allow_value)
                throw UsageError("--analyses value needs hidden states: run `sinkscope analyze` on a model");
            s.value = true;
        } else if (std::find(kP2Names.begin(), kP2Names.end(), n) != kP2Names.end()) {
            s.p2 = true;
            s.p2_list += (s.p2_list.empty() ? "" : ",") + n;
        } else {
            std::string known;
            for (const auto& k : pipeline_analysis_names()) known += (known.empty() ? "" : ", ") + k;
            throw UsageError("--analyses: unknown analysis '" + n + "' (known: all, " + known + ")");
        }
    }
    return s;
}

MetricsPipeline::MetricsPipeline(int64_t n_layers, int64_t n_heads, const PipelineOptions& options,
                                 bool allow_value)
    : n_layers_(n_layers),
      n_heads_(n_heads),
      options_(options),
      selection_(select_analyses(options.analyses, allow_value)) {
    if (selection_.compositional)
        head_ = std::make_unique<HeadAccumulator>(n_layers, n_heads, options.head);
    if (selection_.p2) {
        P2Options p2 = options.p2;
        p2.analyses = selection_.p2_list;
        p2.sink = options.head.sink;  // section 8 takes the same resolved sink (spec 0, 10.d)
        p2_ = std::make_unique<P2Accumulator>(p2);
    }
}

MetricsPipeline::~MetricsPipeline() = default;

void MetricsPipeline::open_sinks_file(const std::filesystem::path& path) {
    sinks_path_ = path;
    if (sinks_bytes_ > 0 && std::filesystem::exists(path) &&
        std::filesystem::file_size(path) >= sinks_bytes_) {
        std::filesystem::resize_file(path, sinks_bytes_);
        sinks_.open(path, std::ios::binary | std::ios::app);
    } else {
        if (sinks_bytes_ > 0)
            throw InputError(path.string(), "shorter than the saved state says: cannot resume");
        sinks_.open(path, std::ios::binary | std::ios::trunc);
        sinks_ << "input,layer,sink_position\n";
    }
    if (!sinks_) throw IoError(path.string(), "cannot open for writing");
}

void MetricsPipeline::set_progress(const StageProgress& fn) {
    if (head_) head_->set_progress(fn);
    if (p2_) p2_->set_progress(fn);
}

void MetricsPipeline::add(const AttentionInput& input, const std::vector<std::string>* tokens) {
    SS_CHECK(input.n_layers == n_layers_ && input.n_heads == n_heads_, "input of ", input.n_layers,
             "x", input.n_heads, " heads in a pipeline for ", n_layers_, "x", n_heads_);
    if (head_ || p2_) {
        // One resolution per input, used by the head metrics and section 8 alike and written out.
        const SinkPositions s =
            head_ ? head_->add(input, n_inputs_) : resolve_sinks(input, options_.head.sink);
        if (sinks_.is_open()) {
            sinks_ << n_inputs_ << ",-1," << s.model << "\n";
            for (int64_t l = 0; l < n_layers_; ++l)
                sinks_ << n_inputs_ << "," << l << "," << s.per_layer[l] << "\n";
        }
        if (positions_.size() < kMaxRecordedSinks)
            positions_.push_back({{"model", s.model}, {"per_layer", s.per_layer}});
        if (p2_) p2_->add(input, tokens, "attention", &s);
    }
    ++n_inputs_;
}

void MetricsPipeline::save(BinaryWriter& w) {
    if (sinks_.is_open()) {
        sinks_.flush();
        if (!sinks_) throw IoError(sinks_path_.string(), "write failed");
        sinks_bytes_ = std::filesystem::file_size(sinks_path_);
    }
    w.tag("pipeline");
    w.put(n_inputs_);
    w.put(sinks_bytes_);
    w.put_string(positions_.dump());
    w.put<bool>(head_ != nullptr);
    if (head_) head_->save(w);
    w.put<bool>(p2_ != nullptr);
    if (p2_) p2_->save(w);
}

void MetricsPipeline::load(BinaryReader& r) {
    r.expect_tag("pipeline");
    n_inputs_ = r.get<int64_t>();
    sinks_bytes_ = r.get<uint64_t>();
    positions_ = nlohmann::json::parse(r.get_string());
    if (r.get<bool>() != (head_ != nullptr)) r.fail("state was written with other analyses");
    if (head_) head_->load(r);
    if (r.get<bool>() != (p2_ != nullptr)) r.fail("state was written with other analyses");
    if (p2_) p2_->load(r);
}

void write_head_results(const HeadResults& r, const std::string& model,
                        const std::filesystem::path& dir) {
    io::Table heads = io::make_long_table();
    for (size_t k = 0; k < r.heads.size(); ++k) {
        const auto& m = r.means[k];
        const int64_t l = r.heads[k].layer, h = r.heads[k].head;
        io::add_long_row(heads, model, "", l, h, "sink_mass", "", m.sink_mass);
        io::add_long_row(heads, model, "", l, h, "sink_balance", "", m.sink_balance);
        io::add_long_row(heads, model, "", l, h, "entropy", "", m.entropy);
        io::add_long_row(heads, model, "", l, h, "binary_sink_entropy", "", m.binary_sink_entropy);
        io::add_long_row(heads, model, "", l, h, "content_entropy", "", m.content_entropy);
        io::add_long_row(heads, model, "", l, h, "n_rows", "", double(m.n_rows));
    }
    heads.write(dir, "heads");

    std::filesystem::create_directories(dir / "distances");
    io::Table dist({"distance", "layer_a", "head_a", "layer_b", "head_b", "value"});
    for (const char* name : kDistanceNames) {
        const Eigen::MatrixXd& m = r.distances.at(name);
        const int64_t n = m.rows();
        std::vector<double> values(static_cast<size_t>(n * n));
        for (int64_t a = 0; a < n; ++a)
            for (int64_t b = 0; b < n; ++b) values[size_t(a * n + b)] = m(a, b);
        io::write_npy(dir / "distances" / (std::string(name) + ".npy"),
                      io::make_npy_f64({n, n}, values));
        for (int64_t a = 0; a < n; ++a)
            for (int64_t b = a + 1; b < n; ++b)
                if (!std::isnan(m(a, b)))
                    dist.add_row({std::string(name), r.heads[a].layer, r.heads[a].head,
                                  r.heads[b].layer, r.heads[b].head, m(a, b)});
    }
    dist.write(dir, "distances", false);

    io::Table disp({"scope", "layer", "c_perp", "v_b", "rho", "n_rows"});
    for (const auto& d : r.layers)
        disp.add_row({std::string("layer"), d.layer, d.c_perp, d.v_b, d.rho, d.n_rows});
    disp.add_row({std::string("model"), int64_t(-1), r.model.c_perp, r.model.v_b, r.model.rho,
                  r.model.n_rows});
    disp.write(dir, "dispersion");
}

nlohmann::json head_results_record(const HeadResults& r) {
    const auto& c = r.counts;
    return {{"aggregation", {{"aitchison", "root mean square over rows"},
                             {"classical", "arithmetic mean over rows"},
                             {"js_units", "nats"},
                             {"dispersion_variance", "population (ddof 0)"}}},
            {"counts", {{"n_inputs", c.n_inputs},
                        {"rows_total", c.rows_total},
                        {"rows_used", c.rows_used},
                        {"rows_excluded", c.rows_excluded},
                        {"sink_not_visible", c.sink_not_visible},
                        {"rows_used_model", c.rows_used_model},
                        {"sink_not_visible_model", c.sink_not_visible_model}}},
            {"model_rho", io::json_number(r.model.rho)}};
}

void MetricsPipeline::write(const std::filesystem::path& dir, const std::string& model_name,
                            nlohmann::json& record, std::ostream& log) {
    if (sinks_.is_open()) {
        sinks_.close();
        if (!sinks_) throw IoError(sinks_path_.string(), "write failed");
    }
    record["analyses"] = {{"compositional", selection_.compositional},
                          {"heads", selection_.heads},
                          {"p2", selection_.p2 ? selection_.p2_list : ""},
                          {"value", selection_.value}};
    if (head_) {
        const HeadResults r = head_->finish();
        write_head_results(r, model_name, dir);
        record.update(head_results_record(r));
        record["min_parts"] = options_.head.min_parts;
        record["zero_policy"] = to_string(options_.head.zeros);
        record["scope"] = to_string(options_.head.scope);
        log << "compositional (spec 1-2): model rho " << r.model.rho << "; rows used "
            << r.counts.rows_used << ", excluded " << r.counts.rows_excluded
            << ", sink not visible " << r.counts.sink_not_visible << "\n";
        if (selection_.heads) {
            std::map<std::string, Eigen::MatrixXd> matrices(r.distances.begin(), r.distances.end());
            std::vector<std::pair<int, int>> labels;
            for (const auto& h : r.heads) labels.emplace_back(int(h.layer), int(h.head));
            std::vector<double> layer_rho;
            for (const auto& d : r.layers) layer_rho.push_back(d.rho);
            HeadAnalysisOptions hopts = options_.head_analyses;
            if (options_.head.scope == Scope::Layer) hopts.scope = ReversalScope::Layer;
            // Per-layer regime rows take each layer's sink for rho and flips alike (10.d).
            std::map<std::string, Eigen::MatrixXd> layer_matrices(r.layer_distances.begin(),
                                                                  r.layer_distances.end());
            HeadAnalysisResults ha =
                run_head_analyses(matrices, labels, layer_rho, r.model.rho, hopts, layer_matrices);
            write_head_analyses(ha, dir);
            record["head_analyses"] = {{"k", ha.k},
                                       {"k_selected_by_silhouette", ha.k_selected},
                                       {"triples", hopts.triples == 0 ? "exact" : std::to_string(hopts.triples)},
                                       {"seed", hopts.seed},
                                       {"scope", scope_name(hopts.scope)},
                                       {"regime_lo", hopts.regime_lo},
                                       {"regime_hi", hopts.regime_hi},
                                       {"clustering", "average linkage"},
                                       {"ties", "relative 1e-12 (spec 10.f)"}};
            log << summarize_head_analyses(ha);
        }
    }
    if (p2_) {
        const P2Results r = p2_->finish();
        write_p2_outputs(r, dir);
        record["p2"] = p2_conventions(r);
        log << summarize_p2(r);
        for (const auto& w : r.warnings) std::cerr << "sinkscope: warning: " << w << "\n";
    }
}

}  // namespace sinkscope::metrics
