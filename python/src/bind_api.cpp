// api module: the commands that write run directories (analyze, dynamics, prune, fisher,
// compare, dump, train), each with its option struct as the CLI binds it: same fields, defaults
// and validation, the distributed flags included. The Python package turns keyword arguments into
// these structs and reads the run directory back, or, without out=, the run's files kept in
// memory (nothing touches the disk).
#include <optional>
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
#include "sinkscope/api/train.hpp"
#include "sinkscope/core/run_files.hpp"

namespace sinkscope::python {

namespace {

// Where each command's options say "keep the run's files in memory".
std::optional<RunFiles>& memory_of(api::AnalyzeOptions& o) {
    return o.memory;
}
std::optional<RunFiles>& memory_of(api::DynamicsOptions& o) {
    return o.run.memory;
}
std::optional<RunFiles>& memory_of(api::PruneOptions& o) {
    return o.memory;
}
std::optional<RunFiles>& memory_of(api::FisherCommandOptions& o) {
    return o.memory;
}
std::optional<RunFiles>& memory_of(api::CompareOptions& o) {
    return o.memory;
}

// A run's files in memory as {relative path: bytes}.
py::dict files_to_dict(const RunFiles& files) {
    py::dict out;
    for (const auto& [path, bytes] : files.files()) out[py::str(path)] = py::bytes(bytes);
    return out;
}

// Runs `command` without the GIL with the callback set through `set`. Returns (console text,
// files): with `in_memory` the run's files as {relative path: bytes} (`out` is not written),
// else None.
template <typename Options, typename Run>
py::tuple run_command(Options& o, py::object progress, bool in_memory, Run run,
                      std::function<void(Options&, std::function<void(int64_t)>)> set) {
    set(o, python_callback(std::move(progress)));
    if (in_memory) memory_of(o) = RunFiles::in_memory();
    std::ostringstream log;
    {
        py::gil_scoped_release release;
        run(o, log);
    }
    return py::make_tuple(
        log.str(), in_memory ? py::object(files_to_dict(*memory_of(o))) : py::object(py::none()));
}

// The distributed flags of a command (--world-size, --rank, --master, --dist-timeout).
template <typename T>
void bind_dist_field(py::class_<T>& c) {
    c.def_readwrite("dist", &T::dist);
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
        .def_readwrite("widen_weights", &ModelCliOptions::widen_weights)
        .def_readwrite("over_context", &ModelCliOptions::over_context);

    py::class_<DistOptions>(m, "DistOptions")
        .def(py::init<>())
        .def_readwrite("world_size", &DistOptions::world_size)
        .def_readwrite("rank", &DistOptions::rank)
        .def_readwrite("master", &DistOptions::master)
        .def_readwrite("dist_timeout", &DistOptions::timeout_s);
    // The rank this process has once the flags and the environment (RANK, WORLD_SIZE,
    // MASTER_ADDR, MASTER_PORT) are resolved; UsageError as the command would give.
    m.def(
        "resolved_rank", [](const DistOptions& d) { return resolve_dist(d).rank; },
        py::arg("dist"));

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
        .def_readwrite("intervene", &AnalyzeOptions::intervene)
        .def_readwrite("analysis", &AnalyzeOptions::analysis)
        .def_readwrite("attention_memory_mb", &AnalyzeOptions::attention_memory_mb)
        .def_readwrite("resume", &AnalyzeOptions::resume)
        .def_readwrite("checkpoint_every", &AnalyzeOptions::checkpoint_every)
        .def_readwrite("progress", &AnalyzeOptions::progress)
        .def_readwrite("report", &AnalyzeOptions::report)
        .def_readwrite("checkpoint", &AnalyzeOptions::checkpoint)
        .def_readwrite("model_name", &AnalyzeOptions::model_name)
        .def_readwrite("split", &AnalyzeOptions::split)
        .def_readwrite("stages", &AnalyzeOptions::stages)
        .def_readwrite("command_line", &AnalyzeOptions::command_line);
    bind_model_fields(analyze);
    bind_dist_field(analyze);

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
    bind_dist_field(prune);

    py::class_<FisherCommandOptions> fisher(m, "FisherOptions");
    fisher.def(py::init<>())
        .def_readwrite("data", &FisherCommandOptions::data)
        .def_readwrite("text_column", &FisherCommandOptions::text_column)
        .def_readwrite("kind", &FisherCommandOptions::kind)
        .def_readwrite("compat", &FisherCommandOptions::compat)
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
    bind_dist_field(fisher);

    py::class_<CompareOptions>(m, "CompareOptions")
        .def(py::init<>())
        .def_readwrite("runs", &CompareOptions::runs)
        .def_readwrite("out", &CompareOptions::out)
        .def_readwrite("overwrite", &CompareOptions::overwrite)
        .def_readwrite("fit", &CompareOptions::fit)
        .def_readwrite("apply", &CompareOptions::apply)
        .def_readwrite("allow_mixed", &CompareOptions::allow_mixed)
        .def_readwrite("report", &CompareOptions::report)
        .def_readwrite("regime_outcome", &CompareOptions::regime_outcome)
        .def_readwrite("regime_statistic", &CompareOptions::regime_statistic)
        .def_readwrite("regime_channel", &CompareOptions::regime_channel)
        .def_readwrite("regime_min_width", &CompareOptions::regime_min_width)
        .def_readwrite("command_line", &CompareOptions::command_line);

    py::class_<DumpOptions> dump(m, "DumpOptions");
    dump.def(py::init<>())
        .def_readwrite("data", &DumpOptions::data)
        .def_readwrite("hooks", &DumpOptions::hooks)
        .def_readwrite("intervene", &DumpOptions::intervene)
        .def_readwrite("out", &DumpOptions::out)
        .def_readwrite("overwrite", &DumpOptions::overwrite)
        .def_readwrite("text_column", &DumpOptions::text_column)
        .def_readwrite("samples", &DumpOptions::samples)
        .def_readwrite("seed", &DumpOptions::seed)
        .def_readwrite("max_tokens", &DumpOptions::max_tokens);
    bind_model_fields(dump);

    py::class_<TrainOptions>(m, "TrainOptions")
        .def(py::init<>())
        .def_readwrite("preset", &TrainOptions::preset)
        .def_readwrite("config", &TrainOptions::config)
        .def_readwrite("text", &TrainOptions::text)
        .def_readwrite("out", &TrainOptions::out)
        .def_readwrite("steps", &TrainOptions::steps)
        .def_readwrite("checkpoint_every", &TrainOptions::checkpoint_every)
        .def_readwrite("vocab", &TrainOptions::vocab)
        .def_readwrite("attention_function", &TrainOptions::attention_function)
        .def_readwrite("kv_bias", &TrainOptions::kv_bias)
        .def_readwrite("no_bos", &TrainOptions::no_bos)
        .def_readwrite("seed", &TrainOptions::seed)
        .def_readwrite("threads", &TrainOptions::threads)
        .def_readwrite("sink_eps", &TrainOptions::sink_eps)
        .def_readwrite("resume", &TrainOptions::resume)
        .def_readwrite("overwrite", &TrainOptions::overwrite)
        .def_readwrite("progress", &TrainOptions::progress)
        .def_readwrite("command_line", &TrainOptions::command_line);

    // Each runs without the GIL; `progress(done)` (or None) is called after each unit, and
    // Ctrl-C raises KeyboardInterrupt there. Returns (console text, files): with `in_memory`
    // the run's files {relative path: bytes} and nothing written, else None.
    m.def(
        "run_analyze",
        [](AnalyzeOptions o, py::object progress, bool in_memory) {
            return run_command<AnalyzeOptions>(
                o, std::move(progress), in_memory, [](auto& x, auto& log) { run_analyze(x, log); },
                [](AnalyzeOptions& x, auto cb) { x.after_input = std::move(cb); });
        },
        py::arg("options"), py::arg("progress") = py::none(), py::arg("in_memory") = false);
    m.def(
        "run_dynamics",
        [](DynamicsOptions o, py::object progress, bool in_memory) {
            return run_command<DynamicsOptions>(
                o, std::move(progress), in_memory, [](auto& x, auto& log) { run_dynamics(x, log); },
                [](DynamicsOptions& x, auto cb) { x.after_checkpoint = std::move(cb); });
        },
        py::arg("options"), py::arg("progress") = py::none(), py::arg("in_memory") = false);
    m.def(
        "run_prune",
        [](PruneOptions o, py::object progress, bool in_memory) {
            return run_command<PruneOptions>(
                o, std::move(progress), in_memory, [](auto& x, auto& log) { run_prune(x, log); },
                [](PruneOptions& x, auto cb) { x.after_point = std::move(cb); });
        },
        py::arg("options"), py::arg("progress") = py::none(), py::arg("in_memory") = false);
    m.def(
        "run_fisher",
        [](FisherCommandOptions o, py::object progress, bool in_memory) {
            return run_command<FisherCommandOptions>(
                o, std::move(progress), in_memory, [](auto& x, auto& log) { run_fisher(x, log); },
                [](FisherCommandOptions& x, auto cb) { x.after_sample = std::move(cb); });
        },
        py::arg("options"), py::arg("progress") = py::none(), py::arg("in_memory") = false);
    m.def(
        "run_compare",
        [](CompareOptions o, py::object progress, bool in_memory) {
            return run_command<CompareOptions>(
                o, std::move(progress), in_memory,
                [](auto& x, auto& log) { run_compare_command(x, log); },
                [](CompareOptions&, auto) {});  // compare has no units to report
        },
        py::arg("options"), py::arg("progress") = py::none(), py::arg("in_memory") = false);
    // Writes the training run into options.out (checkpoints are files other commands load);
    // `progress(steps done)`. Returns the console text.
    m.def(
        "run_train",
        [](TrainOptions o, py::object progress) {
            o.after_step = python_callback(std::move(progress));
            std::ostringstream log;
            py::gil_scoped_release release;
            run_train(o, log);
            return log.str();
        },
        py::arg("options"), py::arg("progress") = py::none());
    m.def(
        "run_dump",
        [](DumpOptions o) {
            py::gil_scoped_release release;
            return dump_hooks(o);
        },
        py::arg("options"));
}

}  // namespace sinkscope::python
