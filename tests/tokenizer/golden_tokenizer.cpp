// Tokenizers against independent references: llama.cpp's tokenizer test vectors (generated
// with HF AutoTokenizer), the llama2.c reference dumps and the zoo's golden input_ids.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;
using namespace sinkscope::tokenizer;

namespace {

std::string ids_str(const std::vector<int32_t>& ids) {
    std::ostringstream s;
    for (int32_t id : ids) s << ' ' << id;
    return s.str();
}

// TOKENS line of a llama2.c reference dump.
std::vector<int32_t> reference_tokens(const fs::path& dump) {
    std::ifstream in(dump);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("TOKENS", 0) != 0) continue;
        std::istringstream s(line.substr(6));
        std::vector<int32_t> ids;
        for (int32_t id; s >> id;) ids.push_back(id);
        return ids;
    }
    ADD_FAILURE() << "no TOKENS line in " << dump;
    return {};
}

}  // namespace

// The HF tinystories656K tokenizer with its default BOS policy reproduces llama2.c's tokens
// for the reference prompt (tokenizer_config add_bos_token = true).
TEST(GoldenTokenizer, TinyStoriesReferencePrompt) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    auto tok = load_hf_tokenizer(shared / "models/tinystories656K/tokenizer.json");
    const std::string prompt = "Once upon a time, there was a little girl";
    const auto expected = reference_tokens(shared / "reference/llama2c_dump_tinystories656K_onceupon.txt");
    EXPECT_EQ(ids_str(tok->encode_with_policy(prompt, BosPolicy::ModelDefault)),
              ids_str(expected));
    EXPECT_EQ(tok->decode(expected), prompt);
}

// stories260K's tok512.bin encodes "Once upon a time" like llama2.c run.c (BOS + pieces).
TEST(GoldenTokenizer, Llama2cStories260K) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    auto tok = load_llama2c_tokenizer(shared / "models/stories260K/tok512.bin", 512);
    const auto expected = reference_tokens(shared / "reference/llama2c_dump_stories260K_onceupon.txt");
    EXPECT_EQ(ids_str(tok->encode_with_policy("Once upon a time", BosPolicy::ModelDefault)),
              ids_str(expected));
    EXPECT_EQ(tok->decode(expected), "Once upon a time");
}

// The stories260K greedy continuation, tokenized and decoded again, is unchanged (a long
// text through run.c's merge loop and decode).
TEST(GoldenTokenizer, Llama2cRoundTripReferenceText) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    auto tok = load_llama2c_tokenizer(shared / "models/stories260K/tok512.bin", 512);
    const std::string text = read_file(shared / "reference/llama2c_stories260K_greedy_onceupon.txt");
    EXPECT_EQ(tok->decode(tok->encode_with_policy(text, BosPolicy::Always)), text);
}

// Every zoo family with a BPE tokenizer.json gives exactly the golden input_ids (HF
// add_special_tokens=True = BosPolicy::ModelDefault) for every golden text input.
TEST(GoldenTokenizer, ZooGoldenInputIds) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    for (const char* family : {"gpt2", "pythia", "qwen2", "mistral", "gemma", "phi", "roberta"}) {
        SCOPED_TRACE(family);
        const fs::path dir = shared / "zoo" / family;
        auto tok = load_hf_tokenizer(dir / "tokenizer.json");
        const auto manifest = nlohmann::json::parse(read_file(dir / "golden/manifest.json"));
        int n_checked = 0;
        for (const auto& input : manifest.at("inputs")) {
            if (input.value("kind", "") != "text" || !input.contains("text")) continue;
            const std::string name = input.at("name").get<std::string>();
            SCOPED_TRACE(name);
            const auto golden = io::read_npy(dir / "golden" / name / "input_ids.npy").to_i64();
            const std::vector<int32_t> expected(golden.begin(), golden.end());
            const std::string text = input.at("text").get<std::string>();
            EXPECT_EQ(ids_str(tok->encode_with_policy(text, BosPolicy::ModelDefault)),
                      ids_str(expected));
            EXPECT_EQ(tok->decode(expected), text);
            ++n_checked;
        }
        EXPECT_GE(n_checked, 3);
    }
}

// BERT's WordPiece tokenizer.json is refused with a clear UnsupportedError (not a crash).
TEST(GoldenTokenizer, WordPieceUnsupported) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    EXPECT_THROW(load_hf_tokenizer(shared / "zoo/bert/tokenizer.json"), UnsupportedError);
}
