// Pre-tokenizer regexes (PCRE2 with UTF and Unicode properties) and the Hugging Face split
// behaviours that cut a text into the pieces BPE works on.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sinkscope::tokenizer {

// Well-known pre-tokenizer patterns (the same ones HF tokenizers and llama.cpp use).
extern const char* const kGpt2Pattern;    // GPT-2 / GPT-NeoX / RoBERTa / phi-2 ByteLevel regex
extern const char* const kLlama3Pattern;  // Llama 3 (digits in groups of up to 3)
extern const char* const kQwen2Pattern;   // Qwen2 (single digits)

// A compiled PCRE2 pattern (JIT when available). Invalid UTF-8 in the subject is allowed:
// such bytes never match and end up in the gaps between matches.
class Regex {
public:
    // `origin`: the file the pattern came from, named in errors (empty: a built-in pattern).
    // Throws UnsupportedError if it does not compile.
    explicit Regex(const std::string& pattern, std::string origin = {});
    ~Regex();
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;
    // [begin, end) byte ranges of successive non-overlapping matches, left to right.
    std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
    const std::string& pattern() const { return pattern_; }

private:
    std::string pattern_;
    std::string origin_;
    void* code_ = nullptr;  // pcre2_code_8*
};

// How HF `Split` keeps the matched delimiters (tokenizers SplitDelimiterBehavior).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
SplitBehavior parse_split_behavior(const std::string& name);  // throws UnsupportedError

// Cuts `text` at the matches of `re` (or at the gaps between them when `invert`), keeping
// delimiters as `behavior` says; empty pieces are dropped. Returns byte ranges.
std::vector<std::pair<size_t, size_t>> split_by_regex(std::string_view text, const Regex& re,
                                                      SplitBehavior behavior, bool invert);

}  // namespace sinkscope::tokenizer
