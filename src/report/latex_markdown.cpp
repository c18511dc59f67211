// Tables as Markdown and LaTeX text (text_tables.hpp): what a paper includes, beside the CSV.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <variant>

#include "sinkscope/core/error.hpp"
#include "sinkscope/report/text_tables.hpp"

namespace sinkscope::report {

namespace {

enum class Target { Markdown, Latex };

std::string escape(std::string_view s, Target target) {
    return target == Target::Markdown ? markdown_escape(s) : latex_escape(s);
}

// A number's text in the target: LaTeX sets a leading minus as a minus sign, not a hyphen.
std::string number_text(std::string text, Target target) {
    if (target == Target::Latex && !text.empty() && text[0] == '-') text = "$-$" + text.substr(1);
    return text;
}

bool is_number(const io::Cell& c) {
    return !std::holds_alternative<std::string>(c);
}
bool is_blank(const io::Cell& c) {
    if (auto s = std::get_if<std::string>(&c)) return s->empty();
    if (auto d = std::get_if<double>(&c)) return std::isnan(*d);
    return false;
}

std::string cell_text(const io::Cell& c, int digits, Target target) {
    if (auto s = std::get_if<std::string>(&c)) return escape(*s, target);
    if (auto i = std::get_if<int64_t>(&c)) return number_text(std::to_string(*i), target);
    return number_text(format_significant(std::get<double>(c), digits), target);
}

size_t column_index(const io::Table& t, const std::string& name, const std::string& table) {
    const auto& c = t.columns();
    const auto it = std::find(c.begin(), c.end(), name);
    if (it == c.end())
        throw InternalError("text table " + table + ": no column '" + name + "' for an interval");
    return size_t(it - c.begin());
}

// What is shown: each column in turn, an interval's three columns as one (at its value's place).
struct Shown {
    std::string header;
    size_t value;
    int lo = -1, hi = -1;  // the bounds' columns of an interval
    bool numeric = false;
};

std::vector<Shown> shown_columns(const io::Table& t, const TextTableFormat& f) {
    std::vector<Shown> out;
    std::vector<bool> bound(t.columns().size(), false);
    std::vector<int> interval_of(t.columns().size(), -1);
    for (size_t k = 0; k < f.intervals.size(); ++k) {
        const TextInterval& iv = f.intervals[k];
        interval_of[column_index(t, iv.value, f.name)] = int(k);
        bound[column_index(t, iv.lo, f.name)] = true;
        bound[column_index(t, iv.hi, f.name)] = true;
    }
    for (size_t c = 0; c < t.columns().size(); ++c) {
        if (bound[c]) continue;
        Shown s{t.columns()[c], c};
        if (interval_of[c] >= 0) {
            const TextInterval& iv = f.intervals[size_t(interval_of[c])];
            s.header = iv.value + " [" + iv.lo + ", " + iv.hi + "]";
            s.lo = int(column_index(t, iv.lo, f.name));
            s.hi = int(column_index(t, iv.hi, f.name));
        }
        // Right-aligned when every non-blank value is a number (and there is one).
        bool any = false, all = true;
        t.for_each_row([&](const std::vector<io::Cell>& row) {
            if (is_blank(row[c]) && !is_number(row[c])) return;
            any = true;
            all = all && is_number(row[c]);
        });
        s.numeric = any && all;
        out.push_back(std::move(s));
    }
    return out;
}

std::string shown_text(const std::vector<io::Cell>& row, const Shown& s, int digits,
                       Target target) {
    std::string text = cell_text(row[s.value], digits, target);
    if (s.lo < 0 || is_blank(row[size_t(s.lo)]) || is_blank(row[size_t(s.hi)])) return text;
    return text + " [" + cell_text(row[size_t(s.lo)], digits, target) + ", " +
           cell_text(row[size_t(s.hi)], digits, target) + "]";
}

// One line of text per row: `emit` gets the shown texts of each row.
void for_each_text_row(const io::Table& t, const std::vector<Shown>& shown, int digits,
                       Target target, const std::function<void(std::vector<std::string>&)>& emit) {
    t.for_each_row([&](const std::vector<io::Cell>& row) {
        std::vector<std::string> texts;
        for (const Shown& s : shown) texts.push_back(shown_text(row, s, digits, target));
        emit(texts);
    });
}

}  // namespace

std::string format_significant(double v, int digits) {
    if (!std::isfinite(v)) return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
    if (v == 0) return "0";
    digits = std::clamp(digits, 1, 17);
    // printf's %e rounds once, correctly, to `digits` significant digits (the exponent carries
    // when the rounding does: 0.09996 -> 1.00e-01); the text is built from its digits.
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, std::fabs(v));
    const std::string e_text(buf);
    const size_t e_pos = e_text.find('e');
    std::string d;  // the significant digits
    for (size_t i = 0; i < e_pos; ++i)
        if (e_text[i] != '.') d += e_text[i];
    const int e = std::atoi(e_text.c_str() + e_pos + 1);
    const int n = int(d.size());
    std::string out = v < 0 ? "-" : "";
    if (e < -4 || e >= 6) {
        out += d.substr(0, 1) + (n > 1 ? "." + d.substr(1) : "");
        char exp[16];
        std::snprintf(exp, sizeof exp, "e%c%02d", e < 0 ? '-' : '+', std::abs(e));
        return out + exp;
    }
    if (e < 0) return out + "0." + std::string(size_t(-e - 1), '0') + d;
    if (e >= n - 1) return out + d + std::string(size_t(e - (n - 1)), '0');
    return out + d.substr(0, size_t(e + 1)) + "." + d.substr(size_t(e + 1));
}

