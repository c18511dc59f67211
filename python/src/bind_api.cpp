// api module: the commands that write run directories (analyze, dynamics, prune, fisher,
// compare, dump), each with its option struct as the CLI binds it: same fields, defaults and
// validation. The Python package turns keyword arguments into these structs and reads the run
// directory back.
#include <sstream>

#include <pybind11/functional.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "bindings.hpp"
#include "sinkscope/api/analyze.hpp"
#include "sinkscope/api/compare.hpp"
#include "sinkscope/api/dynamics.hpp"
#include "sinkscope/api/fisher.hpp"
#include "sinkscope/api/model_commands.hpp"
#include "sinkscope/api/prune.hpp"

namespace sinkscope::python {

namespace {

// Runs `command` without the GIL with the callback set through `set`, returns its console text.
template <typename Options, typename Run>
std::string run_command(Options& o, py::object progress, Run run,
                        std::function<void(Options&, std::function<void(int64_t)>)> set) {
    set(o, python_callback(std::move(progress)));
    std::ostringstream log;
    py::gil_scoped_release release;
    run(o, log);
    return log.str();
}

template <typename T>
void bind_model_fields(py::class_<T>& c) {
    c.def_readwrite("m", &T::m);
}

}  // namespace

void bind_api(py::module_& m) {
    using namespace api;
    py::class_<ModelCliOptions>(m, "ModelCliOptions")
        .def(py::init<>())
        .def_readwrite("model", &ModelCliOptions::model)
        .def_readwrite("device", &ModelCliOptions::device)
        .def_readwrite("dtype", &ModelCliOptions::dtype)
        .def_readwrite("tokenizer", &ModelCliOptions::tokenizer)
        .def_readwrite("bos", &ModelCliOptions::bos)
        .def_readwrite("threads", &ModelCliOptions::threads)
        .def_readwrite("over_context", &ModelCliOptions::over_context);

    py::class_<AnalyzeOptions> analyze(m, "AnalyzeOptions");
    analyze.def(py::init<>())
        .def_readwrite("data", &AnalyzeOptions::data)
        .def_readwrite("text_column", &AnalyzeOptions::text_column)
        .def_readwrite("keep_columns", &AnalyzeOptions::keep_columns)
        .def_readwrite("out", &AnalyzeOptions::out)
        .def_readwrite("overwrite", &AnalyzeOptions::overwrite)
        .def_readwrite("max_tokens", &AnalyzeOptions::max_tokens)
        .def_readwrite("samples", &AnalyzeOptions::samples)
        .def_readwrite("layers", &AnalyzeOptions::layers)
        .def_readwrite("analysis", &AnalyzeOptions::analysis)
        .def_readwrite("attention_memory_mb", &AnalyzeOptions::attention_memory_mb)
        .def_readwrite("resume", &AnalyzeOptions::resume)
        .def_readwrite("checkpoint_every", &AnalyzeOptions::checkpoint_every)
        .def_readwrite("progress", &AnalyzeOptions::progress)
        .def_readwrite("report", &AnalyzeOptions::report)
        .def_readwrite("checkpoint", &AnalyzeOptions::checkpoint)
        .def_readwrite("model_name", &AnalyzeOptions::model_name)
        .def_readwrite("command_line", &AnalyzeOptions::command_line);
    bind_model_fields(analyze);

    py::class_<DynamicsOptions>(m, "DynamicsOptions")
        .def(py::init<>())
        .def_readwrite("checkpoints", &DynamicsOptions::manifest)
        .def_readwrite("run", &DynamicsOptions::run)
        .def_readwrite("checkpoint_reports", &DynamicsOptions::checkpoint_reports);

    py::class_<PruneOptions> prune(m, "PruneOptions");
    prune.def(py::init<>())
        .def_readwrite("calib", &PruneOptions::calib)
        .def_readwrite("eval", &PruneOptions::eval)
        .def_readwrite("text_column", &PruneOptions::text_column)
        .def_readwrite("channels", &PruneOptions::channels)
        .def_readwrite("sparsity", &PruneOptions::sparsity)
        .def_readwrite("ablation", &PruneOptions::ablation)
        .def_readwrite("budget", &PruneOptions::budget)
        .def_readwrite("random_seeds", &PruneOptions::random_seeds)
        .def_readwrite("seed", &PruneOptions::seed)
        .def_readwrite("max_tokens", &PruneOptions::max_tokens)
        .def_readwrite("calib_samples", &PruneOptions::calib_samples)
        .def_readwrite("eval_samples", &PruneOptions::eval_samples)
        .def_readwrite("out", &PruneOptions::out)
        .def_readwrite("overwrite", &PruneOptions::overwrite)
        .def_readwrite("resume", &PruneOptions::resume)
        .def_readwrite("progress", &PruneOptions::progress)
        .def_readwrite("command_line", &PruneOptions::command_line);
    bind_model_fields(prune);

    py::class_<FisherCommandOptions> fisher(m, "FisherOptions");
    fisher.def(py::init<>())
        .def_readwrite("data", &FisherCommandOptions::data)
        .def_readwrite("text_column", &FisherCommandOptions::text_column)
        .def_readwrite("kind", &FisherCommandOptions::kind)
        .def_readwrite("samples", &FisherCommandOptions::samples)
        .def_readwrite("draws", &FisherCommandOptions::draws)
        .def_readwrite("seed", &FisherCommandOptions::seed)
        .def_readwrite("mask_rate", &FisherCommandOptions::mask_rate)
        .def_readwrite("max_tokens", &FisherCommandOptions::max_tokens)
        .def_readwrite("out", &FisherCommandOptions::out)
        .def_readwrite("overwrite", &FisherCommandOptions::overwrite)
        .def_readwrite("resume", &FisherCommandOptions::resume)
        .def_readwrite("checkpoint_every", &FisherCommandOptions::checkpoint_every)
        .def_readwrite("progress", &FisherCommandOptions::progress)
        .def_readwrite("command_line", &FisherCommandOptions::command_line);
    bind_model_fields(fisher);

    py::class_<CompareOptions>(m, "CompareOptions")
        .def(py::init<>())
        .def_readwrite("runs", &CompareOptions::runs)
        .def_readwrite("out", &CompareOptions::out)
        .def_readwrite("overwrite", &CompareOptions::overwrite)
        .def_readwrite("fit", &CompareOptions::fit)
        .def_readwrite("apply", &CompareOptions::apply)
        .def_readwrite("allow_mixed", &CompareOptions::allow_mixed)
        .def_readwrite("report", &CompareOptions::report)
        .def_readwrite("command_line", &CompareOptions::command_line);

    py::class_<DumpOptions> dump(m, "DumpOptions");
    dump.def(py::init<>())
        .def_readwrite("data", &DumpOptions::data)
        .def_readwrite("hooks", &DumpOptions::hooks)
        .def_readwrite("out", &DumpOptions::out)
        .def_readwrite("overwrite", &DumpOptions::overwrite)
        .def_readwrite("text_column", &DumpOptions::text_column)
        .def_readwrite("samples", &DumpOptions::samples)
        .def_readwrite("seed", &DumpOptions::seed)
        .def_readwrite("max_tokens", &DumpOptions::max_tokens);
    bind_model_fields(dump);

    // Each runs without the GIL; `progress(done)` (or None) is called after each unit, and
    // Ctrl-C raises KeyboardInterrupt there. Returns the console text.
    m.def(
        "run_analyze",
        [](AnalyzeOptions o, py::object progress) {
            return run_command<AnalyzeOptions>(
                o, std::move(progress), [](auto& x, auto& log) { run_analyze(x, log); },
                [](AnalyzeOptions& x, auto cb) { x.after_input = std::move(cb); });
        },
        py::arg("options"), py::arg("progress") = py::none());
    m.def(
        "run_dynamics",
        [](DynamicsOptions o, py::object progress) {
            return run_command<DynamicsOptions>(
                o, std::move(progress), [](auto& x, auto& log) { run_dynamics(x, log); },
                [](DynamicsOptions& x, auto cb) { x.after_checkpoint = std::move(cb); });
        },
        py::arg("options"), py::arg("progress") = py::none());
    m.def(
        "run_prune",
        [](PruneOptions o, py::object progress) {
            return run_command<PruneOptions>(
                o, std::move(progress), [](auto& x, auto& log) { run_prune(x, log); },
                [](PruneOptions& x, auto cb) { x.after_point = std::move(cb); });
        },
        py::arg("options"), py::arg("progress") = py::none());
    m.def(
        "run_fisher",
        [](FisherCommandOptions o, py::object progress) {
            return run_command<FisherCommandOptions>(
                o, std::move(progress), [](auto& x, auto& log) { run_fisher(x, log); },
                [](FisherCommandOptions& x, auto cb) { x.after_sample = std::move(cb); });
        },
        py::arg("options"), py::arg("progress") = py::none());
    m.def(
        "run_compare",
        [](CompareOptions o) {
            std::ostringstream log;
            py::gil_scoped_release release;
            run_compare_command(o, log);
            return log.str();
        },
        py::arg("options"));
    m.def(
        "run_dump",
        [](DumpOptions o) {
            py::gil_scoped_release release;
            return dump_hooks(o);
        },
        py::arg("options"));
}

}  // namespace sinkscope::python
