// Unigram / SentencePiece tokenizers against libsentencepiece: tiny Unigram models trained in
// the test, their pieces written as a Hugging Face tokenizer.json (HF Unigram pipeline) and as
// a .model file (libsentencepiece wrapper, identity and fairseq id maps).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/tokenizer/charsmap.hpp"
#include "sinkscope/tokenizer/hf_pipeline.hpp"
#include "sinkscope/tokenizer/sentencepiece.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"
#include "sinkscope/tokenizer/unigram.hpp"
#include "testing.hpp"
#include "unigram_reference.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;
using namespace sinkscope::tokenizer;
using nlohmann::json;

using testutil::ids_str;

namespace {

// About 4 KB of training text: English with digits and punctuation, accented Latin, Greek,
// Cyrillic and CJK, so the vocabulary has multi-script pieces.
const std::vector<std::string>& corpus() {
    static const std::vector<std::string> lines = [] {
        std::vector<std::string> out = {
            "The attention sink is the first token that absorbs most of the attention mass.",
            "Transformers route probability mass to a few positions when no other key matches.",
            "In 2023 several papers measured sinks in models with 7, 13 and 70 billion parameters.",
            "A photon travels 299,792 kilometres per second in a vacuum.",
            "The mitochondria produce adenosine triphosphate for the cell.",
            "Entropy measures the uncertainty of a probability distribution over outcomes.",
            "Gradient descent updates every parameter against the direction of the gradient.",
            "The quick brown fox jumps over the lazy dog near the riverbank.",
            "Water boils at 100 degrees Celsius at sea level and freezes at 0 degrees.",
            "Electrons occupy orbitals described by quantum numbers n, l and m.",
            "Proteins fold into shapes determined by their amino acid sequences.",
            "The derivative of sin(x) is cos(x), and the integral of 1/x is ln|x|.",
            "Planets orbit the Sun on ellipses, as Kepler showed in 1609.",
            "Neural networks learn representations layer by layer.",
            "Tokenizers split text into pieces; the pieces are then mapped to ids.",
            "Café crème brûlée à la française, façade naïve and déjà vu.",
            "Über die Brücke gehen Mädchen und Jungen schön langsam.",
            "El niño comió piñata y jalapeño en la montaña.",
            "Ελληνικά γράμματα και λέξεις για τη φυσική και τα μαθηματικά.",
            "Русский текст для проверки токенизатора и словаря.",
            "数学和物理是科学的基础。",
            "日本語のテキストです。東京は大きい都市です。",
            "Numbers like 3.14159, 2.71828 and 1.41421 appear in many formulas.",
            "Email me at someone@example.com or visit https://example.org/path?q=1.",
            "Temperatures ranged from -40 to +45 degrees over the year.",
        };
        // Recombine words so pieces repeat enough to be learned.
        std::vector<std::string> words;
        for (const std::string& l : out) {
            std::istringstream s(l);
            for (std::string w; s >> w;) words.push_back(w);
        }
        for (size_t k = 0; k < 40; ++k) {
            std::string line;
            for (size_t j = 0; j < 9; ++j) {
                if (j) line += ' ';
                line += words[(k * 7 + j * 13) % words.size()];
            }
            out.push_back(line);
        }
        return out;
    }();
    return lines;
}

// Texts compared with the reference: the corpus, recombinations it never saw, characters
// outside the vocabulary (runs, isolated, at the ends), digits, whitespace runs, empty.
std::vector<std::string> probe_texts() {
    std::vector<std::string> out = corpus();
    for (const std::string& l : corpus()) {
        std::string upper = l;
        for (char& c : upper)
            if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
        out.push_back(upper);
        size_t cut = l.size() / 3;  // a suffix that starts on a character boundary
        while (cut < l.size() && (static_cast<unsigned char>(l[cut]) & 0xC0) == 0x80) ++cut;
        out.push_back(l.substr(cut));
    }
    const std::vector<std::string> extra = {
        "",
        "a",
        " ",
        "hello world",
        "  leading spaces and   inner   runs",
        "tabs\tand\nnewlines\tinside",
        "0123456789 9876543210 42 007",
        "\xE2\x98\x83",                                 // ☃ (not in the corpus)
        "snow\xE2\x98\x83\xE2\x98\x83\xE2\x98\x83man",  // a run of unknowns
        "x\xE2\x98\x83y\xF0\x9F\xA6\x99z",              // ☃ and 🦙 split by known letters
        "\xF0\x9F\xA6\x99 llama at the start",
        "ends with unknown \xF0\x9F\xA6\x99",
        "mixed 数学 and Ελληνικά and Русский",
        // A literal '▁' inside the text (at its start HF's Metaspace adds no prefix and at its
        // end sentencepiece strips it: HF/spm differences, not probed).
        "literal \xE2\x96\x81\xE2\x96\x81 metaspace\xE2\x96\x81x",
        "punctuation!?;:,.()[]{}<>\"'",
        "qzxjqvw wxyz zzzzzz",
    };
    out.insert(out.end(), extra.begin(), extra.end());
    return out;
}

struct Trained {
    std::string serialized;
    sentencepiece::SentencePieceProcessor sp;
};

const Trained& trained(const std::string& normalization, bool byte_fallback,
                       const std::string& model_type = "unigram") {
    static std::map<std::string, std::unique_ptr<Trained>> cache;
    auto& slot = cache[normalization + (byte_fallback ? "+bytes " : " ") + model_type];
    if (!slot) {
        slot = std::make_unique<Trained>();
        testutil::SpmTrainOptions o;
        o.normalization = normalization;
        o.byte_fallback = byte_fallback;
        o.model_type = model_type;
        slot->serialized = testutil::train_unigram(corpus(), o);
        if (!slot->sp.LoadFromSerializedProto(slot->serialized).ok())
            throw std::runtime_error("trained model does not load");
    }
    return *slot;
}

std::unique_ptr<Tokenizer> hf_from(const testutil::ScratchDir& dir, const json& tokenizer_json) {
    testutil::write_file(dir / "tokenizer.json", tokenizer_json.dump());
    return load_hf_tokenizer(dir / "tokenizer.json");
}

struct Agreement {
    int n = 0, n_same = 0;
    int n_float_ties = 0;  // differences that are ties to within float32 rounding
    std::string first_failure;
};

// Total score of a segmentation in double, leaving out unknown and byte pieces; the second
// member counts those (two segmentations compare only when their counts agree).
std::pair<double, int> path_score(const sentencepiece::SentencePieceProcessor& sp,
                                  const std::vector<int>& ids) {
    double sum = 0;
    int n_unknown = 0;
    for (int id : ids) {
        if (sp.IsUnknown(id) || sp.IsByte(id)) {
            ++n_unknown;
        } else {
            sum += sp.GetScore(id);
        }
    }
    return {sum, n_unknown};
}

// Whether `ours` scores at least as well as `theirs` in exact arithmetic and within float32
// rounding of it (same unknown pieces): a tie sentencepiece's f32 sums broke the other way.
bool float_tie(const sentencepiece::SentencePieceProcessor& sp, const std::vector<int>& ours,
               const std::vector<int>& theirs) {
    const auto [a, n_a] = path_score(sp, ours);
    const auto [b, n_b] = path_score(sp, theirs);
    return n_a == n_b && a >= b && a - b <= 4 * std::abs(b) * std::numeric_limits<float>::epsilon();
}

// Compares tok.encode with sentencepiece on every text. Where they differ, `sp` (when given)
// checks that the two segmentations score the same to within float32 rounding and ours is not
// worse in exact (double) arithmetic: HF's f64 sums vs sentencepiece's f32 sums (PathScore).
template <typename F>
Agreement compare(const std::vector<std::string>& texts, const Tokenizer& tok, F reference,
                  const sentencepiece::SentencePieceProcessor* sp = nullptr) {
    Agreement a;
    for (const std::string& t : texts) {
        ++a.n;
        const std::vector<int32_t> got = tok.encode(t), want = reference(t);
        if (got == want) {
            ++a.n_same;
            continue;
        }
        if (sp && float_tie(*sp, got, want)) {
            ++a.n_float_ties;
            continue;
        }
        if (a.first_failure.empty())
            a.first_failure = "'" + t + "': expected" + ids_str(want) + ", got" + ids_str(got);
    }
    return a;
}

// The tokenizer.json pipeline by hand with sentencepiece's arithmetic: float32 path sums and
// no Metaspace split (sentencepiece runs one Viterbi over the whole normalized text).
std::unique_ptr<Tokenizer> spm_arithmetic_pipeline(const Trained& t) {
    const auto info = read_spm_model_info(t.serialized, "<trained>");
    PipelineConfig cfg;
    if (!info.precompiled_charsmap.empty()) {
        NormalizerStep p{NormalizerStep::Kind::Precompiled, "", ""};
        p.charsmap = std::make_shared<PrecompiledCharsMap>(info.precompiled_charsmap, "<trained>");
        cfg.normalizer.push_back(p);
    }
    cfg.normalizer.push_back({NormalizerStep::Kind::Strip, "r", ""});
    NormalizerStep collapse{NormalizerStep::Kind::Replace, "", " "};
    collapse.regex = std::make_shared<Regex>(" {2,}");
    cfg.normalizer.push_back(collapse);
    PreTokenizerStep meta;
    meta.kind = PreTokenizerStep::Kind::Metaspace;
    meta.split = false;
    cfg.pre_tokenizer.push_back(meta);
    std::vector<std::pair<std::string, double>> pieces;
    bool byte_fallback = false;
    for (int id = 0; id < t.sp.GetPieceSize(); ++id) {
        pieces.emplace_back(t.sp.IdToPiece(id), t.sp.GetScore(id));
        byte_fallback = byte_fallback || t.sp.IsByte(id);
    }
    return make_pipeline_tokenizer(
        std::move(cfg),
        std::make_unique<UnigramModel>(pieces, t.sp.unk_id(), byte_fallback, PathScore::Float));
}

}  // namespace

