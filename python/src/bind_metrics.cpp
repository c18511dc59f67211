// metrics module: every analysis of `sinkscope metrics` on numpy arrays, through the same
// pipeline (api::compute_metrics, or api::run_metrics_command when a run directory is wanted).
// The arrays are borrowed, not copied: each input is converted to fp64 when the pipeline reaches
// it, as for a memory-mapped .npy.
#include <map>
#include <sstream>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <Eigen/Core>

#include "bindings.hpp"
#include "sinkscope/api/metrics.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/cluster.hpp"

#include <nlohmann/json.hpp>

namespace sinkscope::python {

namespace {

py::dict run_to_dict(const api::MetricsRun& run, const std::string& log) {
    py::dict tables, arrays, texts, streams;
    for (const auto& [name, output] : run.results.outputs) {
        for (const auto& t : output.tables) tables[py::str(t.name)] = table_to_dict(t.table);
        for (const auto& [path, a] : output.arrays) arrays[py::str(path)] = npy_to_numpy(a);
        for (const auto& [path, text] : output.texts) texts[py::str(path)] = text;
    }
    for (const auto& [name, t] : run.streams) streams[py::str(name)] = table_to_dict(t);
    py::dict out;
    out["tables"] = tables;
    out["arrays"] = arrays;
    out["texts"] = texts;
    out["streams"] = streams;
    out["record"] = json_to_python(run.results.record);
    out["summary"] = run.results.summary + log;
    out["warnings"] = run.results.warnings;
    return out;
}

}  // namespace

void bind_metrics(py::module_& m) {
    m.def(
        "metrics",
        [](const py::array& attention, const std::optional<py::array>& scores,
           const std::optional<py::array>& lengths, const std::optional<py::array>& token_ids,
           std::vector<std::vector<std::string>> tokens, const std::string& masking, int64_t window,
           const analysis::AnalysisOptions& options, const std::string& name,
           const std::string& out, bool overwrite, bool report, py::object progress) {
            analysis::AttentionArrays arrays;
            arrays.attention = borrow(attention, "attention");
            if (scores) arrays.scores = borrow(*scores, "scores");
            if (lengths) arrays.lengths = borrow(*lengths, "lengths");
            if (token_ids) arrays.token_ids = borrow(*token_ids, "token_ids");
            arrays.masking = analysis::parse_masking(masking);
            arrays.window = window;
            const auto callback = python_callback(std::move(progress));
            api::MetricsRun run;
            std::ostringstream log;
            {
                py::gil_scoped_release release;
                if (out.empty()) {
                    run = api::compute_metrics(std::move(arrays), std::move(tokens), options, name,
                                               callback);
                } else {
                    api::MetricsCommandOptions o;
                    o.arrays = &arrays;
                    o.token_strings = std::move(tokens);
                    o.masking = masking;
                    o.window = window;
                    o.analysis = options;
                    o.name = name;
                    o.out = out;
                    o.overwrite = overwrite;
                    o.report = report;
                    o.progress = Progress::Mode::Never;
                    o.after_input = callback;
                    o.command_line = "python: sinkscope.metrics.analyze(..., out=" + out + ")";
                    run = api::run_metrics_command(o, log);
                }
            }
            return run_to_dict(run, log.str());
        },
        py::arg("attention"), py::arg("scores") = py::none(), py::arg("lengths") = py::none(),
        py::arg("token_ids") = py::none(),
        py::arg("tokens") = std::vector<std::vector<std::string>>{}, py::arg("masking") = "auto",
        py::arg("window") = 0, py::arg("options") = analysis::AnalysisOptions{},
        py::arg("name") = "array", py::arg("out") = "", py::arg("overwrite") = false,
        py::arg("report") = true, py::arg("progress") = py::none(),
        "The analyses of `sinkscope metrics` on arrays shaped (N, L, H, T, T) or (L, H, T, T).");

    // Clusterings a user names (two runs' clusters.csv, clark2019.csv, their own labels): the
    // ARI of spec 4 and the linkages of the analyses, on arrays.
    m.def(
        "adjusted_rand_index",
        [](const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
            if (a.size() != b.size())
                throw py::value_error("the two labelings have " + std::to_string(a.size()) +
                                      " and " + std::to_string(b.size()) + " items");
            std::map<int64_t, int> names;  // any integer labels, renamed densely
            auto dense = [&](const std::vector<int64_t>& v) {
                std::vector<int> out;
                for (int64_t x : v)
                    out.push_back(names.emplace(x, int(names.size())).first->second);
                return out;
            };
            return metrics::adjusted_rand_index(dense(a), dense(b));
        },
        py::arg("a"), py::arg("b"),
        "Adjusted Rand index (Hubert & Arabie 1985) of two labelings of the same items, in "
        "[-1, 1]; 1 for the same partition under any label names.");
    m.def(
        "cluster",
        [](const py::array_t<double, py::array::c_style | py::array::forcecast>& d, int k,
           const std::string& linkage) {
            if (d.ndim() != 2 || d.shape(0) != d.shape(1))
                throw py::value_error("the distance matrix must be square (n, n)");
            const auto n = Eigen::Index(d.shape(0));
            if (k < 1 || k > n)
                throw py::value_error("k must be in 1.." + std::to_string(n) + ", got " +
                                      std::to_string(k));
            Eigen::MatrixXd m = Eigen::Map<
                const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
                d.data(), n, n);
            if (!m.allFinite()) throw py::value_error("the distance matrix holds NaN or inf");
            metrics::Linkage method;
            try {
                method = metrics::parse_linkage(linkage);
            } catch (const UsageError& e) {
                throw py::value_error(e.what());
            }
            return metrics::cluster_linkage(m, k, method);
        },
        py::arg("distance"), py::arg("k"), py::arg("linkage") = "average",
        "Agglomerative clustering of an (n, n) distance matrix into k clusters (linkage average, "
        "complete, single or ward), as the head analyses do; labels 0..k-1 by first appearance.");

    m.def(
        "example_attention", [] { return npy_to_numpy(api::make_example_attention()); },
        "The deterministic example of `sinkscope metrics --example` (8, 4, 4, 16, 16) float32");
}

}  // namespace sinkscope::python
