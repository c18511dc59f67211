// analysis module: the options every analysis reads (analysis::AnalysisOptions, the struct the
// CLI binds), so Python keywords have the CLI's names, defaults and validation; the registry.
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "sinkscope/analysis/options.hpp"
#include "sinkscope/analysis/registry.hpp"

#include <nlohmann/json.hpp>

namespace sinkscope::python {

void bind_analysis(py::module_& m) {
    using analysis::AnalysisOptions;
    // Attribute names are the CLI flags' (dashes as underscores); the effective-density band
    // and the frame constants live in a nested struct in C++.
    py::class_<AnalysisOptions>(m, "AnalysisOptions")
        .def(py::init<>())
        .def_readwrite("analyses", &AnalysisOptions::analyses)
        .def_readwrite("sink", &AnalysisOptions::sink)
        .def_readwrite("bos_id", &AnalysisOptions::bos_id)
        .def_readwrite("zeros", &AnalysisOptions::zeros)
        .def_readwrite("min_parts", &AnalysisOptions::min_parts)
        .def_readwrite("scope", &AnalysisOptions::scope)
        .def_readwrite("k", &AnalysisOptions::k)
        .def_readwrite("triples", &AnalysisOptions::triples)
        .def_readwrite("seed", &AnalysisOptions::seed)
        .def_readwrite("regime_lo", &AnalysisOptions::regime_lo)
        .def_readwrite("regime_hi", &AnalysisOptions::regime_hi)
        .def_readwrite("compat", &AnalysisOptions::compat)
        .def_readwrite("per_head", &AnalysisOptions::per_head)
        .def_readwrite("symmetrize", &AnalysisOptions::symmetrize)
        .def_readwrite("kl_rows", &AnalysisOptions::kl_rows)
        .def_readwrite("topology_max_tokens", &AnalysisOptions::topology_max_tokens)
        .def_property(
            "graph_thresholds",
            [](const AnalysisOptions& o) { return o.constants.graph_thresholds; },
            [](AnalysisOptions& o, std::vector<double> v) { o.constants.graph_thresholds = v; })
        .def_property(
            "sink_percentiles",
            [](const AnalysisOptions& o) { return o.constants.sink_percentiles; },
            [](AnalysisOptions& o, std::vector<double> v) { o.constants.sink_percentiles = v; })
        .def_property(
            "effective_density",
            [](const AnalysisOptions& o) {
                return std::make_pair(o.constants.effective_density_lo,
                                      o.constants.effective_density_hi);
            },
            [](AnalysisOptions& o, std::pair<double, double> v) {
                o.constants.effective_density_lo = v.first;
                o.constants.effective_density_hi = v.second;
            })
        .def_property(
            "long_bar", [](const AnalysisOptions& o) { return o.constants.long_bar; },
            [](AnalysisOptions& o, double v) { o.constants.long_bar = v; })
        .def_property(
            "specialised_share",
            [](const AnalysisOptions& o) { return o.constants.specialised_share; },
            [](AnalysisOptions& o, double v) { o.constants.specialised_share = v; })
        .def_property(
            "specialised_min_inputs",
            [](const AnalysisOptions& o) { return o.constants.specialised_min_inputs; },
            [](AnalysisOptions& o, int64_t v) { o.constants.specialised_min_inputs = v; })
        .def_property(
            "frame_share_first",
            [](const AnalysisOptions& o) { return o.constants.centralized_share_first; },
            [](AnalysisOptions& o, double v) { o.constants.centralized_share_first = v; })
        .def_property(
            "frame_max_reference_count",
            [](const AnalysisOptions& o) { return o.constants.centralized_max_reference_count; },
            [](AnalysisOptions& o, double v) { o.constants.centralized_max_reference_count = v; })
        .def_readwrite("reference_threshold", &AnalysisOptions::reference_threshold)
        .def_readwrite("reference_fallback", &AnalysisOptions::reference_fallback_fraction)
        .def_readwrite("reference_cap", &AnalysisOptions::reference_cap_fraction)
        .def_readwrite("sink_eps", &AnalysisOptions::sink_eps)
        .def_readwrite("sink_eps_key", &AnalysisOptions::sink_eps_key)
        .def_readwrite("per_input", &AnalysisOptions::per_input)
        .def_readwrite("bootstrap", &AnalysisOptions::bootstrap)
        .def_readwrite("confidence", &AnalysisOptions::confidence)
        .def_readwrite("group_by", &AnalysisOptions::group_by)
        .def_readwrite("threads", &AnalysisOptions::threads)
        .def(
            "to_dict",
            [](const AnalysisOptions& o) { return json_to_python(analysis::to_json(o).dump()); },
            "The options as run.json records them");

    m.def(
        "analysis_names",
        [] {
            std::vector<std::tuple<std::string, std::string, bool, bool>> out;
            for (const auto& info : analysis::registry())
                out.emplace_back(info.name, info.description, info.in_all,
                                 info.needs.hidden_states);
            return out;
        },
        "(name, description, runs in 'all', needs a model) of every analysis, in run order");
}

}  // namespace sinkscope::python
