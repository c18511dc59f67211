// Text formatting shared across modules: numbers for tables, run.json and table keys (the shortest
// text that reads back to the same double, std::to_chars; non-finite values as "nan", "inf",
// "-inf", spec 10.p), and file-provided strings made safe to print in a one-line message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sinkscope {

std::string format_number(double v);

// A tensor shape in a message: "[2, 3, 4]".
std::string shape_text(const std::vector<int64_t>& dims);

// A count with its noun for the console: "1 input", "3 inputs" (`plural` when not noun + "s").
std::string count_of(long long n, std::string_view noun, std::string_view plural = {});

// A number for a console line, beside others: 4 significant digits ("0.1235", "3.803e-15");
// tables and run.json keep format_number's full precision.
std::string console_number(double v);

// At most this many bytes of one file-provided string reach a message (then "...").
inline constexpr size_t kMaxPrintedBytes = 120;

// `s` as it may appear in a one-line message: bytes that could end the line, move the cursor or
// start a terminal escape (C0 controls, DEL, C1 controls U+0080..U+009F, and bytes that are not
// valid UTF-8) become \xNN; longer than `max_bytes`, it is cut at a character boundary and
// "...(N bytes)" says how long it was. Every string read from a file goes through this (or
// quote()) before it reaches an error message.
std::string printable(std::string_view s, size_t max_bytes = kMaxPrintedBytes);

// 'printable(s)' in single quotes: a file-provided name (tensor, key, token, pattern) in a message.
std::string quote(std::string_view s, size_t max_bytes = kMaxPrintedBytes);

}  // namespace sinkscope
