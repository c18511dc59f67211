// io module: the tables of a run directory read as the library reads them (numbers parsed the
// same way as `sinkscope report` and `compare` do).
#include <pybind11/stl/filesystem.h>

#include "bindings.hpp"

namespace sinkscope::python {

void bind_io(py::module_& m) {
    m.def(
        "read_table",
        [](const std::filesystem::path& path) { return table_to_dict(io::Table::read_csv(path)); },
        py::arg("path"), "A CSV table of a run directory as {column: numpy array}");
}

}  // namespace sinkscope::python
