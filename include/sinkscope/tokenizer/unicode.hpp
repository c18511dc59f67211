// UTF-8 helpers shared by the tokenizers: tolerant decoding (an invalid byte is its own
// one-byte "character", so no input byte is ever lost), GPT-2's byte <-> unicode map.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sinkscope::tokenizer {

// Length in bytes of the UTF-8 character starting at s[pos]: 1..4 for a well-formed sequence
// (overlong forms, surrogates and code points above U+10FFFF are rejected), 1 for any invalid
// or truncated sequence.
size_t utf8_char_len(std::string_view s, size_t pos);
// Code point at s[pos] (a well-formed sequence), or -1 for an invalid byte.
int32_t utf8_decode_at(std::string_view s, size_t pos);
// Appends the UTF-8 encoding of a code point (0..0x10FFFF, no surrogates).
void utf8_append(std::string& out, uint32_t cp);
// True when every byte sequence in s is well-formed UTF-8.
bool utf8_is_valid(std::string_view s);
// Byte offsets where each character starts (tolerant: invalid bytes are characters).
std::vector<size_t> utf8_char_starts(std::string_view s);

// GPT-2 byte-level alphabet: every byte maps to one printable code point (the printable
// Latin-1 bytes map to themselves, the rest to U+0100 + k in byte order).
uint32_t byte_to_unicode(uint8_t b);
// Inverse map; -1 when the code point is not in the alphabet.
int32_t unicode_to_byte(uint32_t cp);
// Maps each byte of `bytes` to its alphabet character (UTF-8 result).
std::string bytes_to_byte_level(std::string_view bytes);
// Inverse: alphabet characters back to bytes; characters outside the alphabet are kept as
// their own UTF-8 bytes.
std::string byte_level_to_bytes(std::string_view text);

// Canonical composition (Unicode NFC) of well-formed text; invalid bytes pass through.
std::string nfc_normalize(std::string_view text);
// Canonical decomposition (Unicode NFD); invalid bytes pass through.
std::string nfd_normalize(std::string_view text);
// Full Unicode lowercase mapping per character (as Rust char::to_lowercase / Python lower).
std::string to_lower(std::string_view text);

}  // namespace sinkscope::tokenizer
