// WordPiece model and the BERT normalizer / pre-tokenizer pieces it relies on.
#include "sinkscope/tokenizer/wordpiece.hpp"

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/tokenizer/hf_pipeline.hpp"
#include "sinkscope/tokenizer/unicode.hpp"

namespace sinkscope::tokenizer {

const char* const kBertPunctuationPattern =
    R"([\p{P}\x{21}-\x{2F}\x{3A}-\x{40}\x{5B}-\x{60}\x{7B}-\x{7E}])";

WordPieceModel::WordPieceModel(Vocab vocab, int32_t unk_id, std::string prefix,
                               size_t max_input_chars_per_word)
    : vocab_(std::move(vocab)),
      unk_id_(unk_id),
      prefix_(std::move(prefix)),
      max_chars_(max_input_chars_per_word) {}

void WordPieceModel::encode(std::string_view word, std::vector<int32_t>& out) const {
    if (word.empty()) return;
    auto unk = [&] {
        if (unk_id_ < 0)
            throw InputError("<text>", "word " + quote(word) +
                                           " is not covered by the vocabulary and there is no "
                                           "unknown token");
        out.push_back(unk_id_);
    };
    const std::vector<size_t> starts = utf8_char_starts(word);
    const size_t n = starts.size();
    if (n > max_chars_) return unk();
    std::vector<int32_t> pieces;
    std::string candidate;
    for (size_t i = 0; i < n;) {
        int32_t found = -1;
        size_t j = n;
        for (; j > i; --j) {
            const size_t e = j < n ? starts[j] : word.size();
            candidate.assign(i > 0 ? prefix_ : std::string());
            candidate.append(word.substr(starts[i], e - starts[i]));
            found = vocab_.find(candidate);
            if (found >= 0) break;
        }
        if (found < 0) return unk();
        pieces.push_back(found);
        i = j;
    }
    out.insert(out.end(), pieces.begin(), pieces.end());
}

namespace {
// Replaces every match of `re` by replace(match).
template <typename F>
std::string replace_matches(const std::string& text, const Regex& re, F replace) {
    std::string out;
    out.reserve(text.size());
    size_t prev = 0;
    for (auto [b, e] : re.find_all(text)) {
        out.append(text, prev, b - prev);
        out += replace(std::string_view(text).substr(b, e - b));
        prev = e;
    }
    out.append(text, prev, std::string::npos);
    return out;
}
}  // namespace

std::string bert_normalize(std::string_view text, const NormalizerStep& o) {
    std::string s(text);
    if (o.clean_text) {
        // NUL, U+FFFD and "other" characters (Cc Cf Cn Co Cs) go, except \t \n \r, which
        // count as whitespace; every whitespace character becomes ' '.
        static const Regex control(R"([\x{0}\x{FFFD}]|(?![\t\n\r])\p{C})");
        static const Regex space(R"(\s)");
        s = replace_matches(s, control, [](std::string_view) { return std::string(); });
        s = replace_matches(s, space, [](std::string_view) { return std::string(" "); });
    }
    if (o.handle_chinese_chars) {
        static const Regex cjk(
            R"([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F})"
            R"(\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}])");
        s = replace_matches(s, cjk, [](std::string_view m) {
            std::string spaced(1, ' ');
            spaced.append(m);
            spaced.push_back(' ');
            return spaced;
        });
    }
    if (o.strip_accents) {
        static const Regex mark(R"(\p{Mn})");
        s = replace_matches(nfd_normalize(s), mark, [](std::string_view) { return std::string(); });
    }
    if (o.lowercase) s = to_lower(s);
    return s;
}

}  // namespace sinkscope::tokenizer
