// Number text and printable untrusted strings (format.hpp).
#include "sinkscope/core/format.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace sinkscope {

std::string shape_text(const std::vector<int64_t>& dims) {
    std::string s = "[";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
}

std::string format_number(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, res.ptr);
}

std::string count_of(long long n, std::string_view noun, std::string_view plural) {
    std::string out = std::to_string(n) + " ";
    if (n == 1) return out.append(noun);
    return plural.empty() ? out.append(noun).append("s") : out.append(plural);
}

std::string console_number(double v) {
    if (!std::isfinite(v)) return format_number(v);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
}

namespace {

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629 table: no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0 when the bytes there are not one.
size_t utf8_length(std::string_view s, size_t i) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
    const size_t left = s.size() - i;
    const unsigned char c = b(0);
    if (c < 0x80) return 1;
    auto cont = [&](size_t k, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
        return k < left && b(k) >= lo && b(k) <= hi;
    };
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
    if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
    if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
    if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
    if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
    if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
    return 0;
}

void put_hex(std::string& out, unsigned char c) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
}

}  // namespace

std::string printable(std::string_view s, size_t max_bytes) {
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        size_t n = utf8_length(s, i);
        // C1 controls (U+0080..U+009F, UTF-8 C2 80..C2 9F) act as escapes on some terminals.
        const bool c1 = n == 2 && c == 0xC2 && static_cast<unsigned char>(s[i + 1]) <= 0x9F;
        if (n == 1 && (c < 0x20 || c == 0x7F)) n = 0;
        const size_t width = n == 0 ? 4 : c1 ? 8 : n;
        if (i > 0 && out.size() + width > max_bytes) {
            out += "...(" + std::to_string(s.size()) + " bytes)";
            return out;
        }
        if (n == 0) {
            put_hex(out, c);
            i += 1;
        } else if (c1) {
            put_hex(out, c);
            put_hex(out, static_cast<unsigned char>(s[i + 1]));
            i += 2;
        } else {
            out.append(s.substr(i, n));
            i += n;
        }
    }
    return out;
}

std::string quote(std::string_view s, size_t max_bytes) {
    return "'" + printable(s, max_bytes) + "'";
}

}  // namespace sinkscope
