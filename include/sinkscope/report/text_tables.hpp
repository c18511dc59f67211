// A table as text a paper can include: a GitHub Markdown table with a one-line caption, and a
// LaTeX `table` (booktabs rules, \caption, \label{tab:<name>}). Text cells are escaped for the
// target; numbers are rounded to a few significant digits (the CSV keeps full precision);
// integer cells are shown whole.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sinkscope/io/table.hpp"

namespace sinkscope::report {

// Three columns shown as one: "value [lo, hi]" under the header "value [lo, hi]"; lo and hi
// are not shown apart. Empty (or NaN) bounds show the value alone.
struct TextInterval {
    std::string value, lo, hi;
};

struct TextTableFormat {
    std::string name;     // the table's name: \label{tab:<name>}
    std::string caption;  // one line, plain text (escaped for each target)
    std::vector<TextInterval> intervals;
    int digits = 3;  // significant digits of a double cell
};

// `v` with `digits` significant digits, trailing zeros kept ("0.100", "12.3", "1230"); below
// 1e-4 or from 1e6 on in scientific form ("1.23e-05"); 0 as "0"; non-finite as "nan", "inf",
// "-inf" (as the CSV writes them).
std::string format_significant(double v, int digits = 3);

// Markdown: `s` with the characters GitHub Markdown gives a meaning in a table cell
// (\ | * _ ` < >) escaped by a backslash, line breaks as spaces.
std::string markdown_escape(std::string_view s);
// LaTeX text mode: _ % & # $ { } escaped by a backslash, ~ ^ \ as \textasciitilde{},
// \textasciicircum{}, \textbackslash{}; line breaks as spaces.
std::string latex_escape(std::string_view s);

// "Table: <caption>", a blank line, then the table (numeric columns right-aligned).
std::string markdown_table(const io::Table& table, const TextTableFormat& format);
// \begin{table} ... \caption, \label{tab:<name>}, a tabular (l for text columns, r for numeric
// ones) with \toprule, \midrule and \bottomrule ... \end{table}. Needs \usepackage{booktabs}.
std::string latex_table(const io::Table& table, const TextTableFormat& format);

}  // namespace sinkscope::report
