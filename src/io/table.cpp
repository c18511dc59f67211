// CSV / JSONL table writer and a small CSV reader.
#include "sinkscope/io/table.hpp"

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/output_dir.hpp"

namespace sinkscope::io {

Table::Table(std::vector<std::string> columns) : columns_(std::move(columns)) {}

void Table::add_row(std::vector<Cell> row) {
    SS_CHECK(row.size() == columns_.size(), "row has ", row.size(), " cells, table has ",
             columns_.size(), " columns");
    rows_.push_back(std::move(row));
}

void Table::fill_empty(const std::string& column, const std::string& value) {
    for (size_t c = 0; c < columns_.size(); ++c) {
        if (columns_[c] != column) continue;
        for (auto& row : rows_)
            if (const auto* s = std::get_if<std::string>(&row[c]); s && s->empty()) row[c] = value;
    }
}

std::string format_number(double v) {
    return sinkscope::format_number(v);
}

namespace {
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
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
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

std::string cell_text(const Cell& c) {
    if (auto s = std::get_if<std::string>(&c)) return *s;
    if (auto i = std::get_if<int64_t>(&c)) return std::to_string(*i);
    return format_number(std::get<double>(c));
}
}  // namespace

std::string csv_line(const std::vector<Cell>& cells) {
    std::string out;
    for (size_t i = 0; i < cells.size(); ++i) {
        if (i) out += ',';
        out += csv_escape(cell_text(cells[i]));
    }
    return out + '\n';
}

std::string Table::to_csv() const {
    std::vector<Cell> header(columns_.begin(), columns_.end());
    std::string out = csv_line(header);
    for (const auto& row : rows_) out += csv_line(row);
    return out;
}

std::string Table::to_jsonl() const {
    std::string out;
    for (const auto& row : rows_) {
        out += '{';
        for (size_t i = 0; i < row.size(); ++i) {
            if (i) out += ',';
            out += json_escape(columns_[i]) + ':';
            if (auto d = std::get_if<double>(&row[i]); d && !std::isfinite(*d))
                out += json_escape(format_number(*d));
            else if (std::holds_alternative<std::string>(row[i]))
                out += json_escape(std::get<std::string>(row[i]));
            else
                out += cell_text(row[i]);
        }
        out += "}\n";
    }
    return out;
}

void Table::write(const std::filesystem::path& dir, const std::string& stem, bool jsonl) const {
    write_file_atomic(dir / (stem + ".csv"), to_csv());
    if (jsonl) write_file_atomic(dir / (stem + ".jsonl"), to_jsonl());
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
                if (pos < text.size() && text[pos] == '"') field += '"', ++pos;
                else quoted = false;
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
    std::string text = read_file(path);
    size_t pos = 0;
    SS_CHECK_INPUT(!text.empty(), path.string(), "empty CSV file");
    Table t(split_csv_line(text, pos));
    size_t line = 1;
    while (pos < text.size()) {
        ++line;
        auto fields = split_csv_line(text, pos);
        if (fields.size() == 1 && fields[0].empty()) continue;
        SS_CHECK_INPUT(fields.size() == t.columns_.size(), path.string(), "line ", line, " has ",
                       fields.size(), " fields, header has ", t.columns_.size());
        std::vector<Cell> row;
        for (auto& f : fields) {
            double v;
            auto res = std::from_chars(f.data(), f.data() + f.size(), v);
            if (!f.empty() && res.ec == std::errc() && res.ptr == f.data() + f.size())
                row.emplace_back(v);
            else if (f == "nan" || f == "inf" || f == "-inf")
                row.emplace_back(f == "nan"   ? std::nan("")
                                 : f == "inf" ? HUGE_VAL
                                              : -HUGE_VAL);
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
