// Shortest round-trip number text (format.hpp).
#include "sinkscope/core/format.hpp"

#include <charconv>
#include <cmath>

namespace sinkscope {

std::string format_number(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, res.ptr);
}

}  // namespace sinkscope
