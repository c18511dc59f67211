// The Hugging Face tokenization pipeline as data: added tokens -> normalizer -> pre-tokenizer
// -> BPE model -> decoder and template. tokenizer.json and GGUF vocabularies both load into it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sinkscope/tokenizer/bpe.hpp"
#include "sinkscope/tokenizer/charsmap.hpp"
#include "sinkscope/tokenizer/pretokenize.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"

namespace sinkscope::tokenizer {

// A token matched as a whole in the text before BPE (HF AddedToken).
struct AddedToken {
    std::string content;
    int32_t id = -1;
    bool special = true;       // skipped by decode()
    bool normalized = false;   // matched in the normalized text instead of the raw text
    bool lstrip = false;       // swallows whitespace on its left
    bool rstrip = false;       // swallows whitespace on its right
    bool single_word = false;  // only matches when not inside a word
};

struct NormalizerStep {
    enum class Kind {
        Prepend,
        Replace,
        Nfc,
        Strip,
        Lowercase,
        Bert,
        Precompiled,
        SentencePiece
    } kind;
    std::string a, b;  // Prepend: a; Replace: a -> b; Strip: a = "l", "r" or "lr"
    // Bert (HF BertNormalizer): which of its passes run, in this order.
    bool clean_text = true, handle_chinese_chars = true, strip_accents = true, lowercase = true;
    std::shared_ptr<Regex> regex = nullptr;  // Replace with a Regex pattern: matches -> b
    // Precompiled (HF, grapheme-wise) and SentencePiece (sentencepiece's own normalizer: the
    // rules, then the whitespace options `spm`).
    std::shared_ptr<const PrecompiledCharsMap> charsmap = nullptr;
    SpmWhitespace spm = {};
};

struct PreTokenizerStep {
    enum class Kind { Split, ByteLevel, Metaspace } kind = Kind::Split;
    std::shared_ptr<Regex> regex;  // Split, ByteLevel with use_regex
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;             // ByteLevel
    std::string replacement = "\xE2\x96\x81";  // Metaspace ('▁')
    enum class Prepend { Always, First, Never } prepend = Prepend::Always;
    bool split = true;  // Metaspace: cut before every replacement character
};

struct DecoderConfig {
    bool byte_level = false;         // pieces are in GPT-2's byte alphabet
    std::string space_marker;        // replaced by ' ' (SentencePiece '▁'); empty: none
    bool byte_fallback = false;      // <0xXX> pieces are raw bytes
    int strip_leading_spaces = 0;    // removed from the start of the decoded text
    std::string wordpiece_prefix;    // WordPiece: "##" pieces glue to the previous one, others
                                     // are joined with spaces
    bool wordpiece_cleanup = false;  // " ." -> ".", " n't" -> "n't", ... (HF cleanup)
};

// One element of a pair template: special token ids, or sequence A (1) / B (2).
struct TemplatePiece {
    int sequence = 0;  // 0: the special `ids`; 1: first text; 2: second text
    std::vector<int32_t> ids;
    int32_t type_id = 0;
};

struct PipelineConfig {
    std::string kind;    // reported by Tokenizer::kind()
    std::string origin;  // file the tokenizer came from (error messages)
    std::vector<AddedToken> added;
    std::vector<NormalizerStep> normalizer;
    std::vector<PreTokenizerStep> pre_tokenizer;
    DecoderConfig decoder;
    std::vector<int32_t> prefix, suffix;  // post-processor template around one sequence
    std::vector<TemplatePiece> pair;      // post-processor template for a pair (may be empty)
    int32_t bos = -1, eos = -1;
};

std::unique_ptr<Tokenizer> make_pipeline_tokenizer(PipelineConfig config,
                                                   std::unique_ptr<PieceModel> model);
std::unique_ptr<Tokenizer> make_pipeline_tokenizer(PipelineConfig config, BpeModel model);

// HF BertNormalizer: drop control characters and map whitespace to ' ', space out CJK
// ideographs, strip accents (NFD, drop Mn marks), lowercase.
std::string bert_normalize(std::string_view text, const NormalizerStep& options);
// Regexes of HF BertPreTokenizer: whitespace (removed) and punctuation (isolated).
extern const char* const kBertPunctuationPattern;

// Normalizer steps applied in order (exposed for tests).
std::string apply_normalizer(const std::vector<NormalizerStep>& steps, std::string text);

}  // namespace sinkscope::tokenizer
