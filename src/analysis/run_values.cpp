// RunTable (run_values.hpp): a finished run's table read back by column name.
#include "sinkscope/analysis/run_values.hpp"

#include <algorithm>
#include <variant>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"

namespace sinkscope::analysis {

RunTable::RunTable(const RunFiles& dir, const std::string& name) : file_(dir.shown(name + ".csv")) {
    if (!dir.exists(name + ".csv")) return;
    table_ = io::Table::parse_csv(dir.read(name + ".csv"), file_);
    present_ = true;
}

size_t RunTable::column(const std::string& name) const {
    const auto& c = table_.columns();
    const auto it = std::find(c.begin(), c.end(), name);
    if (it == c.end()) throw InputError(file_, "has no column '" + name + "'");
    return size_t(it - c.begin());
}

std::string RunTable::text(size_t row, const std::string& col) const {
    const io::Cell& c = table_.rows()[row][column(col)];
    if (auto s = std::get_if<std::string>(&c)) return *s;
    if (auto d = std::get_if<double>(&c)) return io::format_number(*d);
    return std::to_string(std::get<int64_t>(c));
}

double RunTable::num(size_t row, const std::string& col) const {
    const io::Cell& c = table_.rows()[row][column(col)];
    if (auto d = std::get_if<double>(&c)) return *d;
    if (auto i = std::get_if<int64_t>(&c)) return double(*i);
    throw InputError(file_, "line " + std::to_string(row + 2) + ": column '" + col +
                                "' is not a number: " + printable(text(row, col), 40));
}

}  // namespace sinkscope::analysis