// HF's documented Unigram example: "abcdacdxx" -> abcd | a | cd | xx, the two unknown x's fused
// into one unk (tokenizers models/unigram/model.rs doc test).
TEST(Unigram, ViterbiPicksBestSumAndFusesUnknowns) {
    const UnigramModel m({{"<unk>", 0.0},
                          {"a", 0.0},
                          {"b", 0.0},
                          {"c", 0.0},
                          {"d", 0.0},
                          {"cd", 1.0},
                          {"ab", 2.0},
                          {"abc", 5.0},
                          {"abcd", 10.0}},
                         0, false);
    std::vector<int32_t> ids;
    m.encode("abcdacdxx", ids);
    EXPECT_EQ(ids_str(ids), ids_str(std::vector<int32_t>{8, 1, 5, 0}));
    EXPECT_DOUBLE_EQ(m.unk_score(), 0.0 - 10.0);
}

// Byte fallback replaces an unknown run by its UTF-8 bytes; without unk and byte pieces the
// unknown character is an input error.
TEST(Unigram, ByteFallbackAndMissingUnk) {
    std::vector<std::pair<std::string, double>> pieces = {{"<unk>", 0}, {"a", -1}, {"b", -2}};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        pieces.emplace_back(name, 0.0);
    }
    const UnigramModel m(pieces, 0, true);
    std::vector<int32_t> ids;
    m.encode(
        "a\xC3\xA9"
        "b",
        ids);  // a é b
    EXPECT_EQ(ids_str(ids), ids_str(std::vector<int32_t>{1, 3 + 0xC3, 3 + 0xA9, 2}));
    const UnigramModel no_unk({{"a", -1}}, -1, false);
    ids.clear();
    EXPECT_THROW(no_unk.encode("ab", ids), InputError);
    // The uncovered character is quoted with its control byte escaped: one line, no raw byte.
    try {
        no_unk.encode("a\x1b", ids);
        ADD_FAILURE() << "no error for an uncovered control character";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("character '\\x1b' is not covered"), std::string::npos)
            << e.what();
    }
}

