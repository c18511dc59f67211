// The Python extension `_sinkscope_toy`: the analysis bindings of the real extension
// (python/src/bind_analysis.cpp) linked with the toy analysis of toy_analysis.cpp, so the test
// can see that the toy's option became a Python keyword without an edit to the bindings.
#include "bindings.hpp"

PYBIND11_MODULE(_sinkscope_toy, m) {
    sinkscope::python::bind_analysis(m);
}
