// Encoder tokenizer.json features on hand-made files: BertNormalizer lowercase / strip_accents
// as configured (null follows lowercase, as HF tokenizers), and the BertProcessing /
// RobertaProcessing sentence-pair templates with their token type ids.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sinkscope/tokenizer/tokenizer.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;
using namespace sinkscope::tokenizer;
using nlohmann::json;

namespace {

// A WordPiece tokenizer.json whose vocabulary tells the normalizer's output apart.
json wordpiece_json(const json& lowercase, const json& strip_accents) {
    return {{"version", "1.0"},
            {"added_tokens", json::array()},
            {"normalizer",
             {{"type", "BertNormalizer"},
              {"clean_text", true},
              {"handle_chinese_chars", true},
              {"strip_accents", strip_accents},
              {"lowercase", lowercase}}},
            {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
            {"post_processor",
             {{"type", "BertProcessing"}, {"sep", {"[SEP]", 2}}, {"cls", {"[CLS]", 1}}}},
            {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}}},
            {"model",
             {{"type", "WordPiece"},
              {"unk_token", "[UNK]"},
              {"continuing_subword_prefix", "##"},
              {"max_input_chars_per_word", 100},
              {"vocab",
               {{"[UNK]", 0},
                {"[CLS]", 1},
                {"[SEP]", 2},
                {"hello", 3},
                {"h\xC3\xA9llo", 4},  // héllo
                {"Hello", 5},
                {"H\xC3\xA9llo", 6},  // Héllo
                {"world", 7}}}}}};
}

std::unique_ptr<Tokenizer> load_json(const testutil::ScratchDir& dir, const json& j) {
    const fs::path file = dir / "tokenizer.json";
    std::ofstream(file) << j.dump();
    return load_hf_tokenizer(file);
}

}  // namespace

// "Héllo": lowercase + strip_accents null -> hello; lowercase only -> héllo; strip only -> Hello;
// neither (null follows lowercase = false) -> Héllo.
TEST(EncoderTokenizer, BertNormalizerFollowsLowercaseAndStripAccents) {
    testutil::ScratchDir dir;
    const std::string text = "H\xC3\xA9llo";
    EXPECT_EQ(load_json(dir, wordpiece_json(true, nullptr))->encode(text), std::vector<int32_t>{3});
    EXPECT_EQ(load_json(dir, wordpiece_json(true, false))->encode(text), std::vector<int32_t>{4});
    EXPECT_EQ(load_json(dir, wordpiece_json(false, true))->encode(text), std::vector<int32_t>{5});
    EXPECT_EQ(load_json(dir, wordpiece_json(false, nullptr))->encode(text),
              std::vector<int32_t>{6});
}

// BertProcessing: [CLS] A [SEP] for one text; [CLS] A [SEP] B [SEP] with type ids 0 for the
// first segment and 1 for B [SEP].
TEST(EncoderTokenizer, BertProcessingPairTypes) {
    testutil::ScratchDir dir;
    const auto tok = load_json(dir, wordpiece_json(true, nullptr));
    EXPECT_EQ(tok->encode_with_policy("hello world", BosPolicy::ModelDefault),
              (std::vector<int32_t>{1, 3, 7, 2}));
    const auto pair = tok->encode_pair("hello", "world hello");
    EXPECT_EQ(pair.ids, (std::vector<int32_t>{1, 3, 2, 7, 3, 2}));
    EXPECT_EQ(pair.type_ids, (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
}

// RobertaProcessing: <s> A </s> for one text; <s> A </s></s> B </s> for a pair, every type id 0
// (RoBERTa has no segment embedding beyond type 0).
TEST(EncoderTokenizer, RobertaProcessingPairIsAllTypeZero) {
    testutil::ScratchDir dir;
    const json j = {{"version", "1.0"},
                    {"added_tokens", json::array()},
                    {"normalizer", nullptr},
                    {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
                    {"post_processor",
                     {{"type", "RobertaProcessing"}, {"sep", {"</s>", 1}}, {"cls", {"<s>", 0}}}},
                    {"decoder", nullptr},
                    {"model",
                     {{"type", "BPE"},
                      {"vocab", {{"<s>", 0}, {"</s>", 1}, {"a", 2}, {"b", 3}, {"ab", 4}}},
                      {"merges", {"a b"}}}}};
    const auto tok = load_json(dir, j);
    EXPECT_EQ(tok->encode_with_policy("ab", BosPolicy::ModelDefault),
              (std::vector<int32_t>{0, 4, 1}));
    const auto pair = tok->encode_pair("ab", "a");
    EXPECT_EQ(pair.ids, (std::vector<int32_t>{0, 4, 1, 1, 2, 1}));
    EXPECT_EQ(pair.type_ids, (std::vector<int32_t>(6, 0)));
}