// A malformed precompiled charsmap is refused with the file named; an empty one rewrites
// nothing.
TEST(PrecompiledCharsMap, MalformedBlobs) {
    EXPECT_THROW(PrecompiledCharsMap("\x01\x00", "x.json"), InputError);
    EXPECT_THROW(PrecompiledCharsMap(std::string("\xFF\x00\x00\x00"
                                                 "abcd",
                                                 8),
                                     "x.json"),
                 InputError);
    EXPECT_EQ(PrecompiledCharsMap("", "x.json").normalize("ＡＢ"), "ＡＢ");
}

// With sentencepiece's arithmetic (f32 path sums, one Viterbi over the whole text) the Unigram
// model gives exactly sentencepiece's ids on every probe text, for identity, byte fallback and
// nmt_nfkc models: Viterbi, tie order, unknown fusion, byte fallback, charsmap and whitespace.
TEST(Unigram, SentencePieceArithmeticIsExact) {
    for (const auto& [norm, bytes] : std::vector<std::pair<std::string, bool>>{
             {"identity", false}, {"identity", true}, {"nmt_nfkc", false}}) {
        SCOPED_TRACE(norm + (bytes ? " byte_fallback" : ""));
        const Trained& t = trained(norm, bytes);
        auto tok = spm_arithmetic_pipeline(t);
        const auto a =
            compare(probe_texts(), *tok, [&](const std::string& s) { return t.sp.EncodeAsIds(s); });
        EXPECT_GE(a.n, 150);
        EXPECT_EQ(a.n_same, a.n) << a.first_failure;
    }
}

