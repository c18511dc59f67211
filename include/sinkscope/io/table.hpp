// Tidy tables written as CSV and JSONL. Non-finite numbers are written as "inf", "-inf",
// "nan" (spec section 10.p). A text cell of the CSV that a spreadsheet would take for a formula
// (first character =, +, -, @, tab or carriage return: CSV injection, OWASP) is written with a
// single quote before it; read_csv takes that quote off again. Number cells are never quoted.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "sinkscope/core/run_files.hpp"

namespace sinkscope::io {

using Cell = std::variant<std::string, int64_t, double>;

class Table {
public:
    // Fills `cells` (sized to the columns) with the next row; false when there is none.
    using RowCursor = std::function<bool(std::vector<Cell>& cells)>;

    explicit Table(std::vector<std::string> columns);
    // A table whose `n_rows` rows are produced on demand by a fresh cursor of `source` each
    // time they are read: the long tables derived from matrices (distances.csv of 1,024 heads
    // has 4.7 million rows) are written without ever being held as cells. rows() builds and
    // keeps them on first use; for_each_row and the writers stream.
    static Table generated(std::vector<std::string> columns, size_t n_rows,
                           std::function<RowCursor()> source);
    // Appends the CSV lines of the next few rows to `out` (the bytes append_csv_line writes
    // for their cells); false once no row is left.
    using TextCursor = std::function<bool(std::string& out)>;
    // The same, with a second source that writes the rows' CSV text directly: write() uses it
    // for the .csv (the .jsonl, rows() and for_each_row use the cells). For tables of millions
    // of rows, whose cells cost more to build and format one by one than the text.
    static Table generated(std::vector<std::string> columns, size_t n_rows,
                           std::function<RowCursor()> source, std::function<TextCursor()> csv_text);
    // Appends one row; throws InternalError when the width differs from the header.
    void add_row(std::vector<Cell> row);
    // Sets every empty-string cell of `column` to `value` (no-op without such a column): how a
    // run's checkpoint label reaches the checkpoint column of every long table.
    void fill_empty(const std::string& column, const std::string& value);
    // Replaces every integer cell of `column` by fn(cell) (no-op without such a column); a
    // generated table maps its rows as they are produced. How the analysed layers of `analyze
    // --layers` get their model indices in every table.
    void map_integers(const std::string& column, const std::function<int64_t(int64_t)>& fn);

    const std::vector<std::string>& columns() const { return columns_; }
    const std::vector<std::vector<Cell>>& rows() const;
    size_t size() const { return source_ ? n_generated_ : rows_.size(); }
    bool empty() const { return size() == 0; }
    // Calls fn on every row in order without building the rows of a generated table.
    void for_each_row(const std::function<void(const std::vector<Cell>&)>& fn) const;

    std::string to_csv() const;
    std::string to_jsonl() const;
    // Writes "<stem>.csv" (and "<stem>.jsonl" when `jsonl`) under `dir`.
    void write(const std::filesystem::path& dir, const std::string& stem, bool jsonl = true) const;
    // The same into a run's files (on disk or in memory).
    void write(const RunFiles& dir, const std::string& stem, bool jsonl = true) const;

    // Reads a CSV written by to_csv (for re-rendering reports); numbers are parsed as double
    // when the whole field is numeric; the quote the writer put before a formula-like text cell
    // is taken off.
    static Table read_csv(const std::filesystem::path& path);
    // The same from the CSV's text; errors name `origin`.
    static Table parse_csv(const std::string& text, const std::string& origin);

private:
    std::vector<std::string> columns_;
    mutable std::vector<std::vector<Cell>> rows_;  // built from source_ on the first rows()
    mutable std::function<RowCursor()> source_;    // set for generated tables until rows()
    std::function<TextCursor()> csv_text_;         // optional, generated tables only
    size_t n_generated_ = 0;
    void materialize() const;
    // Each row in turn (nullptr after the last); the pointer is valid until the next call.
    std::function<const std::vector<Cell>*()> row_reader() const;
};

// The long format of DESIGN.md: model, checkpoint, layer, head, metric, convention, value.
// layer/head = -1 means "not applicable" (model-level or layer-level values).
Table make_long_table();
void add_long_row(Table& t, const std::string& model, const std::string& checkpoint, int64_t layer,
                  int64_t head, const std::string& metric, const std::string& convention,
                  double value);

// One CSV line (with its newline) as Table::to_csv writes rows; for tables streamed row by row.
std::string csv_line(const std::vector<Cell>& cells);
// Appends csv_line(cells) to `out` without temporaries (the writers' inner loop).
void append_csv_line(std::string& out, const std::vector<Cell>& cells);

// Number formatting shared by CSV and JSON writers: shortest round-trip repr.
std::string format_number(double v);
// Appends a number as the CSV writer writes a cell (the same text as format_number).
void append_csv_number(std::string& out, double v);
void append_csv_number(std::string& out, int64_t v);

}  // namespace sinkscope::io
