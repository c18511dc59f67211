// analysis module: the options every analysis reads (analysis::AnalysisOptions, the struct the
// CLI binds, one attribute per option spec), so Python keywords have the CLI's names, defaults
// and validation; the registry.
#include <pybind11/stl.h>

#include <string>
#include <type_traits>
#include <variant>

#include "bindings.hpp"
#include "sinkscope/analysis/options.hpp"
#include "sinkscope/analysis/registry.hpp"

#include <nlohmann/json.hpp>

namespace sinkscope::python {

void bind_analysis(py::module_& m) {
    using analysis::AnalysisOptions;
    using analysis::OptionValue;
    // One attribute per option of analysis::option_specs(), named by its key (the CLI flag with
    // '_' for '-', run.json's key), read and written through the spec, so a new option is a
    // keyword without an edit here.
    auto cls = py::class_<AnalysisOptions>(m, "AnalysisOptions").def(py::init<>());
    const AnalysisOptions defaults;
    for (const analysis::OptionSpec& spec : analysis::option_specs()) {
        auto get = spec.get;
        auto set = spec.set;
        const OptionValue def = spec.get(defaults);
        const std::string key = spec.key;
        cls.def_property(
            spec.key.c_str(),
            [get](const AnalysisOptions& o) {
                return std::visit([](const auto& v) { return py::cast(v); },
                                  static_cast<const OptionValue::variant&>(get(o)));
            },
            [set, def, key](AnalysisOptions& o, const py::object& value) {
                std::visit(
                    [&](const auto& d) {
                        using T = std::decay_t<decltype(d)>;
                        T v;
                        try {
                            v = value.cast<T>();
                        } catch (const py::cast_error&) {
                            throw py::type_error("analysis option " + key + ": " +
                                                 std::string(py::str(value.get_type())) +
                                                 " is not its type");
                        }
                        set(o, OptionValue(std::move(v)));
                    },
                    static_cast<const OptionValue::variant&>(def));
            },
            spec.help.c_str());
    }
    cls.def(
        "to_dict",
        [](const AnalysisOptions& o) { return json_to_python(analysis::to_json(o).dump()); },
        "The options as run.json records them");

    m.def(
        "analysis_names",
        [] {
            std::vector<std::tuple<std::string, std::string, bool, bool>> out;
            for (const auto& info : analysis::registry())
                out.emplace_back(info.name, info.description, info.in_all,
                                 info.needs.model_vectors());
            return out;
        },
        "(name, description, runs in 'all', needs a model) of every analysis, in run order");
}

}  // namespace sinkscope::python
