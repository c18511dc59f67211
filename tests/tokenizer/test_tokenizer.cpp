// Tokenizer unit tests on hand-made vocabularies: UTF-8 and byte-level helpers, NFC, regex
// splitting, BPE merge orders, byte fallback, llama2.c encoding, BOS policy, bad input.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "sinkscope/core/error.hpp"
#include "sinkscope/tokenizer/hf_pipeline.hpp"
#include "sinkscope/tokenizer/pretokenize.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"
#include "sinkscope/tokenizer/unicode.hpp"
#include "sinkscope/tokenizer/wordpiece.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;
using namespace sinkscope::tokenizer;
using nlohmann::json;

namespace {

void write_text(const fs::path& p, const std::string& s) {
    std::ofstream(p, std::ios::binary) << s;
}

std::vector<std::string> pieces_of(std::string_view text,
                                   const std::vector<std::pair<size_t, size_t>>& ranges) {
    std::vector<std::string> out;
    for (auto [b, e] : ranges) out.emplace_back(text.substr(b, e - b));
    return out;
}

// A byte-level BPE tokenizer.json: the 256 byte symbols (id = byte value) plus the merges given
// (the merged pieces get the next ids in order).
fs::path write_byte_level_json(const fs::path& dir, const std::vector<std::string>& merges,
                               bool add_prefix_space = false) {
    json vocab = json::object();
    int id = 0;
    for (int b = 0; b < 256; ++b) vocab[bytes_to_byte_level(std::string(1, char(b)))] = id++;
    for (const std::string& m : merges) {
        const size_t sp = m.find(' ');
        vocab[m.substr(0, sp) + m.substr(sp + 1)] = id++;
    }
    json root = {
        {"added_tokens",
         json::array(
             {{{"id", id}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}}})},
        {"normalizer", nullptr},
        {"pre_tokenizer",
         {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"use_regex", true}}},
        {"post_processor", nullptr},
        {"decoder", {{"type", "ByteLevel"}}},
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
    };
    const fs::path p = dir / "tokenizer.json";
    write_text(p, root.dump());
    return p;
}

