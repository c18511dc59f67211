// Conversions between numpy / Python objects and the library's arrays, tables and callbacks.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>

#include "bindings.hpp"
#include "sinkscope/core/limits.hpp"

namespace sinkscope::python {

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

namespace {

// A text (or mixed) column as a numpy object array, filled in place. Repeated texts (a table's
// model, metric and convention columns hold a few values over thousands of rows) share one
// Python string: most of the cost of a large table was making a new one per cell.
py::array object_column(const std::vector<std::vector<io::Cell>>& rows, size_t c) {
    py::array col(py::dtype(py::detail::npy_api::NPY_OBJECT_),
                  std::vector<py::ssize_t>{py::ssize_t(rows.size())});
    auto** p = static_cast<PyObject**>(col.mutable_data());
    std::unordered_map<std::string_view, py::object> texts;
    for (size_t r = 0; r < rows.size(); ++r) {
        py::object v;
        if (const auto* s = std::get_if<std::string>(&rows[r][c])) {
            auto [it, added] = texts.try_emplace(*s);
            if (added) it->second = py::str(*s);
            v = it->second;
        } else {
            std::visit([&](const auto& x) { v = py::cast(x); }, rows[r][c]);
        }
        Py_XDECREF(p[r]);  // numpy fills a new object array with None (or NULL)
        p[r] = v.release().ptr();
    }
    return col;
}

}  // namespace

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
            out[py::str(table.columns()[c])] = object_column(rows, c);
        }
    }
    return out;
}

py::array npy_to_numpy(const io::NpyArray& a) {
    py::dtype dt;
    switch (a.dtype) {
        case io::DType::F16:
            dt = py::dtype("float16");
            break;
        case io::DType::F32:
            dt = py::dtype::of<float>();
            break;
        case io::DType::F64:
            dt = py::dtype::of<double>();
            break;
        case io::DType::I32:
            dt = py::dtype::of<int32_t>();
            break;
        case io::DType::I64:
            dt = py::dtype::of<int64_t>();
            break;
    }
    py::array out(dt, std::vector<py::ssize_t>(a.shape.begin(), a.shape.end()));
    std::memcpy(out.mutable_data(), a.data.data(), a.data.size());
    return out;
}

py::object json_to_python(const std::string& dumped) {
    return py::module_::import("json").attr("loads")(dumped);
}

py::object json_to_python(const nlohmann::json& j) {
    switch (j.type()) {
        case nlohmann::json::value_t::object: {
            py::dict d;
            for (const auto& [key, value] : j.items()) d[py::str(key)] = json_to_python(value);
            return d;
        }
        case nlohmann::json::value_t::array: {
            py::list l(j.size());
            size_t i = 0;
            for (const auto& value : j) l[i++] = json_to_python(value);
            return l;
        }
        case nlohmann::json::value_t::string:
            return py::str(j.get_ref<const std::string&>());
        case nlohmann::json::value_t::boolean:
            return py::bool_(j.get<bool>());
        case nlohmann::json::value_t::number_integer:
            return py::int_(j.get<int64_t>());
        case nlohmann::json::value_t::number_unsigned:
            return py::int_(j.get<uint64_t>());
        case nlohmann::json::value_t::number_float: {
            const double v = j.get<double>();
            if (!std::isfinite(v)) return py::none();  // as dump() writes it: null
            return py::float_(v);
        }
        default:  // null, discarded, binary (never in a record)
            return py::none();
    }
}

}  // namespace sinkscope::python
