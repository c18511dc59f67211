// UTF-8 decoding that never drops a byte, GPT-2's byte-level alphabet and NFC composition.
#include "sinkscope/tokenizer/unicode.hpp"

#include <algorithm>
#include <array>
#include <unordered_map>

namespace sinkscope::tokenizer {

namespace {
#include "lowercase_table.inc"
#include "nfc_tables.inc"

bool is_cont(uint8_t b) {
    return (b & 0xC0) == 0x80;
}
}  // namespace

size_t utf8_char_len(std::string_view s, size_t pos) {
    const auto b0 = static_cast<uint8_t>(s[pos]);
    if (b0 < 0x80) return 1;
    size_t n = 0;
    uint32_t min_cp = 0;
    if ((b0 & 0xE0) == 0xC0) {
        n = 2;
        min_cp = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        n = 3;
        min_cp = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        n = 4;
        min_cp = 0x10000;
    } else {
        return 1;  // continuation byte or 0xF8..0xFF at a character start
    }
    if (pos + n > s.size()) return 1;
    uint32_t cp = b0 & (0x7F >> n);
    for (size_t i = 1; i < n; ++i) {
        const auto b = static_cast<uint8_t>(s[pos + i]);
        if (!is_cont(b)) return 1;
        cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return 1;
    return n;
}

int32_t utf8_decode_at(std::string_view s, size_t pos) {
    const size_t n = utf8_char_len(s, pos);
    const auto b0 = static_cast<uint8_t>(s[pos]);
    if (n == 1) return b0 < 0x80 ? b0 : -1;
    uint32_t cp = b0 & (0x7F >> n);
    for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<uint8_t>(s[pos + i]) & 0x3F);
    return static_cast<int32_t>(cp);
}

void utf8_append(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

bool utf8_is_valid(std::string_view s) {
    for (size_t pos = 0; pos < s.size();) {
        if (utf8_decode_at(s, pos) < 0) return false;
        pos += utf8_char_len(s, pos);
    }
    return true;
}

std::vector<size_t> utf8_char_starts(std::string_view s) {
    std::vector<size_t> starts;
    starts.reserve(s.size());
    for (size_t pos = 0; pos < s.size(); pos += utf8_char_len(s, pos)) starts.push_back(pos);
    return starts;
}

namespace {
struct ByteLevelTables {
    std::array<uint32_t, 256> to_cp{};
    std::unordered_map<uint32_t, uint8_t> to_byte;
    ByteLevelTables() {
        // Printable bytes keep their code point; the others take U+0100, U+0101, ... in order.
        auto printable = [](int b) {
            return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        };
        uint32_t next = 0x100;
        for (int b = 0; b < 256; ++b) {
            to_cp[b] = printable(b) ? static_cast<uint32_t>(b) : next++;
            to_byte[to_cp[b]] = static_cast<uint8_t>(b);
        }
    }
};
const ByteLevelTables& byte_level_tables() {
    static const ByteLevelTables tables;
    return tables;
}
}  // namespace

uint32_t byte_to_unicode(uint8_t b) {
    return byte_level_tables().to_cp[b];
}

int32_t unicode_to_byte(uint32_t cp) {
    if (cp < 0x100) {  // printable Latin-1 maps to itself
        const uint32_t back = byte_level_tables().to_cp[cp];
        return back == cp ? static_cast<int32_t>(cp) : -1;
    }
    const auto& m = byte_level_tables().to_byte;
    auto it = m.find(cp);
    return it == m.end() ? -1 : it->second;
}

std::string bytes_to_byte_level(std::string_view bytes) {
    const auto& t = byte_level_tables();
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes) utf8_append(out, t.to_cp[static_cast<uint8_t>(c)]);
    return out;
}

std::string byte_level_to_bytes(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        const size_t n = utf8_char_len(text, pos);
        const int32_t cp = utf8_decode_at(text, pos);
        const int32_t b = cp < 0 ? -1 : unicode_to_byte(static_cast<uint32_t>(cp));
        if (b >= 0) {
            out += static_cast<char>(b);
        } else {
            out.append(text.substr(pos, n));
        }
        pos += n;
    }
    return out;
}

// ---- NFC: decompose canonically, order marks by combining class, compose (UAX #15) ----------
namespace {
constexpr uint32_t kHangulS = 0xAC00, kHangulL = 0x1100, kHangulV = 0x1161, kHangulT = 0x11A7;
constexpr uint32_t kHangulLCount = 19, kHangulVCount = 21, kHangulTCount = 28;
constexpr uint32_t kHangulNCount = kHangulVCount * kHangulTCount;
constexpr uint32_t kHangulSCount = kHangulLCount * kHangulNCount;

struct NfcTables {
    std::unordered_map<uint32_t, uint8_t> ccc;
    std::unordered_map<uint32_t, const uint32_t*> decomposition;  // -> 4 parts, 0-terminated
    std::unordered_map<uint64_t, uint32_t> composition;
    NfcTables() {
        for (const auto& e : kCombiningClass) ccc[e[0]] = static_cast<uint8_t>(e[1]);
        for (const auto& e : kDecomposition) decomposition[e[0]] = &e[1];
        for (const auto& e : kComposition)
            composition[(static_cast<uint64_t>(e[0]) << 32) | e[1]] = e[2];
    }
};
const NfcTables& nfc_tables() {
    static const NfcTables tables;
    return tables;
}
uint8_t combining_class(const NfcTables& t, uint32_t cp) {
    auto it = t.ccc.find(cp);
    return it == t.ccc.end() ? 0 : it->second;
}

// Full canonical decomposition of a run, with canonical ordering of combining marks.
std::vector<uint32_t> decompose_run(const NfcTables& t, const std::vector<uint32_t>& cps) {
    std::vector<uint32_t> d;  // full canonical decomposition
    d.reserve(cps.size() * 2);
    for (uint32_t cp : cps) {
        if (cp >= kHangulS && cp < kHangulS + kHangulSCount) {
            const uint32_t s = cp - kHangulS;
            d.push_back(kHangulL + s / kHangulNCount);
            d.push_back(kHangulV + (s % kHangulNCount) / kHangulTCount);
            if (s % kHangulTCount) d.push_back(kHangulT + s % kHangulTCount);
            continue;
        }
        auto it = t.decomposition.find(cp);
        if (it == t.decomposition.end()) {
            d.push_back(cp);
        } else {
            for (int k = 0; k < 4 && it->second[k]; ++k) d.push_back(it->second[k]);
        }
    }
    // Canonical ordering: stable sort of each run of non-starters by combining class.
    for (size_t i = 0; i < d.size();) {
        if (combining_class(t, d[i]) == 0) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j < d.size() && combining_class(t, d[j]) != 0) ++j;
        std::stable_sort(
            d.begin() + static_cast<long>(i), d.begin() + static_cast<long>(j),
            [&](uint32_t a, uint32_t b) { return combining_class(t, a) < combining_class(t, b); });
        i = j;
    }
    return d;
}

