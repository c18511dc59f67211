// CSV / JSONL table writer and a small CSV reader.
#include "sinkscope/io/table.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string_view>
#include <type_traits>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/output_dir.hpp"

namespace sinkscope::io {

Table::Table(std::vector<std::string> columns) : columns_(std::move(columns)) {}

Table Table::generated(std::vector<std::string> columns, size_t n_rows,
                       std::function<RowCursor()> source) {
    SS_CHECK(source, "a generated table needs a row source");
    Table t(std::move(columns));
    t.source_ = std::move(source);
    t.n_generated_ = n_rows;
    return t;
}

Table Table::generated(std::vector<std::string> columns, size_t n_rows,
                       std::function<RowCursor()> source, std::function<TextCursor()> csv_text) {
    SS_CHECK(csv_text, "a generated table's text source is empty");
    Table t = generated(std::move(columns), n_rows, std::move(source));
    t.csv_text_ = std::move(csv_text);
    return t;
}

void Table::materialize() const {
    if (!source_) return;
    std::vector<std::vector<Cell>> rows;
    rows.reserve(n_generated_);
    for_each_row([&](const std::vector<Cell>& r) { rows.push_back(r); });
    rows_ = std::move(rows);
    source_ = nullptr;
}

const std::vector<std::vector<Cell>>& Table::rows() const {
    materialize();
    return rows_;
}

std::function<const std::vector<Cell>*()> Table::row_reader() const {
    if (!source_) {
        return [this, i = size_t(0)]() mutable -> const std::vector<Cell>* {
            return i < rows_.size() ? &rows_[i++] : nullptr;
        };
    }
    auto cells = std::make_shared<std::vector<Cell>>(columns_.size());
    return [this, cells, next = source_(), n = size_t(0)]() mutable -> const std::vector<Cell>* {
        if (!next(*cells)) {
            SS_CHECK(n == n_generated_, "generated table made ", n, " rows, announced ",
                     n_generated_);
            return nullptr;
        }
        SS_CHECK(cells->size() == columns_.size() && n < n_generated_,
                 "generated row does not fit its table");
        ++n;
        return cells.get();
    };
}

void Table::for_each_row(const std::function<void(const std::vector<Cell>&)>& fn) const {
    auto next = row_reader();
    while (const std::vector<Cell>* row = next()) fn(*row);
}

void Table::add_row(std::vector<Cell> row) {
    SS_CHECK(row.size() == columns_.size(), "row has ", row.size(), " cells, table has ",
             columns_.size(), " columns");
    materialize();
    csv_text_ = nullptr;  // the rows are no longer the ones it writes
    rows_.push_back(std::move(row));
}

void Table::fill_empty(const std::string& column, const std::string& value) {
    for (size_t c = 0; c < columns_.size(); ++c) {
        if (columns_[c] != column) continue;
        materialize();
        csv_text_ = nullptr;
        for (auto& row : rows_)
            if (const auto* s = std::get_if<std::string>(&row[c]); s && s->empty()) row[c] = value;
    }
}

void Table::map_integers(const std::string& column, const std::function<int64_t(int64_t)>& fn) {
    const auto it = std::find(columns_.begin(), columns_.end(), column);
    if (it == columns_.end()) return;
    const size_t c = size_t(it - columns_.begin());
    const auto map = [c, fn](std::vector<Cell>& row) {
        if (const auto* v = std::get_if<int64_t>(&row[c])) row[c] = fn(*v);
    };
    csv_text_ = nullptr;  // its text would not be mapped
    if (source_) {
        source_ = [inner = std::move(source_), map] {
            return RowCursor([next = inner(), map](std::vector<Cell>& cells) mutable {
                if (!next(cells)) return false;
                map(cells);
                return true;
            });
        };
        return;
    }
    for (auto& row : rows_) map(row);
}

std::string format_number(double v) {
    return sinkscope::format_number(v);
}

namespace {

// CSV injection (OWASP): a text cell that starts with =, +, -, @, a tab or a carriage return is a
// formula to a spreadsheet (a model name "=HYPERLINK(...)" from a hand-edited run.json, a token,
// a data column). The writer puts a single quote before such a cell, and before one that already
// starts with quotes and then such a character, so read_csv takes exactly one quote off and gets
// the text back. Numbers are never text cells: -0.5 stays a number.
bool formula_like(std::string_view s) {
    const size_t i = s.find_first_not_of('\'');
    if (i == std::string_view::npos) return false;
    const char c = s[i];
    return c == '=' || c == '+' || c == '-' || c == '@' || c == '\t' || c == '\r';
}

std::string csv_escape(const std::string& s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

std::string json_escape(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    return out + "\"";
}

// Appends a number as CSV and JSONL write it (shortest round-trip form; non-finite as
// "inf"/"-inf"/"nan", spec 10.p), straight into `out`.
template <typename T>
void append_number(std::string& out, T v) {
    if constexpr (std::is_floating_point_v<T>) {
        if (!std::isfinite(v)) {
            out += format_number(v);
            return;
        }
    }
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, res.ptr);
}

void append_csv_cell(std::string& out, const Cell& c) {
    if (auto s = std::get_if<std::string>(&c)) {
        if (formula_like(*s)) {  // text a spreadsheet would run: one quote before it
            out += csv_escape("'" + *s);
        } else if (s->find_first_of(",\"\n\r") == std::string::npos) {
            out += *s;
        } else {
            out += csv_escape(*s);
        }
    } else if (auto i = std::get_if<int64_t>(&c)) {
        append_number(out, *i);
    } else {
        append_number(out, std::get<double>(c));
    }
}

}  // namespace

void append_csv_number(std::string& out, double v) {
    append_number(out, v);
}
void append_csv_number(std::string& out, int64_t v) {
    append_number(out, v);
}

namespace {

void append_jsonl_line(std::string& out, const std::vector<std::string>& columns,
                       const std::vector<Cell>& row) {
    out += '{';
    for (size_t i = 0; i < row.size(); ++i) {
        if (i) out += ',';
        out += json_escape(columns[i]);
        out += ':';
        if (auto d = std::get_if<double>(&row[i]); d && !std::isfinite(*d))
            out += json_escape(format_number(*d));
        else if (auto s = std::get_if<std::string>(&row[i]))
            out += json_escape(*s);
        else
            append_csv_cell(out, row[i]);
    }
    out += "}\n";
}

}  // namespace

void append_csv_line(std::string& out, const std::vector<Cell>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
        if (i) out += ',';
        append_csv_cell(out, cells[i]);
    }
    out += '\n';
}