// tokenizer.json Unigram (identity normalization, HF f64 sums, Metaspace split) gives
// sentencepiece's ids on every probe text except float32 ties, where it picks a segmentation
// that is at least as good in exact arithmetic (HF tokenizers' behaviour).
TEST(Unigram, HfJsonMatchesSentencePieceIdentity) {
    const Trained& t = trained("identity", false);
    testutil::ScratchDir dir;
    auto tok =
        hf_from(dir, testutil::unigram_tokenizer_json(t.serialized, testutil::JsonLayout::Spm));
    EXPECT_EQ(tok->kind(), "unigram");
    EXPECT_EQ(tok->vocab_size(), t.sp.GetPieceSize());
    EXPECT_GE(tok->vocab_size(), 300);
    // Identity keeps '\t'/'\n' as characters; HF's Strip would remove them at the end, spm not,
    // so the probes have no trailing tab or newline (a known HF/spm difference, not ours).
    const auto texts = probe_texts();
    const auto a = compare(
        texts, *tok, [&](const std::string& s) { return t.sp.EncodeAsIds(s); }, &t.sp);
    EXPECT_GE(a.n, 150);
    EXPECT_EQ(a.n_same + a.n_float_ties, a.n) << a.first_failure;
    EXPECT_LE(a.n_float_ties, a.n / 20);
    // Round trip of covered text through the Metaspace decoder.
    EXPECT_EQ(tok->decode(tok->encode("The attention sink is the first token.")),
              "The attention sink is the first token.");
}

// With byte_fallback the unknown characters become <0xXX> pieces exactly as sentencepiece
// emits them.
TEST(Unigram, HfJsonMatchesSentencePieceByteFallback) {
    const Trained& t = trained("identity", true);
    testutil::ScratchDir dir;
    auto tok =
        hf_from(dir, testutil::unigram_tokenizer_json(t.serialized, testutil::JsonLayout::Spm));
    const auto texts = probe_texts();
    const auto a = compare(
        texts, *tok, [&](const std::string& s) { return t.sp.EncodeAsIds(s); }, &t.sp);
    EXPECT_EQ(a.n_same + a.n_float_ties, a.n) << a.first_failure;
    EXPECT_LE(a.n_float_ties, a.n / 20);
    const std::string llama = "ends with \xF0\x9F\xA6\x99";
    const auto ids = tok->encode(llama);
    ASSERT_GE(ids.size(), 4u);
    EXPECT_EQ(tok->piece(ids.back()), "<0x99>");
    EXPECT_EQ(tok->decode(ids), llama);
}

