// Conversions between numpy / Python objects and the library's arrays, tables and callbacks.
#include <cstdint>
#include <cstring>
#include <string>
#include <variant>

#include "bindings.hpp"
#include "sinkscope/core/limits.hpp"

namespace sinkscope::python {
using namespace pybind11::literals;

std::function<void(int64_t)> python_callback(py::object progress) {
    // The function object may be copied and destroyed on a thread without the GIL: the Python
    // callable is held by a shared pointer whose deleter takes the GIL.
    auto held = std::shared_ptr<py::object>(new py::object(std::move(progress)), [](py::object* p) {
        py::gil_scoped_acquire gil;
        delete p;
    });
    return [held](int64_t done) {
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) {
            // The pending exception (KeyboardInterrupt from the default SIGINT handler, or what
            // a user's signal handler raised) is dropped here and raised again at the boundary.
            PyErr_Clear();
            throw Interrupted();
        }
        if (held->is_none()) return;
        try {
            (*held)(done);
        } catch (py::error_already_set& e) {
            if (e.matches(PyExc_KeyboardInterrupt)) throw Interrupted();
            CallbackFailed failed;
            failed.error = std::make_shared<py::error_already_set>(std::move(e));
            throw failed;
        }
    };
}

std::unique_ptr<io::NpyMap> borrow(const py::array& a, const std::string& what) {
    const py::dtype dt = a.dtype();
    const char kind = dt.kind();
    const auto size = dt.itemsize();
    if (dt.byteorder() == '>')
        throw py::value_error(what + ": big-endian arrays are not supported (use " +
                              "array.astype(array.dtype.newbyteorder('='))");
    io::DType t;
    if (kind == 'f' && size == 2)
        t = io::DType::F16;
    else if (kind == 'f' && size == 4)
        t = io::DType::F32;
    else if (kind == 'f' && size == 8)
        t = io::DType::F64;
    else if (kind == 'i' && size == 4)
        t = io::DType::I32;
    else if (kind == 'i' && size == 8)
        t = io::DType::I64;
    else
        throw py::value_error(what + ": dtype " + dt.attr("name").cast<std::string>() +
                              " is not supported (float16, float32, float64, int32 or int64)");
    std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
    std::vector<int64_t> strides(a.strides(), a.strides() + a.ndim());
    // The work of an analysis grows with the elements the shape declares, which a view with zero
    // strides makes as many as it likes over a few bytes (a file's are bounded by its size):
    // bounded by the limit array_elements before anything starts.
    uint64_t numel = 1;
    std::string dims;
    for (int64_t d : shape) {
        dims += (dims.empty() ? "" : ", ") + std::to_string(d);
        numel = d != 0 && numel > UINT64_MAX / uint64_t(d) ? UINT64_MAX : numel * uint64_t(d);
    }
    check_limit(what, Limit::ArrayElements, "shape (" + dims + "): elements", numel);
    return std::make_unique<io::NpyMap>(what, t, std::move(shape), a.data(), std::move(strides));
}

py::dict table_to_dict(const io::Table& table) {
    py::dict out;
    const auto& rows = table.rows();
    for (size_t c = 0; c < table.columns().size(); ++c) {
        bool all_int = true, all_number = true;
        for (const auto& row : rows) {
            all_int = all_int && std::holds_alternative<int64_t>(row[c]);
            all_number = all_number && !std::holds_alternative<std::string>(row[c]);
        }
        const auto n = static_cast<py::ssize_t>(rows.size());
        if (all_int) {
            py::array_t<int64_t> col(n);
            auto* p = col.mutable_data();
            for (size_t r = 0; r < rows.size(); ++r) p[r] = std::get<int64_t>(rows[r][c]);
            out[py::str(table.columns()[c])] = col;
        } else if (all_number) {
            py::array_t<double> col(n);
            auto* p = col.mutable_data();
            for (size_t r = 0; r < rows.size(); ++r)
                p[r] = std::holds_alternative<double>(rows[r][c])
                           ? std::get<double>(rows[r][c])
                           : double(std::get<int64_t>(rows[r][c]));
            out[py::str(table.columns()[c])] = col;
        } else {  // text (or text and numbers): Python objects
            py::list values;
            for (const auto& row : rows)
                std::visit([&](const auto& v) { values.append(py::cast(v)); }, row[c]);
            out[py::str(table.columns()[c])] =
                py::module_::import("numpy").attr("array")(values, "dtype"_a = "object");
        }
    }
    return out;
}

py::array npy_to_numpy(const io::NpyArray& a) {
    const char* format = nullptr;
    switch (a.dtype) {
        case io::DType::F16:
            format = "float16";
            break;
        case io::DType::F32:
            format = "float32";
            break;
        case io::DType::F64:
            format = "float64";
            break;
        case io::DType::I32:
            format = "int32";
            break;
        case io::DType::I64:
            format = "int64";
            break;
    }
    py::array out(py::dtype(format), std::vector<py::ssize_t>(a.shape.begin(), a.shape.end()));
    std::memcpy(out.mutable_data(), a.data.data(), a.data.size());
    return out;
}

py::object json_to_python(const std::string& dumped) {
    return py::module_::import("json").attr("loads")(dumped);
}

}  // namespace sinkscope::python