std::string csv_line(const std::vector<Cell>& cells) {
    std::string out;
    append_csv_line(out, cells);
    return out;
}

std::string Table::to_csv() const {
    std::string out = csv_line(std::vector<Cell>(columns_.begin(), columns_.end()));
    for_each_row([&](const std::vector<Cell>& row) { append_csv_line(out, row); });
    return out;
}

std::string Table::to_jsonl() const {
    std::string out;
    for_each_row([&](const std::vector<Cell>& row) { append_jsonl_line(out, columns_, row); });
    return out;
}

void Table::write(const std::filesystem::path& dir, const std::string& stem, bool jsonl) const {
    write(RunFiles(dir), stem, jsonl);
}

void Table::write(const RunFiles& dir, const std::string& stem, bool jsonl) const {
    // Streamed in pieces of about 1 MiB: a table of millions of rows is never held as text.
    // `more` appends the next line(s) to a piece, false once nothing is left.
    constexpr size_t kPiece = size_t(1) << 20;
    const auto stream = [&dir](const std::string& file, std::string header, auto more) {
        bool end = false;
        dir.write(file, [&](std::string& piece) {
            if (end) return false;
            piece.swap(header);  // the header goes out with the first piece
            header.clear();
            while (!end && piece.size() < kPiece) end = !more(piece);
            return true;
        });
    };
    // The rows' cells, each appended by append_line.
    const auto cells = [this](auto append_line) {
        return [next = row_reader(), append_line](std::string& out) mutable {
            const std::vector<Cell>* row = next();
            if (row) append_line(out, *row);
            return row != nullptr;
        };
    };
    std::string header = csv_line(std::vector<Cell>(columns_.begin(), columns_.end()));
    if (csv_text_) {
        stream(stem + ".csv", std::move(header),
               [this, next = csv_text_(), lines = size_t(0)](std::string& out) mutable {
                   const size_t from = out.size();
                   const bool more = next(out);
                   lines += size_t(std::count(out.begin() + std::ptrdiff_t(from), out.end(), '\n'));
                   SS_CHECK(lines <= n_generated_ && (more || lines == n_generated_),
                            "generated table wrote ", lines, " lines, announced ", n_generated_);
                   return more;
               });
    } else {
        stream(stem + ".csv", std::move(header),
               cells([](std::string& out, const std::vector<Cell>& row) {
                   append_csv_line(out, row);
               }));
    }
    if (jsonl)
        stream(stem + ".jsonl", std::string(),
               cells([this](std::string& out, const std::vector<Cell>& row) {
                   append_jsonl_line(out, columns_, row);
               }));
}

