// Dataset readers for model runs (DESIGN.md "Data files").
#include "sinkscope/io/dataset.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/limits.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/io/npy.hpp"

namespace sinkscope::io {

extern const char* const kBuiltinPrompts;  // generated from data/prompts/default.txt

namespace {

std::string lower_ext(const std::filesystem::path& p) {
    std::string e = p.extension().string();
    std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::tolower(c); });
    return e.empty() ? e : e.substr(1);
}

// Refuses a line (or CSV record) longer than the limit: one sample's text is tokenized and held
// several times over, so its length is a resource the file controls.
void check_line(const std::string& file, size_t line_no, size_t n_bytes) {
    check_limit(file, Limit::LineBytes, "line " + std::to_string(line_no) + ": bytes", n_bytes);
}

std::vector<Sample> from_lines(const std::string& text, int64_t max_samples,
                               const std::string& file) {
    std::vector<Sample> out;
    size_t pos = 0, line_no = 0;
    while (pos <= text.size() && (max_samples <= 0 || int64_t(out.size()) < max_samples)) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        check_line(file, ++line_no, end - pos);
        std::string line = text.substr(pos, end - pos);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") != std::string::npos)
            out.push_back({line, {}, int64_t(line_no) - 1, {}});
        if (end == text.size()) break;
        pos = end + 1;
    }
    return out;
}

}  // namespace

std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
    std::vector<std::vector<std::string>> records;
    std::vector<std::string> fields;
    std::string field;
    bool quoted = false, any = false;
    for (size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (quoted) {
            if (c == '"') {
                if (i + 1 < text.size() && text[i + 1] == '"')
                    field += '"', ++i;
                else
                    quoted = false;
            } else {
                field += c;
            }
            continue;
        }
        any = true;
        if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            fields.push_back(std::move(field));
            field.clear();
        } else if (c == '\n' || c == '\r') {
            if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
            fields.push_back(std::move(field));
            field.clear();
            records.push_back(std::move(fields));
            fields.clear();
            any = false;
        } else {
            field += c;
        }
    }
    if (quoted) throw InputError("<csv>", "unterminated quoted field");
    if (any || !field.empty() || !fields.empty()) {
        fields.push_back(std::move(field));
        records.push_back(std::move(fields));
    }
    return records;
}