std::string markdown_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (c == '\n' || c == '\r') {
            out += ' ';
            continue;
        }
        if (std::string_view("\\|*_`<>").find(c) != std::string_view::npos) out += '\\';
        out += c;
    }
    return out;
}

std::string latex_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '_':
            case '%':
            case '&':
            case '#':
            case '$':
            case '{':
            case '}':
                out += '\\';
                out += c;
                break;
            case '~':
                out += "\\textasciitilde{}";
                break;
            case '^':
                out += "\\textasciicircum{}";
                break;
            case '\\':
                out += "\\textbackslash{}";
                break;
            case '\n':
            case '\r':
                out += ' ';
                break;
            default:
                out += c;
        }
    }
    return out;
}

std::string markdown_table(const io::Table& t, const TextTableFormat& f) {
    const std::vector<Shown> shown = shown_columns(t, f);
    std::string out = "Table: " + markdown_escape(f.caption) + "\n\n|";
    for (const Shown& s : shown) out += " " + markdown_escape(s.header) + " |";
    out += "\n|";
    for (const Shown& s : shown) out += s.numeric ? "---:|" : "---|";
    out += "\n";
    for_each_text_row(t, shown, f.digits, Target::Markdown, [&](std::vector<std::string>& texts) {
        out += "|";
        for (const std::string& x : texts) out += " " + x + " |";
        out += "\n";
    });
    return out;
}

std::string latex_table(const io::Table& t, const TextTableFormat& f) {
    const std::vector<Shown> shown = shown_columns(t, f);
    std::string spec;
    for (const Shown& s : shown) spec += s.numeric ? 'r' : 'l';
    std::string out = "\\begin{table}[htbp]\n\\centering\n\\caption{" + latex_escape(f.caption) +
                      "}\n\\label{tab:" + f.name + "}\n\\begin{tabular}{" + spec + "}\n\\toprule\n";
    auto line = [&out](const std::vector<std::string>& texts) {
        for (size_t i = 0; i < texts.size(); ++i) {
            // A row starting with '[' would be read as the optional argument of the \\ before.
            const bool bracket = i == 0 && !texts[i].empty() && texts[i][0] == '[';
            out += (i ? " & " : "") + std::string(bracket ? "{}" : "") + texts[i];
        }
        out += " \\\\\n";
    };
    std::vector<std::string> header;
    for (const Shown& s : shown) header.push_back(latex_escape(s.header));
    line(header);
    out += "\\midrule\n";
    for_each_text_row(t, shown, f.digits, Target::Latex,
                      [&](std::vector<std::string>& texts) { line(texts); });
    return out + "\\bottomrule\n\\end{tabular}\n\\end{table}\n";
}

}  // namespace sinkscope::report