// nmt_nfkc: the Precompiled normalizer decoded from the model's charsmap (double-array trie +
// replacement strings) normalizes like sentencepiece: fullwidth forms, ligatures, circled and
// Roman numerals, decomposed accents, no-break and other spaces, tabs and newlines.
TEST(Unigram, HfJsonMatchesSentencePieceNmtNfkc) {
    const Trained& t = trained("nmt_nfkc", false);
    const auto info = read_spm_model_info(t.serialized, "<trained>");
    EXPECT_EQ(info.normalizer_name, "nmt_nfkc");
    ASSERT_GT(info.precompiled_charsmap.size(), 1000u);
    testutil::ScratchDir dir;
    auto tok =
        hf_from(dir, testutil::unigram_tokenizer_json(t.serialized, testutil::JsonLayout::Spm));
    auto texts = probe_texts();
    const std::vector<std::string> nfkc = {
        "\xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3\xEF\xBC\x91\xEF\xBC\x92",  // ＡＢＣ１２
        "\xEF\xAC\x81nal \xEF\xAC\x82ow",                                // ﬁnal ﬂow
        "\xE2\x91\xA0 \xE2\x85\xAB x\xC2\xB2",                           // ① Ⅻ x²
        "Cafe\xCC\x81 cre\xCC\x80me",                                    // decomposed accents
        "no\xC2\xA0"
        "break\xE2\x80\x83"
        "em space",  // NBSP, EM SPACE
        "tab\tin the middle\nand newline",
        "\xEF\xBD\xB6\xEF\xBE\x80\xEF\xBD\xB6\xEF\xBE\x85",  // ｶﾀｶﾅ (halfwidth)
        "trade\xE2\x84\xA2 and ellipsis\xE2\x80\xA6 done",   // ™ …
        "  spaced   out  ",
    };
    texts.insert(texts.end(), nfkc.begin(), nfkc.end());
    const auto a = compare(
        texts, *tok, [&](const std::string& s) { return t.sp.EncodeAsIds(s); }, &t.sp);
    EXPECT_EQ(a.n_same + a.n_float_ties, a.n) << a.first_failure;
    EXPECT_LE(a.n_float_ties, a.n / 20);
}

// The .model loader with the identity map is libsentencepiece itself: same ids, pieces,
// vocabulary size, BOS by default (Llama convention) and a lossless decode.
TEST(SentencePieceModel, IdentityMapMatchesProcessor) {
    const Trained& t = trained("nmt_nfkc", true);
    testutil::ScratchDir dir;
    testutil::write_file(dir / "tokenizer.model", t.serialized);
    EXPECT_EQ(spm_id_map_for(dir / "tokenizer.model"), SpmIdMap::Identity);
    auto tok = load_sentencepiece_tokenizer(dir / "tokenizer.model");
    EXPECT_EQ(tok->kind(), "spm-unigram");
    EXPECT_EQ(tok->vocab_size(), t.sp.GetPieceSize());
    EXPECT_EQ(tok->bos_id(), t.sp.bos_id());
    for (int id = 0; id < t.sp.GetPieceSize(); id += 37)
        EXPECT_EQ(tok->piece(id), t.sp.IdToPiece(id));
    const auto a =
        compare(probe_texts(), *tok, [&](const std::string& s) { return t.sp.EncodeAsIds(s); });
    EXPECT_EQ(a.n_same, a.n) << a.first_failure;
    const std::string text = "The quick brown fox \xF0\x9F\xA6\x99";
    const auto ids = tok->encode_with_policy(text, BosPolicy::ModelDefault);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), t.sp.bos_id());
    EXPECT_EQ(tok->decode(ids), text);
    // tokenizer_config.json add_bos_token = false turns the default BOS off.
    testutil::write_file(dir / "tokenizer_config.json", R"({"add_bos_token": false})");
    auto no_bos = load_sentencepiece_tokenizer(dir / "tokenizer.model");
    EXPECT_EQ(ids_str(no_bos->encode_with_policy(text, BosPolicy::ModelDefault)),
              ids_str(no_bos->encode(text)));
}