// A SentencePiece-style tokenizer.json (Llama 2 layout): <unk> <s> </s>, 256 byte tokens,
// then the pieces given; Prepend/Replace normalizer, byte fallback, BOS template.
fs::path write_spm_json(const fs::path& dir, const std::vector<std::string>& pieces,
                        const std::vector<std::string>& merges) {
    json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
    int id = 3;
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        vocab[name] = id++;
    }
    for (const std::string& p : pieces) vocab[p] = id++;
    const std::string sp = "\xE2\x96\x81";
    json root = {
        {"added_tokens", json::array({{{"id", 0}, {"content", "<unk>"}, {"special", true}},
                                      {{"id", 1}, {"content", "<s>"}, {"special", true}},
                                      {{"id", 2}, {"content", "</s>"}, {"special", true}}})},
        {"normalizer",
         {{"type", "Sequence"},
          {"normalizers",
           json::array({{{"type", "Prepend"}, {"prepend", sp}},
                        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", sp}}})}}},
        {"pre_tokenizer", nullptr},
        {"post_processor",
         {{"type", "TemplateProcessing"},
          {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
          {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
        {"decoder",
         {{"type", "Sequence"},
          {"decoders",
           json::array({{{"type", "Replace"}, {"pattern", {{"String", sp}}}, {"content", " "}},
                        {{"type", "ByteFallback"}},
                        {{"type", "Fuse"}},
                        {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
        {"model",
         {{"type", "BPE"},
          {"vocab", vocab},
          {"merges", merges},
          {"byte_fallback", true},
          {"unk_token", "<unk>"},
          {"fuse_unk", true}}},
    };
    const fs::path p = dir / "tokenizer.json";
    write_text(p, root.dump());
    return p;
}

// llama2.c tok.bin: <unk> <s> </s>, 256 byte tokens, then (piece, score) entries.
fs::path write_llama2c_bin(const fs::path& dir,
                           const std::vector<std::pair<std::string, float>>& entries,
                           int64_t& n_vocab) {
    std::vector<std::pair<std::string, float>> all = {
        {"<unk>", 0}, {"\n<s>\n", 0}, {"\n</s>\n", 0}};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        all.push_back({name, 0});
    }
    all.insert(all.end(), entries.begin(), entries.end());
    std::string bytes;
    auto put = [&](const void* p, size_t n) { bytes.append(static_cast<const char*>(p), n); };
    const int32_t max_len = 16;
    put(&max_len, 4);
    for (const auto& [piece, score] : all) {
        const auto len = static_cast<int32_t>(piece.size());
        put(&score, 4);
        put(&len, 4);
        put(piece.data(), piece.size());
    }
    n_vocab = static_cast<int64_t>(all.size());
    const fs::path p = dir / "tok.bin";
    write_text(p, bytes);
    return p;
}

}  // namespace

// UTF-8 character lengths: 1-4 byte characters, and every malformed form is a 1-byte char.
TEST(Unicode, CharLengthsAndInvalidBytes) {
    EXPECT_EQ(utf8_char_len("a", 0), 1u);
    EXPECT_EQ(utf8_char_len("\xC3\xA9", 0), 2u);          // é
    EXPECT_EQ(utf8_char_len("\xE2\x96\x81", 0), 3u);      // ▁
    EXPECT_EQ(utf8_char_len("\xF0\x9F\xA6\x99", 0), 4u);  // 🦙
    EXPECT_EQ(utf8_decode_at("\xF0\x9F\xA6\x99", 0), 0x1F999);
    EXPECT_EQ(utf8_char_len("\xFF", 0), 1u);
    EXPECT_EQ(utf8_decode_at("\xFF", 0), -1);
    EXPECT_EQ(utf8_char_len("\xE2\x96", 0), 1u);          // truncated
    EXPECT_EQ(utf8_char_len("\xC0\xAF", 0), 1u);          // overlong '/'
    EXPECT_EQ(utf8_char_len("\xED\xA0\x80", 0), 1u);      // surrogate
    EXPECT_EQ(utf8_char_len("\xF4\x90\x80\x80", 0), 1u);  // above U+10FFFF
    EXPECT_FALSE(utf8_is_valid("a\x80"));
    EXPECT_TRUE(utf8_is_valid("a\xF0\x9F\xA6\x99"));
    EXPECT_EQ(utf8_char_starts("a\xC3\xA9\xFF").size(), 3u);
}

// GPT-2's byte alphabet: printable bytes map to themselves, space -> U+0120 'Ġ', byte 0 ->
// U+0100, newline -> U+010A 'Ċ'; the map is a bijection and bytes round-trip.
TEST(Unicode, ByteLevelAlphabet) {
    EXPECT_EQ(byte_to_unicode('A'), uint32_t{'A'});
    EXPECT_EQ(byte_to_unicode(' '), 0x120u);
    EXPECT_EQ(byte_to_unicode(0), 0x100u);
    EXPECT_EQ(byte_to_unicode('\n'), 0x10Au);
    EXPECT_EQ(byte_to_unicode(0xAD), 0x143u);  // the one gap inside Latin-1
    std::string all;
    for (int b = 0; b < 256; ++b) {
        EXPECT_EQ(unicode_to_byte(byte_to_unicode(static_cast<uint8_t>(b))), b);
        all += static_cast<char>(b);
    }
    EXPECT_EQ(byte_level_to_bytes(bytes_to_byte_level(all)), all);
    EXPECT_EQ(bytes_to_byte_level(" hi"), "\xC4\xA0hi");
}

// NFC examples from UAX #15: composition, canonical reordering, Hangul, singletons.
TEST(Unicode, NfcComposition) {
    EXPECT_EQ(nfc_normalize("e\xCC\x81"), "\xC3\xA9");                         // e + U+0301 -> é
    EXPECT_EQ(nfc_normalize("\xE1\xB8\x8B\xCC\xA3"), "\xE1\xB8\x8D\xCC\x87");  // ḋ + dot below
    EXPECT_EQ(nfc_normalize("\xE1\x84\x80\xE1\x85\xA1"), "\xEA\xB0\x80");      // ᄀ + ᅡ -> 가
    EXPECT_EQ(nfc_normalize("\xE2\x84\xA6"), "\xCE\xA9");  // OHM SIGN -> GREEK OMEGA
    EXPECT_EQ(nfc_normalize("plain ascii"), "plain ascii");
    EXPECT_EQ(nfc_normalize("\xFF"
                            "e\xCC\x81"),
              "\xFF\xC3\xA9");  // invalid byte kept
}

// HF's documented SplitDelimiterBehavior examples on "the-final--countdown" split at '-'.
TEST(PreTokenize, SplitBehaviors) {
    const std::string text = "the-final--countdown";
    const Regex dash("-");
    using V = std::vector<std::string>;
    EXPECT_EQ(pieces_of(text, split_by_regex(text, dash, SplitBehavior::Removed, false)),
              (V{"the", "final", "countdown"}));
    EXPECT_EQ(pieces_of(text, split_by_regex(text, dash, SplitBehavior::Isolated, false)),
              (V{"the", "-", "final", "-", "-", "countdown"}));
    EXPECT_EQ(pieces_of(text, split_by_regex(text, dash, SplitBehavior::MergedWithPrevious, false)),
              (V{"the-", "final-", "-", "countdown"}));
    EXPECT_EQ(pieces_of(text, split_by_regex(text, dash, SplitBehavior::MergedWithNext, false)),
              (V{"the", "-final", "-", "-countdown"}));
    EXPECT_EQ(pieces_of(text, split_by_regex(text, dash, SplitBehavior::Contiguous, false)),
              (V{"the", "-", "final", "--", "countdown"}));
}

// The GPT-2 pattern keeps a leading space with the word, contractions apart, and leaves the
// last space of a run for the next word; Unicode letters count as letters (UCP).
TEST(PreTokenize, Gpt2Pattern) {
    const Regex re(kGpt2Pattern);
    const std::string text = "Hello world's  123 \xC3\xA9t\xC3\xA9!!";
    EXPECT_EQ(pieces_of(text, re.find_all(text)),
              (std::vector<std::string>{"Hello", " world", "'s", " ", " 123", " \xC3\xA9t\xC3\xA9",
                                        "!!"}));
    EXPECT_THROW(Regex("(unclosed"), UnsupportedError);
}

// Merge ranks decide, not piece length: with merges [b c, a b] "abc" becomes a + bc.
TEST(HfBpe, MergeRankOrder) {
    testutil::ScratchDir dir;
    auto tok = load_hf_tokenizer(write_byte_level_json(dir.path(), {"b c", "a b", "a bc"}));
    const int32_t bc = 256, ab = 257, abc = 258;
    EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{abc}));
    EXPECT_EQ(tok->encode("abd"), (std::vector<int32_t>{ab, 'd'}));
    EXPECT_EQ(tok->encode("bc"), (std::vector<int32_t>{bc}));
    EXPECT_TRUE(tok->encode("").empty());
    EXPECT_EQ(tok->kind(), "bpe-byte-level");
}

// Byte-level BPE is lossless: any byte string (invalid UTF-8, 4-byte characters, controls)
// decodes back exactly; added tokens are matched whole and skipped by decode.
TEST(HfBpe, ByteLevelRoundTrip) {
    testutil::ScratchDir dir;
    auto tok = load_hf_tokenizer(write_byte_level_json(dir.path(), {"a b", "\xC4\xA0 ab"}));
    for (const std::string& text :
         {std::string("ab ab  ab\n\t"), std::string("\xF0\x9F\xA6\x99 llama"),
          std::string("bad \xFF\xFE bytes \xE2\x96"), std::string("\0nul", 4)}) {
        EXPECT_EQ(tok->decode(tok->encode(text)), text);
    }
    const auto ids = tok->encode("ab<|end|>ab");
    EXPECT_EQ(ids.size(), 3u);
    EXPECT_EQ(tok->piece(ids[1]), "<|end|>");
    EXPECT_EQ(tok->decode(ids), "abab");
}

// ByteLevel add_prefix_space puts a space before the first word only when none is there.
TEST(HfBpe, AddPrefixSpace) {
    testutil::ScratchDir dir;
    auto tok = load_hf_tokenizer(write_byte_level_json(dir.path(), {}, true));
    EXPECT_EQ(tok->encode("a"), (std::vector<int32_t>{' ', 'a'}));  // byte ids = bytes here
    EXPECT_EQ(tok->encode(" a"), (std::vector<int32_t>{' ', 'a'}));
}

// SentencePiece-style BPE: '▁' prefix and spaces, unknown characters become <0xXX> bytes,
// BOS from the template; decode strips the dummy-prefix space and skips <s>.
TEST(HfBpe, SentencePieceByteFallback) {
    testutil::ScratchDir dir;
    const std::string sp = "\xE2\x96\x81";
    auto tok = load_hf_tokenizer(
        write_spm_json(dir.path(), {sp, "h", "i", sp + "h", sp + "hi"}, {sp + " h", sp + "h i"}));
    const int32_t sp_hi = 259 + 4;
    EXPECT_EQ(tok->encode("hi"), (std::vector<int32_t>{sp_hi}));
    // 'é' (C3 A9) is not in the vocabulary: two byte tokens.
    EXPECT_EQ(tok->encode("hi\xC3\xA9"), (std::vector<int32_t>{sp_hi, 3 + 0xC3, 3 + 0xA9}));
    EXPECT_TRUE(tok->adds_bos_by_default());
    EXPECT_EQ(tok->encode_with_policy("hi", BosPolicy::ModelDefault),
              (std::vector<int32_t>{1, sp_hi}));
    EXPECT_EQ(tok->encode_with_policy("hi", BosPolicy::Never), (std::vector<int32_t>{sp_hi}));
    for (const std::string text : {"hi hi", "hi\xC3\xA9 \xF0\x9F\xA6\x99", " hi", ""})
        EXPECT_EQ(tok->decode(tok->encode_with_policy(text, BosPolicy::Always)), text);
    EXPECT_EQ(tok->kind(), "spm-bpe");
}

// llama2.c run.c: the best-scoring merge goes first ("bc" 2.0 before "ab" 1.0), then " a";
// unknown characters fall back to byte ids (byte + 3); decode drops the dummy space.
TEST(Llama2c, ScoreOrderAndByteFallback) {
    testutil::ScratchDir dir;
    int64_t n_vocab = 0;
    const fs::path bin = write_llama2c_bin(
        dir.path(),
        {{" ", 0.f}, {"a", 0.f}, {"b", 0.f}, {"c", 0.f}, {"ab", 1.f}, {"bc", 2.f}, {" a", 0.5f}},
        n_vocab);
    auto tok = load_llama2c_tokenizer(bin, n_vocab);
    const int32_t base = 259, space_a = base + 6, bc = base + 5, space = base;
    EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{space_a, bc}));
    EXPECT_EQ(tok->encode("\xC3\xA9"), (std::vector<int32_t>{space, 3 + 0xC3, 3 + 0xA9}));
    EXPECT_TRUE(tok->encode("").empty());
    EXPECT_EQ(tok->encode_with_policy("abc", BosPolicy::ModelDefault),
              (std::vector<int32_t>{1, space_a, bc}));
    EXPECT_EQ(tok->decode({1, space_a, bc}), "abc");
    EXPECT_EQ(tok->decode(tok->encode("a\xC3\xA9"
                                      "c")),
              "a\xC3\xA9"
              "c");
    EXPECT_THROW(tok->decode({static_cast<int32_t>(n_vocab)}), UsageError);
}

// A llama2.c tokenizer file cut short is an InputError naming the file, not a crash.
TEST(Llama2c, TruncatedFile) {
    testutil::ScratchDir dir;
    int64_t n_vocab = 0;
    const fs::path bin = write_llama2c_bin(dir.path(), {{"abc", 0.f}}, n_vocab);
    std::string bytes;
    {
        std::ifstream in(bin, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    write_text(bin, bytes.substr(0, bytes.size() - 2));
    try {
        load_llama2c_tokenizer(bin, n_vocab);
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("tok.bin"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos);
    }
    EXPECT_THROW(load_llama2c_tokenizer(bin, n_vocab + 5), InputError);
}

// Malformed tokenizer.json files: bad JSON and merges naming unknown pieces are InputErrors;
// unsupported model types are UnsupportedErrors; a missing file is an IoError.
TEST(HfBpe, BadFiles) {
    testutil::ScratchDir dir;
    write_text(dir / "bad.json", "{\"model\": ");
    EXPECT_THROW(load_hf_tokenizer(dir / "bad.json"), InputError);
    write_text(dir / "merge.json",
               R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a zz"]}})");
    EXPECT_THROW(load_hf_tokenizer(dir / "merge.json"), InputError);
    write_text(dir / "wl.json", R"({"model": {"type": "WordLevel", "vocab": {}}})");
    EXPECT_THROW(load_hf_tokenizer(dir / "wl.json"), UnsupportedError);
    EXPECT_THROW(load_hf_tokenizer(dir / "missing.json"), IoError);
}

// A post-processor whose special token ids lie past the vocabulary would put ids no model row
// exists for around every text (a fuzz finding: encode then decode threw a usage error): the
// file is refused at load, naming it and the id. The same ids inside the vocabulary load.
TEST(HfBpe, TemplateIdsOutsideTheVocabulary) {
    testutil::ScratchDir dir;
    const std::string vocab = R"("vocab": {"a": 0, "b": 1, "[CLS]": 2})";
    const auto with = [&](const std::string& processor) {
        return R"({"model": {"type": "BPE", )" + vocab + R"(, "merges": []}, "post_processor": )" +
               processor + "}";
    };
    const std::string single =
        R"("single": [{"SpecialToken": {"id": "[CLS]"}}, {"Sequence": {"id": "A"}}])";
    write_text(dir / "far.json", with(R"({"type": "TemplateProcessing", )" + single +
                                      R"(, "special_tokens": {"[CLS]": {"ids": [10]}}})"));
    try {
        load_hf_tokenizer(dir / "far.json");
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("far.json"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("token id 10 is outside the vocabulary (size 3)"),
                  std::string::npos)
            << e.what();
    }
    write_text(dir / "bert.json", with(R"({"type": "BertProcessing", "cls": ["[CLS]", 2],
                                            "sep": ["[SEP]", 7]})"));
    EXPECT_THROW(load_hf_tokenizer(dir / "bert.json"), InputError);
    write_text(dir / "near.json", with(R"({"type": "TemplateProcessing", )" + single +
                                       R"(, "special_tokens": {"[CLS]": {"ids": [2]}}})"));
    const auto tok = load_hf_tokenizer(dir / "near.json");
    EXPECT_EQ(tok->encode_with_policy("ab", BosPolicy::ModelDefault),
              (std::vector<int32_t>{2, 0, 1}));
}

// BOS policy names round-trip and unknown names are usage errors.
TEST(BosPolicy, Names) {
    for (BosPolicy p : {BosPolicy::ModelDefault, BosPolicy::Always, BosPolicy::Never})
        EXPECT_EQ(parse_bos_policy(bos_policy_name(p)), p);
    EXPECT_THROW(parse_bos_policy("sometimes"), UsageError);
}

// NFD decomposes and orders marks; lowercase uses the full Unicode mapping (Cyrillic, Greek,
// the two-code-point İ -> i + U+0307).
TEST(Unicode, NfdAndLowercase) {
    EXPECT_EQ(nfd_normalize("\xC3\xA9"), "e\xCC\x81");
    EXPECT_EQ(nfd_normalize("\xEA\xB0\x80"), "\xE1\x84\x80\xE1\x85\xA1");
    EXPECT_EQ(nfd_normalize("ascii"), "ascii");
    EXPECT_EQ(to_lower("ABC \xD0\x91\xCE\xA3"), "abc \xD0\xB1\xCF\x83");
    EXPECT_EQ(to_lower("\xC4\xB0"), "i\xCC\x87");
    EXPECT_EQ(to_lower("\xFF"), "\xFF");
}

// BertNormalizer: controls dropped, whitespace -> ' ', CJK spaced out, accents stripped,
// lowercased (the BERT paper's uncased preprocessing).
TEST(WordPiece, BertNormalizer) {
    NormalizerStep all{NormalizerStep::Kind::Bert, "", ""};
    EXPECT_EQ(bert_normalize("H\xC3\xA9llo\tW\x01orld\xE2\x80\x8D", all), "hello world");
    EXPECT_EQ(bert_normalize("a\xE4\xB8\xAD"
                             "b",
                             all),
              "a \xE4\xB8\xAD b");
    NormalizerStep keep = all;
    keep.strip_accents = false;
    keep.lowercase = false;
    EXPECT_EQ(bert_normalize("\xC3\x89t\xC3\xA9", keep), "\xC3\x89t\xC3\xA9");
}

// WordPiece is greedy longest-match-first with "##" continuations; a word it cannot cover,
// or one longer than the limit, is a single [UNK].
TEST(WordPiece, GreedyLongestMatch) {
    Vocab v;
    const std::vector<std::string> pieces = {"[UNK]", "un",  "##aff", "##able",
                                             "unaff", "##a", "##ble", "x"};
    for (size_t i = 0; i < pieces.size(); ++i) v.set(static_cast<int32_t>(i), pieces[i]);
    WordPieceModel wp(v, 0, "##", 8);
    std::vector<int32_t> out;
    wp.encode("unaffable", out);  // 9 chars > 8: unk
    EXPECT_EQ(out, (std::vector<int32_t>{0}));
    WordPieceModel wide(v, 0, "##", 100);
    out.clear();
    wide.encode("unaffable", out);  // "unaff" (longest) then "##able"
    EXPECT_EQ(out, (std::vector<int32_t>{4, 3}));
    out.clear();
    wide.encode("unx", out);  // "un" then "##x" missing: whole word unk
    EXPECT_EQ(out, (std::vector<int32_t>{0}));
    // Without an unknown token the word is refused, quoted with its control byte escaped.
    WordPieceModel no_unk(v, -1, "##", 100);
    try {
        no_unk.encode("q\nz", out);
        ADD_FAILURE() << "no error for an uncovered word";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("word 'q\\x0az' is not covered"), std::string::npos)
            << e.what();
    }
}

// A long SentencePiece text (cut into chunks internally) gives the same ids as its words
// encoded one by one: 150 x "hi" then an unknown character as bytes.
TEST(HfBpe, LongTextChunksAgree) {
    testutil::ScratchDir dir;
    const std::string sp = "\xE2\x96\x81";
    auto tok = load_hf_tokenizer(
        write_spm_json(dir.path(), {sp, "h", "i", sp + "h", sp + "hi"}, {sp + " h", sp + "h i"}));
    const int32_t sp_id = 259, sp_hi = 259 + 4;
    std::string text;
    std::vector<int32_t> expected;
    for (int k = 0; k < 150; ++k) {
        text += k ? " hi" : "hi";
        expected.push_back(sp_hi);
    }
    text += " \xC3\xA9";
    expected.insert(expected.end(), {sp_id, 3 + 0xC3, 3 + 0xA9});
    ASSERT_GT(text.size(), 256u);
    EXPECT_EQ(tok->encode(text), expected);
    EXPECT_EQ(tok->decode(tok->encode(text)), text);
}

namespace {
// A vocabulary-only GGUF v3 file: string keys and string/int32/float32 arrays.
class GgufBuilder {
public:
    void str(const std::string& key, const std::string& value) {
        header(key, 8);
        put_str(value);
        ++n_kv_;
    }
    void strings(const std::string& key, const std::vector<std::string>& values) {
        header(key, 9);
        put_u32(8);
        put_u64(values.size());
        for (const auto& v : values) put_str(v);
        ++n_kv_;
    }
    void floats(const std::string& key, const std::vector<float>& values) {
        header(key, 9);
        put_u32(6);
        put_u64(values.size());
        for (float v : values) body_.append(reinterpret_cast<const char*>(&v), 4);
        ++n_kv_;
    }
    std::string bytes() const {
        std::string out = "GGUF";
        const uint32_t version = 3;
        const uint64_t n_tensors = 0;
        out.append(reinterpret_cast<const char*>(&version), 4);
        out.append(reinterpret_cast<const char*>(&n_tensors), 8);
        out.append(reinterpret_cast<const char*>(&n_kv_), 8);
        return out + body_;
    }

private:
    void put_u32(uint32_t v) { body_.append(reinterpret_cast<const char*>(&v), 4); }
    void put_u64(uint64_t v) { body_.append(reinterpret_cast<const char*>(&v), 8); }
    void put_str(const std::string& s) {
        put_u64(s.size());
        body_ += s;
    }
    void header(const std::string& key, uint32_t type) {
        put_str(key);
        put_u32(type);
    }
    std::string body_;
    uint64_t n_kv_ = 0;
};
}  // namespace

// A GGUF `llama` vocabulary: scores order merges ("bc" 2 beats "ab" 1), the '▁' dummy
// prefix, <0xXX> byte fallback, BOS by default; decode drops the dummy space.
TEST(GgufVocab, LlamaScoresAndByteFallback) {
    testutil::ScratchDir dir;
    const std::string sp = "\xE2\x96\x81";
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<float> scores = {0, 0, 0};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        tokens.push_back(name);
        scores.push_back(0);
    }
    for (const auto& [piece, score] : std::vector<std::pair<std::string, float>>{
             {sp, -1}, {"a", -1}, {"b", -1}, {"c", -1}, {"ab", 1}, {"bc", 2}, {sp + "a", 0.5f}}) {
        tokens.push_back(piece);
        scores.push_back(score);
    }
    GgufBuilder g;
    g.str("tokenizer.ggml.model", "llama");
    g.strings("tokenizer.ggml.tokens", tokens);
    g.floats("tokenizer.ggml.scores", scores);
    write_text(dir / "v.gguf", g.bytes());
    auto tok = load_gguf_tokenizer(dir / "v.gguf");
    const int32_t base = 259;
    EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{base + 6, base + 5}));  // ▁a, bc
    EXPECT_EQ(tok->encode("\xC3\xA9"), (std::vector<int32_t>{base, 3 + 0xC3, 3 + 0xA9}));
    EXPECT_EQ(tok->decode(tok->encode_with_policy("abc \xC3\xA9", BosPolicy::ModelDefault)),
              "abc \xC3\xA9");
}

// GGUF vocabularies of an unsupported kind are UnsupportedErrors; a GGUF whose token list
// and scores disagree, or a truncated file, is an InputError naming the file.
TEST(GgufVocab, BadFiles) {
    testutil::ScratchDir dir;
    GgufBuilder unigram;
    unigram.str("tokenizer.ggml.model", "t5");
    write_text(dir / "t5.gguf", unigram.bytes());
    EXPECT_THROW(load_gguf_tokenizer(dir / "t5.gguf"), UnsupportedError);

    GgufBuilder mismatch;
    mismatch.str("tokenizer.ggml.model", "llama");
    mismatch.strings("tokenizer.ggml.tokens", {"a", "b"});
    mismatch.floats("tokenizer.ggml.scores", {0});
    write_text(dir / "mismatch.gguf", mismatch.bytes());
    try {
        load_gguf_tokenizer(dir / "mismatch.gguf");
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("mismatch.gguf"), std::string::npos);
    }
    const std::string whole = mismatch.bytes();
    write_text(dir / "cut.gguf", whole.substr(0, whole.size() - 3));
    EXPECT_THROW(load_gguf_tokenizer(dir / "cut.gguf"), InputError);
}

// Llama-3 style: Split(regex) then ByteLevel without regex, and ignore_merges keeps a
// pre-token that is itself in the vocabulary whole even when no merge path builds it.
TEST(HfBpe, SplitThenByteLevelWithIgnoreMerges) {
    testutil::ScratchDir dir;
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[bytes_to_byte_level(std::string(1, char(b)))] = b;
    vocab["abc"] = 256;  // reachable by no merge
    vocab
        ["\xC4\xA0"
         "a"] = 257;
    json root = {
        {"added_tokens", json::array()},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           json::array(
               {{{"type", "Split"},
                 {"pattern", {{"Regex", kLlama3Pattern}}},
                 {"behavior", "Isolated"},
                 {"invert", false}},
                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
        {"decoder", {{"type", "ByteLevel"}}},
        {"model",
         {{"type", "BPE"},
          {"vocab", vocab},
          {"merges", json::array({json::array({"\xC4\xA0", "a"})})},
          {"ignore_merges", true}}},
    };
    write_text(dir / "tokenizer.json", root.dump());
    auto tok = load_hf_tokenizer(dir / "tokenizer.json");
    // "abc" whole; " a" by its merge; "12345" -> digits in groups of three: "123", "45".
    EXPECT_EQ(tok->encode("abc a12345"), (std::vector<int32_t>{256, 257, '1', '2', '3', '4', '5'}));
    EXPECT_EQ(tok->decode(tok->encode("abc a12345")), "abc a12345");
}

// Metaspace pre-tokenizer (older Llama/T5 tokenizer.json): spaces become '▁', one is
// prepended, and words split before each '▁'; the Metaspace decoder undoes both.
TEST(HfBpe, MetaspacePreTokenizer) {
    testutil::ScratchDir dir;
    const std::string sp = "\xE2\x96\x81";
    json vocab = {{"<unk>", 0}, {sp, 1}, {"h", 2}, {"i", 3}, {sp + "h", 4}, {sp + "hi", 5}};
    json root = {
        {"pre_tokenizer",
         {{"type", "Metaspace"},
          {"replacement", sp},
          {"prepend_scheme", "always"},
          {"split", true}}},
        {"decoder", {{"type", "Metaspace"}, {"replacement", sp}, {"prepend_scheme", "always"}}},
        {"model",
         {{"type", "BPE"},
          {"vocab", vocab},
          {"merges", {sp + " h", sp + "h i"}},
          {"unk_token", "<unk>"}}},
    };
    write_text(dir / "tokenizer.json", root.dump());
    auto tok = load_hf_tokenizer(dir / "tokenizer.json");
    EXPECT_EQ(tok->encode("hi hi"), (std::vector<int32_t>{5, 5}));
    EXPECT_EQ(tok->encode("hix"), (std::vector<int32_t>{5, 0}));  // 'x' unknown, no fallback
    EXPECT_EQ(tok->decode({5, 5}), "hi hi");
}

// A Split pattern {"String": s} is the literal s, whatever it holds: regex metacharacters and
// "\E" (which ended the old \Q...\E quoting early and left "(" unbalanced). Isolating the
// literal "\E(" keeps the merges a+\ and a\+E from reaching across it: ids are the bytes.
TEST(HfBpe, SplitStringIsLiteral) {
    testutil::ScratchDir dir;
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[bytes_to_byte_level(std::string(1, char(b)))] = b;
    vocab["a\\"] = 256;
    vocab["a\\E"] = 257;
    auto write_with = [&](const json& split) {
        json root = {
            {"normalizer", nullptr},
            {"pre_tokenizer",
             {{"type", "Sequence"},
              {"pretokenizers",
               json::array(
                   {split,
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
            {"post_processor", nullptr},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a \\", "a\\ E"}}}}};
        write_text(dir / "tokenizer.json", root.dump());
        return load_hf_tokenizer(dir / "tokenizer.json");
    };
    const json literal = {
        {"type", "Split"}, {"pattern", {{"String", "\\E("}}}, {"behavior", "Isolated"}};
    EXPECT_EQ(write_with(literal)->encode("a\\E(b"), (std::vector<int32_t>{97, 92, 69, 40, 98}));
    // Without the split the merges apply (the check above can fail).
    const json elsewhere = {
        {"type", "Split"}, {"pattern", {{"String", ".*"}}}, {"behavior", "Isolated"}};
    EXPECT_EQ(write_with(elsewhere)->encode("a\\E(b"), (std::vector<int32_t>{257, 40, 98}));
}
