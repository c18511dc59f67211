// The pybind11 extension `sinkscope._sinkscope`: one binding file per library module (DESIGN.md:
// thin bindings over api and metrics, no math here). This header holds what they share: how
// numpy arrays become the library's borrowed views, how results become numpy arrays and dicts,
// and the callback that lets Python see progress and Ctrl-C while the GIL is released.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <nlohmann/json.hpp>

#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/npy_map.hpp"
#include "sinkscope/io/table.hpp"

namespace sinkscope::python {
namespace py = pybind11;

// Thrown by a callback when Python has a pending KeyboardInterrupt (Ctrl-C): it unwinds the
// library call like any error (staged outputs are removed, a resumable run keeps its state) and
// becomes KeyboardInterrupt again at the boundary.
struct Interrupted : std::exception {
    const char* what() const noexcept override { return "interrupted"; }
};

// A Python exception raised inside a callback (the user's progress function), carried through
// the library call and re-raised at the boundary.
struct CallbackFailed : std::exception {
    std::shared_ptr<py::error_already_set> error;
    const char* what() const noexcept override { return "Python callback failed"; }
};

// An after-each-unit callback for the api (after_input, after_point, ...), called without the
// GIL: takes the GIL, checks for Ctrl-C (Interrupted) and calls `progress(done)` when given.
std::function<void(int64_t)> python_callback(py::object progress);

// Borrows a numpy array as a view (no copy): float16/32/64 or int32/64 in native (little-endian)
// byte order, any strides. `array` must outlive the view. ValueError naming `what` otherwise.
std::unique_ptr<io::NpyMap> borrow(const py::array& array, const std::string& what);

// Results as Python objects: a table as {column: numpy array} (int64, float64, or object when a
// column holds text), an NpyArray as a numpy array (copied: results are small).
py::dict table_to_dict(const io::Table& table);
py::array npy_to_numpy(const io::NpyArray& array);
// nlohmann::json text as Python objects (through the json module).
py::object json_to_python(const std::string& dumped);
// The same without the text, to the same objects: dicts, lists, int, float, and None for null
// and for a non-finite number (dump() writes null).
py::object json_to_python(const nlohmann::json& j);

// One binding function per module.
void bind_core(py::module_& m);
void bind_analysis(py::module_& m);
void bind_metrics(py::module_& m);
void bind_io(py::module_& m);
#ifdef SINKSCOPE_PYTHON_WITH_TORCH
void bind_model(py::module_& m);
void bind_api(py::module_& m);
#endif

}  // namespace sinkscope::python