// A SentencePiece BPE .model (Llama's tokenizer.model kind) through the native loader: score
// ordered merges over the whole normalized text, byte fallback, BOS by default; the same ids
// as libsentencepiece on every probe text.
TEST(SentencePieceModel, BpeModelMatchesProcessor) {
    const Trained& t = trained("identity", true, "bpe");
    testutil::ScratchDir dir;
    testutil::write_file(dir / "tokenizer.model", t.serialized);
    auto tok = load_sentencepiece_tokenizer(dir / "tokenizer.model");
    EXPECT_EQ(tok->kind(), "spm-bpe");
    EXPECT_EQ(tok->vocab_size(), t.sp.GetPieceSize());
    const auto a =
        compare(probe_texts(), *tok, [&](const std::string& s) { return t.sp.EncodeAsIds(s); });
    EXPECT_EQ(a.n_same, a.n) << a.first_failure;
    const std::string text = "Gradient descent \xF0\x9F\xA6\x99 updates";
    EXPECT_EQ(tok->decode(tok->encode_with_policy(text, BosPolicy::ModelDefault)), text);
}

// The fairseq map (XLMRobertaTokenizer): <s>=0 <pad>=1 </s>=2 <unk>=3, piece k -> k + 1,
// <mask> last; <s> A </s> and <s> A </s></s> B </s>; selected by tokenizer_class.
TEST(SentencePieceModel, FairseqMapOffsetsAndTemplate) {
    const Trained& t = trained("nmt_nfkc", false);
    testutil::ScratchDir dir;
    testutil::write_file(dir / "sentencepiece.bpe.model", t.serialized);
    testutil::write_file(dir / "tokenizer_config.json",
                         R"({"tokenizer_class": "XLMRobertaTokenizer"})");
    EXPECT_EQ(spm_id_map_for(dir / "sentencepiece.bpe.model"), SpmIdMap::Fairseq);
    auto tok = load_sentencepiece_tokenizer(dir / "sentencepiece.bpe.model");
    const int n = t.sp.GetPieceSize();
    EXPECT_EQ(tok->kind(), "spm-unigram-fairseq");
    EXPECT_EQ(tok->vocab_size(), n + 2);
    EXPECT_EQ(tok->piece(0), "<s>");
    EXPECT_EQ(tok->piece(1), "<pad>");
    EXPECT_EQ(tok->piece(2), "</s>");
    EXPECT_EQ(tok->piece(3), "<unk>");
    EXPECT_EQ(tok->piece(n + 1), "<mask>");
    EXPECT_EQ(tok->piece(4), t.sp.IdToPiece(3));
    EXPECT_EQ(tok->piece(n), t.sp.IdToPiece(n - 1));
    EXPECT_EQ(tok->bos_id(), 0);
    EXPECT_EQ(tok->eos_id(), 2);
    for (const std::string& s : probe_texts()) {
        std::vector<int32_t> want = {0};
        for (int id : t.sp.EncodeAsIds(s)) want.push_back(id == t.sp.unk_id() ? 3 : id + 1);
        want.push_back(2);
        ASSERT_EQ(ids_str(tok->encode_with_policy(s, BosPolicy::ModelDefault)), ids_str(want)) << s;
    }
    const auto pair = tok->encode_pair("hello world", "the cat");
    std::vector<int32_t> want = {0};
    for (int id : t.sp.EncodeAsIds("hello world")) want.push_back(id + 1);
    want.insert(want.end(), {2, 2});
    for (int id : t.sp.EncodeAsIds("the cat")) want.push_back(id + 1);
    want.push_back(2);
    EXPECT_EQ(ids_str(pair.ids), ids_str(want));
    EXPECT_EQ(pair.type_ids, std::vector<int32_t>(want.size(), 0));
    EXPECT_EQ(tok->decode(pair.ids), "hello world the cat");
}

