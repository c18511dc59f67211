// SentencePiece's precompiled character map (normalizer_spec.precompiled_charsmap; HF
// `Precompiled` normalizer): rewrite rules such as nmt_nfkc stored as a Darts-clone double-array
// trie over UTF-8 keys plus a blob of NUL-terminated replacement strings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sinkscope::tokenizer {

// The whitespace options of a sentencepiece NormalizerSpec.
struct SpmWhitespace {
    bool add_dummy_prefix = true;          // "▁" before the text
    bool remove_extra_whitespaces = true;  // drop leading/trailing spaces, collapse runs
    bool escape_whitespaces = true;        // ' ' -> '▁'
};

class PrecompiledCharsMap {
public:
    // `blob` = <uint32 LE trie size><trie units (uint32 LE)><replacement strings>
    // (sentencepiece normalizer.cc DecodePrecompiledCharsMap). Throws InputError(origin, ...)
    // when the blob is malformed. An empty blob is an empty map (nothing is rewritten).
    PrecompiledCharsMap(std::string_view blob, const std::string& origin);

    // Replacement of the shortest key that prefixes `chunk`, if any (HF spm_precompiled
    // transform: the first common-prefix result).
    std::optional<std::string_view> shortest_match(std::string_view chunk) const;
    // Longest key prefixing `text`: (replacement, key length); key length 0 when none
    // (sentencepiece Normalizer::NormalizePrefix).
    std::pair<std::string_view, size_t> longest_match(std::string_view text) const;

    // HF tokenizers `Precompiled` normalizer: text cut into extended grapheme clusters; a
    // cluster shorter than 6 bytes that a key prefixes is replaced whole, otherwise each
    // character is replaced by its own rule or kept. Invalid UTF-8 bytes pass through.
    std::string normalize(std::string_view text) const;

    // sentencepiece Normalizer::Normalize: the longest rule at each position (a character
    // without one is kept; an invalid UTF-8 byte becomes U+FFFD), then the whitespace options.
    std::string normalize_spm(std::string_view text, const SpmWhitespace& ws) const;

    bool empty() const { return units_.empty(); }

private:
    // Values of every key that prefixes `key`, shortest first, with their lengths.
    template <typename F>
    void prefixes(std::string_view key, F&& on_match) const;
    std::string_view replacement(uint32_t offset) const;

    std::vector<uint32_t> units_;
    std::string strings_;
    std::string origin_;
};

}  // namespace sinkscope::tokenizer
