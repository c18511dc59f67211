// The extension module: the error mapping (same one-line messages as the CLI, as Python
// exceptions) and each module's bindings.
#include "bindings.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/fs_error.hpp"
#include "sinkscope/core/limits.hpp"
#include "sinkscope/core/system.hpp"

namespace sinkscope::python {

void bind_core(py::module_& m) {
    // Bad options and bad input are ValueErrors; the file system's refusals are OSErrors; a bug
    // of sinkscope itself is a RuntimeError. Each keeps the CLI's one-line message.
    static py::exception<UsageError> usage(m, "UsageError", PyExc_ValueError);
    static py::exception<InputError> input(m, "InputError", PyExc_ValueError);
    static py::exception<UnsupportedError> unsupported(m, "UnsupportedError", PyExc_ValueError);
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const Interrupted&) {
            PyErr_SetNone(PyExc_KeyboardInterrupt);
        } catch (const CallbackFailed& e) {
            e.error->restore();
        } catch (const std::filesystem::filesystem_error& e) {
            // The CLI's line naming the path (core/fs_error.hpp), as an OSError.
            PyErr_SetString(PyExc_OSError, io_error_from(e).what());
        } catch (const Error& e) {
            PyObject* type = PyExc_RuntimeError;
            switch (e.kind()) {
                case ErrorKind::Usage:
                    type = usage.ptr();
                    break;
                case ErrorKind::Input:
                    type = input.ptr();
                    break;
                case ErrorKind::Unsupported:
                    type = unsupported.ptr();
                    break;
                case ErrorKind::Io:
                    type = PyExc_OSError;
                    break;
                case ErrorKind::Internal:
                    type = PyExc_RuntimeError;
                    break;
            }
            PyErr_SetString(type, e.what());
        }
    });
    m.def(
        "set_limit", [](const std::string& assignment) { set_limit(assignment); },
        py::arg("assignment"),
        "Sets a resource limit, \"NAME=N\" as the command line's --limit (e.g. "
        "\"array_elements=100000000000\" for a genuine array above the default).");
    m.attr("__version__") = version_string();
    m.attr("git_commit") = git_commit();
#ifdef SINKSCOPE_DEFAULT_MODEL_DIR
    m.attr("source_default_model") = SINKSCOPE_DEFAULT_MODEL_DIR;
#else
    m.attr("source_default_model") = "";
#endif
#ifdef SINKSCOPE_PYTHON_WITH_TORCH
    m.attr("with_model_runtime") = true;
#else
    m.attr("with_model_runtime") = false;
#endif
}

}  // namespace sinkscope::python

PYBIND11_MODULE(_sinkscope, m) {
    using namespace sinkscope::python;
    m.doc() = "sinkscope's C++ library (use the `sinkscope` package around it)";
    bind_core(m);
    bind_io(m);
    bind_analysis(m);
    bind_metrics(m);
#ifdef SINKSCOPE_PYTHON_WITH_TORCH
    bind_model(m);
    bind_api(m);
#endif
}
