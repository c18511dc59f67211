// io module: the tables of a run directory (or of a run kept in memory) read as the library reads
// them (numbers parsed the same way as `sinkscope report` and `compare` do).
#include <pybind11/stl/filesystem.h>

#include "bindings.hpp"

namespace sinkscope::python {

void bind_io(py::module_& m) {
    m.def(
        "read_table",
        [](const std::filesystem::path& path) { return table_to_dict(io::Table::read_csv(path)); },
        py::arg("path"), "A CSV table of a run directory as {column: numpy array}");
    m.def(
        "parse_table",
        [](const py::bytes& text, const std::string& origin) {
            return table_to_dict(io::Table::parse_csv(std::string(text), origin));
        },
        py::arg("text"), py::arg("origin") = "table",
        "A CSV table's bytes (a run's file kept in memory) as read_table reads the file");
}

}  // namespace sinkscope::python