void nfd_run(const NfcTables& t, const std::vector<uint32_t>& cps, std::string& out) {
    for (uint32_t cp : decompose_run(t, cps)) utf8_append(out, cp);
}

// Composes one run of code points (no invalid bytes inside) and appends it as UTF-8.
void nfc_run(const NfcTables& t, const std::vector<uint32_t>& cps, std::string& out) {
    const std::vector<uint32_t> d = decompose_run(t, cps);
    // Canonical composition.
    std::vector<uint32_t> r;
    r.reserve(d.size());
    long starter = -1;  // index in r of the last starter
    int last_cc = -1;   // combining class of the last character appended after the starter
    for (uint32_t cp : d) {
        const int cc = combining_class(t, cp);
        if (starter >= 0 && (last_cc < cc || (last_cc == -1 && cc == 0))) {
            const uint32_t s = r[static_cast<size_t>(starter)];
            uint32_t composed = 0;
            if (s >= kHangulL && s < kHangulL + kHangulLCount && cp >= kHangulV &&
                cp < kHangulV + kHangulVCount && last_cc == -1) {
                composed =
                    kHangulS + ((s - kHangulL) * kHangulVCount + (cp - kHangulV)) * kHangulTCount;
            } else if (s >= kHangulS && s < kHangulS + kHangulSCount &&
                       (s - kHangulS) % kHangulTCount == 0 && cp > kHangulT &&
                       cp < kHangulT + kHangulTCount && last_cc == -1) {
                composed = s + (cp - kHangulT);
            } else {
                auto it = t.composition.find((static_cast<uint64_t>(s) << 32) | cp);
                if (it != t.composition.end()) composed = it->second;
            }
            if (composed) {
                r[static_cast<size_t>(starter)] = composed;
                continue;
            }
        }
        if (cc == 0) {
            starter = static_cast<long>(r.size());
            last_cc = -1;
        } else {
            last_cc = cc;
        }
        r.push_back(cp);
    }
    for (uint32_t cp : r) utf8_append(out, cp);
}
}  // namespace

namespace {
// Applies `run_fn` to maximal runs of well-formed characters; invalid bytes pass through.
template <typename RunFn>
std::string normalize_runs(std::string_view text, RunFn run_fn) {
    const NfcTables& t = nfc_tables();
    std::string out;
    out.reserve(text.size());
    std::vector<uint32_t> run;
    for (size_t pos = 0; pos < text.size();) {
        const size_t n = utf8_char_len(text, pos);
        const int32_t cp = utf8_decode_at(text, pos);
        if (cp < 0) {
            run_fn(t, run, out);
            run.clear();
            out += text[pos];
        } else {
            run.push_back(static_cast<uint32_t>(cp));
        }
        pos += n;
    }
    run_fn(t, run, out);
    return out;
}

// Below U+00C0 nothing decomposes and nothing combines unless a mark (>= U+0300) follows.
bool below(std::string_view text, int32_t limit) {
    for (size_t pos = 0; pos < text.size(); pos += utf8_char_len(text, pos))
        if (utf8_decode_at(text, pos) >= limit) return false;
    return true;
}
}  // namespace

std::string nfc_normalize(std::string_view text) {
    // Everything below U+0300 is already NFC (no decomposable character composes back into
    // something else without a following mark).
    if (below(text, 0x300)) return std::string(text);
    return normalize_runs(text, nfc_run);
}

std::string nfd_normalize(std::string_view text) {
    if (below(text, 0xC0)) return std::string(text);
    return normalize_runs(text, nfd_run);
}

std::string to_lower(std::string_view text) {
    static const std::unordered_map<uint32_t, const uint32_t*> table = [] {
        std::unordered_map<uint32_t, const uint32_t*> m;
        for (const auto& e : kLowercase) m[e[0]] = &e[1];
        return m;
    }();
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        const size_t n = utf8_char_len(text, pos);
        const auto b = static_cast<uint8_t>(text[pos]);
        if (b < 0x80) {
            out += static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b);
        } else {
            const int32_t cp = utf8_decode_at(text, pos);
            auto it = cp < 0 ? table.end() : table.find(static_cast<uint32_t>(cp));
            if (it == table.end()) {
                out.append(text.substr(pos, n));
            } else {
                for (int k = 0; k < 3 && it->second[k]; ++k) utf8_append(out, it->second[k]);
            }
        }
        pos += n;
    }
    return out;
}

}  // namespace sinkscope::tokenizer