std::vector<Sample> load_dataset(const std::filesystem::path& path, const DatasetOptions& opts) {
    const std::string file = path.string();
    std::string format = opts.format == "auto" ? lower_ext(path) : opts.format;
    if (format == "txt" || format == "text" || format.empty()) format = "txt";
    std::vector<Sample> out;
    auto full = [&] { return opts.max_samples > 0 && int64_t(out.size()) >= opts.max_samples; };
    if (!opts.keep_columns.empty() && format != "csv" && format != "jsonl")
        throw InputError(file, "--keep-columns needs a CSV or JSONL data file: a " + format +
                                   " file has no columns");

    if (format == "npy") {
        NpyArray a = read_npy(path);
        if (a.dtype != DType::I32 && a.dtype != DType::I64)
            throw InputError(file, std::string("token ids must be int32 or int64, found ") +
                                       dtype_descr(a.dtype));
        if (a.shape.size() != 1 && a.shape.size() != 2)
            throw InputError(file, "token ids must have shape (T,) or (N, T), found rank " +
                                       std::to_string(a.shape.size()));
        auto ids = a.to_i64();
        int64_t n = a.shape.size() == 1 ? 1 : a.shape[0];
        int64_t t = a.shape.back();
        for (int64_t i = 0; i < n && !full(); ++i) {
            Sample s;
            s.ids.assign(ids.begin() + i * t, ids.begin() + (i + 1) * t);
            // Negative ids mark padding at the end of a row.
            while (!s.ids.empty() && s.ids.back() < 0) s.ids.pop_back();
            for (size_t k = 0; k < s.ids.size(); ++k)
                if (s.ids[k] < 0)
                    throw InputError(file, "negative token id inside sample " + std::to_string(i) +
                                               " at position " + std::to_string(k));
            s.row = i;
            if (!s.ids.empty()) out.push_back(std::move(s));
        }
        return out;
    }

    const std::string text = read_file_limited(path, Limit::DataBytes);
    if (format == "txt") {
        out = from_lines(text, opts.max_samples, file);
    } else if (format == "jsonl") {
        size_t pos = 0, line_no = 0;
        while (pos < text.size() && !full()) {
            size_t end = text.find('\n', pos);
            if (end == std::string::npos) end = text.size();
            check_line(file, ++line_no, end - pos);
            std::string line = text.substr(pos, end - pos);
            pos = end + 1;
            if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
            nlohmann::json j;
            try {
                j = parse_json(line, file);
            } catch (const InputError& e) {
                // The JSON error names the file; say which line.
                throw InputError(file, "line " + std::to_string(line_no) + ": " +
                                           std::string(e.what()).substr(file.size() + 2));
            }
            Sample s;
            s.row = int64_t(line_no) - 1;
            for (const std::string& name : opts.keep_columns) {
                if (!j.is_object() || !j.contains(name))
                    throw InputError(file, "line " + std::to_string(line_no) + ": no field " +
                                               quote(name) + " (named by --keep-columns)");
                const nlohmann::json& v = j[name];
                s.kept.push_back(v.is_string() ? v.get<std::string>() : v.dump());
            }
            if (j.is_object() && j.contains("text") && j["text"].is_string()) {
                s.text = j["text"].get<std::string>();
            } else if (j.is_object() && j.contains("ids") && j["ids"].is_array()) {
                for (const auto& v : j["ids"]) {
                    if (!v.is_number_integer() || v.get<int64_t>() < 0)
                        throw InputError(file, "line " + std::to_string(line_no) +
                                                   ": ids must be non-negative integers");
                    s.ids.push_back(v.get<int64_t>());
                }
            } else {
                throw InputError(
                    file, "line " + std::to_string(line_no) +
                              ": expected an object with \"text\" (string) or \"ids\" (array)");
            }
            if (!s.text.empty() || !s.ids.empty()) out.push_back(std::move(s));
        }
    } else if (format == "csv") {
        std::vector<std::vector<std::string>> records;
        try {
            records = parse_csv(text);
        } catch (const InputError&) {
            throw InputError(file, "unterminated quoted field");
        }
        if (records.empty()) throw InputError(file, "empty CSV file");
        for (size_t r = 0; r < records.size(); ++r) {
            size_t n = 0;
            for (const auto& f : records[r]) n += f.size() + 1;
            check_line(file, r + 1, n);
        }
        const auto& header = records[0];
        auto it = std::find(header.begin(), header.end(), opts.text_column);
        if (it == header.end()) {
            // The header's names, so the right --text-column can be picked from the message.
            std::string names;
            for (const auto& h : header) names += (names.empty() ? "" : ", ") + quote(h);
            throw InputError(file, "no column named " + quote(opts.text_column) +
                                       " in the header (columns: " + names +
                                       "; choose one with --text-column)");
        }
        size_t col = static_cast<size_t>(it - header.begin());
        std::vector<size_t> kept;
        for (const std::string& name : opts.keep_columns) {
            const auto k = std::find(header.begin(), header.end(), name);
            if (k == header.end()) {
                std::string names;
                for (const auto& h : header) names += (names.empty() ? "" : ", ") + quote(h);
                throw InputError(
                    file, "no column named " + quote(name) +
                              " (named by --keep-columns) in the header (columns: " + names + ")");
            }
            kept.push_back(static_cast<size_t>(k - header.begin()));
        }
        for (size_t r = 1; r < records.size() && !full(); ++r) {
            const auto& rec = records[r];
            if (rec.size() == 1 && rec[0].empty()) continue;
            if (rec.size() != header.size())
                throw InputError(file, "record " + std::to_string(r + 1) + " has " +
                                           std::to_string(rec.size()) + " fields, header has " +
                                           std::to_string(header.size()));
            if (rec[col].empty()) continue;
            Sample s{rec[col], {}, int64_t(r) - 1, {}};
            for (size_t k : kept) s.kept.push_back(rec[k]);
            out.push_back(std::move(s));
        }
    } else {
        throw UnsupportedError(file, "data format " + quote(format) + " (txt, jsonl, csv, npy)");
    }
    return out;
}

std::vector<Sample> builtin_prompts(int64_t max_samples) {
    return from_lines(kBuiltinPrompts, max_samples, "built-in prompts");
}

}  // namespace sinkscope::io