namespace {
std::vector<std::string> split_csv_line(const std::string& text, size_t& pos) {
    std::vector<std::string> fields;
    std::string field;
    bool quoted = false;
    while (pos < text.size()) {
        char c = text[pos++];
        if (quoted) {
            if (c == '"') {
                if (pos < text.size() && text[pos] == '"')
                    field += '"', ++pos;
                else
                    quoted = false;
            } else {
                field += c;
            }
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            fields.push_back(std::move(field));
            field.clear();
        } else if (c == '\n') {
            break;
        } else if (c != '\r') {
            field += c;
        }
    }
    fields.push_back(std::move(field));
    return fields;
}
}  // namespace

Table Table::read_csv(const std::filesystem::path& path) {
    return parse_csv(read_file(path), path.string());
}

Table Table::parse_csv(const std::string& text, const std::string& origin) {
    size_t pos = 0;
    SS_CHECK_INPUT(!text.empty(), origin, "empty CSV file");
    Table t(split_csv_line(text, pos));
    size_t line = 1;
    while (pos < text.size()) {
        ++line;
        auto fields = split_csv_line(text, pos);
        if (fields.size() == 1 && fields[0].empty()) continue;
        SS_CHECK_INPUT(fields.size() == t.columns_.size(), origin, "line ", line, " has ",
                       fields.size(), " fields, header has ", t.columns_.size());
        std::vector<Cell> row;
        for (auto& f : fields) {
            double v;
            auto res = std::from_chars(f.data(), f.data() + f.size(), v);
            if (!f.empty() && res.ec == std::errc() && res.ptr == f.data() + f.size())
                row.emplace_back(v);
            else if (f == "nan" || f == "inf" || f == "-inf")
                row.emplace_back(f == "nan" ? std::nan("") : f == "inf" ? HUGE_VAL : -HUGE_VAL);
            else if (f.size() > 1 && f[0] == '\'' && formula_like(std::string_view(f).substr(1)))
                row.emplace_back(f.substr(1));  // the writer's quote before a formula-like text
            else
                row.emplace_back(std::move(f));
        }
        t.rows_.push_back(std::move(row));
    }
    return t;
}

Table make_long_table() {
    return Table({"model", "checkpoint", "layer", "head", "metric", "convention", "value"});
}

void add_long_row(Table& t, const std::string& model, const std::string& checkpoint, int64_t layer,
                  int64_t head, const std::string& metric, const std::string& convention,
                  double value) {
    t.add_row({model, checkpoint, layer, head, metric, convention, value});
}

}  // namespace sinkscope::io
