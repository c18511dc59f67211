// PCRE2-backed pre-tokenizer regexes and HF split behaviours.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "sinkscope/tokenizer/pretokenize.hpp"

#include <pcre2.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"

namespace sinkscope::tokenizer {

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
    R"(\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {
pcre2_code* as_code(void* p) {
    return static_cast<pcre2_code*>(p);
}
}  // namespace

Regex::Regex(const std::string& pattern, std::string origin)
    : pattern_(pattern), origin_(std::move(origin)) {
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_offset, nullptr);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        const std::string what =
            detail::concat("pre-tokenizer regex ", quote(pattern), " does not compile at offset ",
                           err_offset, " (", reinterpret_cast<char*>(msg), ")");
        if (origin_.empty()) throw UnsupportedError(what);
        throw UnsupportedError(origin_, what);
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
    code_ = code;
}

Regex::~Regex() {
    pcre2_code_free(as_code(code_));
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
    std::vector<std::pair<size_t, size_t>> out;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(as_code(code_), nullptr);
    SS_CHECK(md != nullptr, "pcre2_match_data_create failed");
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t start = 0;
    while (start <= text.size()) {
        const int rc = pcre2_match(as_code(code_), subject, text.size(), start, 0, md, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            pcre2_match_data_free(md);
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            // A pattern from a file can hit PCRE2's match or depth limit on some text
            // (catastrophic backtracking): a property of that file, not a bug of sinkscope.
            const std::string what =
                detail::concat("pre-tokenizer regex ", quote(pattern_),
                               " failed on the text: ", reinterpret_cast<char*>(msg));
            if (origin_.empty()) throw InternalError(what);
            throw InputError(origin_, what);
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t b = ov[0], e = ov[1];
        if (e > b) out.emplace_back(b, e);
        if (e > start) {
            start = e;
        } else {
            // Empty match: step over one character (never into the middle of one).
            if (start >= text.size()) break;
            start += 1;
            while (start < text.size() && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80)
                ++start;
        }
    }
    pcre2_match_data_free(md);
    return out;
}

SplitBehavior parse_split_behavior(const std::string& name) {
    if (name == "Removed") return SplitBehavior::Removed;
    if (name == "Isolated") return SplitBehavior::Isolated;
    if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
    if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
    if (name == "Contiguous") return SplitBehavior::Contiguous;
    throw UnsupportedError("pre-tokenizer Split behavior " + quote(name));
}

std::vector<std::pair<size_t, size_t>> split_by_regex(std::string_view text, const Regex& re,
                                                      SplitBehavior behavior, bool invert) {
    // Mark every byte range as delimiter (match) or not, then apply the behaviour
    // (tokenizers NormalizedString::split).
    std::vector<std::pair<std::pair<size_t, size_t>, bool>> spans;  // (range, is_delimiter)
    size_t prev = 0;
    for (auto [b, e] : re.find_all(text)) {
        if (b > prev) spans.push_back({{prev, b}, invert});
        spans.push_back({{b, e}, !invert});
        prev = e;
    }
    if (prev < text.size()) spans.push_back({{prev, text.size()}, invert});

    std::vector<std::pair<size_t, size_t>> out;
    switch (behavior) {
        case SplitBehavior::Removed:
            for (auto& [r, delim] : spans)
                if (!delim) out.push_back(r);
            break;
        case SplitBehavior::Isolated:
            for (auto& [r, delim] : spans) out.push_back(r);
            break;
        case SplitBehavior::Contiguous: {
            bool prev_delim = false;
            for (const auto& [r, delim] : spans) {
                if (delim && prev_delim) {
                    out.back().second = r.second;
                } else {
                    out.push_back(r);
                }
                prev_delim = delim;
            }
            break;
        }
        case SplitBehavior::MergedWithPrevious: {
            bool prev_delim = false;
            for (const auto& [r, delim] : spans) {
                if (delim && !out.empty() && !prev_delim) {
                    out.back().second = r.second;
                } else {
                    out.push_back(r);
                }
                prev_delim = delim;
            }
            break;
        }
        case SplitBehavior::MergedWithNext: {
            bool pending = false;  // the last piece is a delimiter waiting for its follower
            for (const auto& [r, delim] : spans) {
                if (pending && !delim) {
                    out.back().second = r.second;
                    pending = false;
                } else {
                    out.push_back(r);
                    pending = delim;
                }
            }
            break;
        }
    }
    return out;
}

}  // namespace sinkscope::tokenizer
