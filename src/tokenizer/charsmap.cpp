// Precompiled character map: Darts-clone double-array lookups (darts.h DoubleArrayImpl::
// commonPrefixSearch) and the HF grapheme-wise application of the rules.
#include "sinkscope/tokenizer/charsmap.hpp"

#include <cstring>

#include "sinkscope/core/error.hpp"
#include "sinkscope/tokenizer/pretokenize.hpp"
#include "sinkscope/tokenizer/unicode.hpp"

namespace sinkscope::tokenizer {

namespace {

// Fields of one double-array unit (darts.h DoubleArrayUnit).
bool has_leaf(uint32_t unit) {
    return (unit >> 8) & 1;
}
uint32_t value(uint32_t unit) {
    return unit & 0x7FFFFFFFu;
}
uint32_t label(uint32_t unit) {
    return unit & (0x80000000u | 0xFFu);
}
uint32_t offset(uint32_t unit) {
    return (unit >> 10) << ((unit & (1u << 9)) >> 6);
}

uint32_t read_u32_le(const char* p) {
    const auto* b = reinterpret_cast<const unsigned char*>(p);
    return uint32_t{b[0]} | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 24);
}

}  // namespace

PrecompiledCharsMap::PrecompiledCharsMap(std::string_view blob, const std::string& origin)
    : origin_(origin) {
    if (blob.empty()) return;
    SS_CHECK_INPUT(blob.size() > 4, origin, "precompiled_charsmap of ", blob.size(),
                   " bytes is too short");
    const uint32_t trie_size = read_u32_le(blob.data());
    SS_CHECK_INPUT(trie_size % 4 == 0 && trie_size >= 4 && trie_size <= blob.size() - 4, origin,
                   "precompiled_charsmap: trie size ", trie_size, " does not fit a blob of ",
                   blob.size(), " bytes");
    units_.resize(trie_size / 4);
    for (size_t i = 0; i < units_.size(); ++i) units_[i] = read_u32_le(blob.data() + 4 + 4 * i);
    strings_.assign(blob.substr(4 + trie_size));
}

template <typename F>
void PrecompiledCharsMap::prefixes(std::string_view key, F&& on_match) const {
    if (units_.empty()) return;
    size_t node = offset(units_[0]);
    for (size_t i = 0; i < key.size(); ++i) {
        const auto c = static_cast<unsigned char>(key[i]);
        if (c == 0) return;  // keys are NUL-terminated strings
        node ^= c;
        if (node >= units_.size()) return;
        const uint32_t unit = units_[node];
        if (label(unit) != c) return;
        node ^= offset(unit);
        if (node >= units_.size()) return;
        if (has_leaf(unit)) on_match(value(units_[node]), i + 1);
    }
}

std::string_view PrecompiledCharsMap::replacement(uint32_t at) const {
    SS_CHECK_INPUT(at < strings_.size(), origin_, "precompiled_charsmap: replacement offset ", at,
                   " outside its ", strings_.size(), "-byte string table");
    const char* begin = strings_.data() + at;
    const void* nul = std::memchr(begin, '\0', strings_.size() - at);
    SS_CHECK_INPUT(nul != nullptr, origin_, "precompiled_charsmap: unterminated replacement at ",
                   at);
    return {begin, static_cast<size_t>(static_cast<const char*>(nul) - begin)};
}

std::optional<std::string_view> PrecompiledCharsMap::shortest_match(std::string_view chunk) const {
    std::optional<uint32_t> first;
    prefixes(chunk, [&](uint32_t v, size_t) {
        if (!first) first = v;
    });
    if (!first) return std::nullopt;
    return replacement(*first);
}

std::pair<std::string_view, size_t> PrecompiledCharsMap::longest_match(
    std::string_view text) const {
    uint32_t best_value = 0;
    size_t best_len = 0;
    prefixes(text, [&](uint32_t v, size_t len) {
        if (len > best_len) {
            best_len = len;
            best_value = v;
        }
    });
    if (best_len == 0) return {{}, 0};
    return {replacement(best_value), best_len};
}

std::string PrecompiledCharsMap::normalize(std::string_view text) const {
    if (units_.empty()) return std::string(text);
    static const Regex grapheme(R"(\X)");
    std::string out;
    out.reserve(text.size());
    auto per_char = [&](std::string_view cluster) {
        for (size_t pos = 0; pos < cluster.size();) {
            const size_t len = utf8_char_len(cluster, pos);
            const std::string_view ch = cluster.substr(pos, len);
            const auto rule = utf8_decode_at(cluster, pos) >= 0 ? shortest_match(ch) : std::nullopt;
            out.append(rule ? *rule : ch);
            pos += len;
        }
    };
    size_t prev = 0;
    for (auto [b, e] : grapheme.find_all(text)) {
        per_char(text.substr(prev, b - prev));  // invalid bytes between clusters
        const std::string_view cluster = text.substr(b, e - b);
        if (cluster.size() < 6) {
            if (auto rule = shortest_match(cluster)) {
                out.append(*rule);
                prev = e;
                continue;
            }
        }
        per_char(cluster);
        prev = e;
    }
    per_char(text.substr(prev));
    return out;
}

std::string PrecompiledCharsMap::normalize_spm(std::string_view text,
                                               const SpmWhitespace& ws) const {
    static const std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
    static const std::string_view kSpace = "\xE2\x96\x81";        // '▁'
    // NormalizePrefix: (normalized piece, input bytes consumed).
    auto prefix = [&](std::string_view in) -> std::pair<std::string_view, size_t> {
        const auto [rule, len] = longest_match(in);
        if (len > 0) return {rule, len};
        if (utf8_decode_at(in, 0) < 0) return {kReplacement, 1};
        const size_t n = utf8_char_len(in, 0);
        return {in.substr(0, n), n};
    };
    std::string out;
    out.reserve(text.size() + 8);
    if (ws.remove_extra_whitespaces) {
        while (!text.empty()) {
            const auto [piece, n] = prefix(text);
            if (piece != " ") break;
            text.remove_prefix(n);
        }
    }
    if (text.empty()) return out;
    if (ws.add_dummy_prefix) out.append(ws.escape_whitespaces ? kSpace : " ");
    bool prev_space = ws.remove_extra_whitespaces;
    while (!text.empty()) {
        auto [piece, n] = prefix(text);
        if (prev_space)
            while (!piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
        if (!piece.empty()) {
            for (char c : piece) {
                if (c == ' ' && ws.escape_whitespaces) {
                    out.append(kSpace);
                } else {
                    out.push_back(c);
                }
            }
            prev_space = piece.back() == ' ';
        }
        text.remove_prefix(n);
        if (!ws.remove_extra_whitespaces) prev_space = false;
    }
    if (ws.remove_extra_whitespaces) {
        const std::string_view space = ws.escape_whitespaces ? kSpace : " ";
        while (out.size() >= space.size() &&
               std::string_view(out).substr(out.size() - space.size()) == space)
            out.resize(out.size() - space.size());
    }
    return out;
}

}  // namespace sinkscope::tokenizer