// An XLM-R-layout tokenizer.json (XLMRobertaConverter: specials first, pieces[3:], <mask>;
// TemplateProcessing <s> $A </s>) and the fairseq-mapped .model agree on ids with special
// tokens and on pairs: the HF pipeline and the libsentencepiece path are interchangeable.
TEST(SentencePieceModel, XlmrTokenizerJsonAgreesWithFairseqModel) {
    const Trained& t = trained("nmt_nfkc", false);
    testutil::ScratchDir dir;
    testutil::write_file(dir / "sentencepiece.bpe.model", t.serialized);
    auto spm = load_sentencepiece_tokenizer(dir / "sentencepiece.bpe.model", SpmIdMap::Fairseq);
    auto hf =
        hf_from(dir, testutil::unigram_tokenizer_json(t.serialized, testutil::JsonLayout::Fairseq));
    EXPECT_EQ(hf->vocab_size(), spm->vocab_size());
    int n = 0, n_same = 0;
    for (const std::string& s : probe_texts()) {
        const auto a = hf->encode_with_policy(s, BosPolicy::ModelDefault);
        const auto b = spm->encode_with_policy(s, BosPolicy::ModelDefault);
        ++n;
        if (a == b) {
            ++n_same;
            continue;
        }
        // Only float32 ties may differ (see HfJsonMatchesSentencePieceIdentity).
        auto to_spm = [](const std::vector<int32_t>& ids) {
            std::vector<int> out;
            for (size_t i = 1; i + 1 < ids.size(); ++i) out.push_back(ids[i] - 1);
            return out;
        };
        EXPECT_TRUE(a.front() == 0 && a.back() == 2 && float_tie(t.sp, to_spm(a), to_spm(b)))
            << s << ":" << ids_str(a) << " vs" << ids_str(b);
    }
    EXPECT_GE(n, 150);
    EXPECT_GE(n_same, n * 19 / 20);
    const auto a = hf->encode_pair("first text", "second one"),
               b = spm->encode_pair("first text", "second one");
    EXPECT_EQ(ids_str(a.ids), ids_str(b.ids));
    EXPECT_EQ(ids_str(a.type_ids), ids_str(b.type_ids));
    // "<mask>" in the text is the special token in the HF pipeline (added token).
    const auto masked = hf->encode("a <mask> b");
    EXPECT_NE(std::find(masked.begin(), masked.end(), static_cast<int32_t>(hf->vocab_size() - 1)),
              masked.end());
}

// A file that is not a SentencePiece model, or a truncated one, is one InputError naming it.
TEST(SentencePieceModel, BadFile) {
    testutil::ScratchDir dir;
    const std::string& good = trained("identity", false).serialized;
    testutil::write_file(dir / "cut.model", good.substr(0, good.size() / 2));
    EXPECT_THROW(load_sentencepiece_tokenizer(dir / "cut.model", SpmIdMap::Identity), InputError);
    testutil::write_file(dir / "tokenizer.model", "this is not a protobuf at all, just text");
    try {
        load_sentencepiece_tokenizer(dir / "tokenizer.model", SpmIdMap::Identity);
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("tokenizer.model"), std::string::npos) << e.what();
    }
}

// Malformed Unigram tokenizer.json fields are input errors naming the file.
TEST(Unigram, BadTokenizerJson) {
    testutil::ScratchDir dir;
    const json vocab = json::array({json::array({"<unk>", 0.0}), json::array({"a", -1.0})});
    const json base = {{"model", {{"type", "Unigram"}, {"unk_id", 0}, {"vocab", vocab}}}};
    json bad_vocab = base;
    bad_vocab["model"]["vocab"] = json::array({json::array({"<unk>"}), json::array({"a", -1.0})});
    json bad_unk = base;
    bad_unk["model"]["unk_id"] = 7;
    json bad_charsmap = base;
    bad_charsmap["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "!!!"}};
    for (const json& j : {bad_vocab, bad_unk, bad_charsmap}) {
        testutil::write_file(dir / "tokenizer.json", j.dump());
        EXPECT_THROW(load_hf_tokenizer(dir / "tokenizer.json"), InputError) << j.dump();
    }
    testutil::write_file(dir / "tokenizer.json", base.dump());
    EXPECT_EQ(ids_str(load_hf_tokenizer(dir / "tokenizer.json")->encode("aab")),
              ids_str(std::vector<int32_t>{1, 1, 0}));
}
