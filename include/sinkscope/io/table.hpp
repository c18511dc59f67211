// Tidy tables written as CSV and JSONL. Non-finite numbers are written as "inf", "-inf",
// "nan" (spec section 10.p).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

namespace sinkscope::io {

using Cell = std::variant<std::string, int64_t, double>;

class Table {
public:
    explicit Table(std::vector<std::string> columns);
    // Appends one row; throws InternalError when the width differs from the header.
    void add_row(std::vector<Cell> row);
    // Sets every empty-string cell of `column` to `value` (no-op without such a column): how a
    // run's checkpoint label reaches the checkpoint column of every long table.
    void fill_empty(const std::string& column, const std::string& value);

    const std::vector<std::string>& columns() const { return columns_; }
    const std::vector<std::vector<Cell>>& rows() const { return rows_; }
    size_t size() const { return rows_.size(); }
    bool empty() const { return rows_.empty(); }

    std::string to_csv() const;
    std::string to_jsonl() const;
    // Writes "<stem>.csv" (and "<stem>.jsonl" when `jsonl`) under `dir`.
    void write(const std::filesystem::path& dir, const std::string& stem,
               bool jsonl = true) const;

    // Reads a CSV written by to_csv (for re-rendering reports); numbers are parsed as double
    // when the whole field is numeric.
    static Table read_csv(const std::filesystem::path& path);

private:
    std::vector<std::string> columns_;
    std::vector<std::vector<Cell>> rows_;
};

// The long format of DESIGN.md: model, checkpoint, layer, head, metric, convention, value.
// layer/head = -1 means "not applicable" (model-level or layer-level values).
Table make_long_table();
void add_long_row(Table& t, const std::string& model, const std::string& checkpoint, int64_t layer,
                  int64_t head, const std::string& metric, const std::string& convention,
                  double value);

// One CSV line (with its newline) as Table::to_csv writes rows; for tables streamed row by row.
std::string csv_line(const std::vector<Cell>& cells);

// Number formatting shared by CSV and JSON writers: shortest round-trip repr.
std::string format_number(double v);

}  // namespace sinkscope::io
