// Tokenizers against independent references: llama.cpp's tokenizer test vectors (generated
// with HF AutoTokenizer), the llama2.c reference dumps and the zoo's golden input_ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/tokenizer/pretokenize.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"
#include "testing.hpp"

namespace fs = std::filesystem;
using namespace sinkscope;
using namespace sinkscope::tokenizer;

using testutil::ids_str;

namespace {

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
    const auto expected =
        reference_tokens(shared / "reference/llama2c_dump_tinystories656K_onceupon.txt");
    EXPECT_EQ(ids_str(tok->encode_with_policy(prompt, BosPolicy::ModelDefault)), ids_str(expected));
    EXPECT_EQ(tok->decode(expected), prompt);
}

// stories260K's tok512.bin encodes "Once upon a time" like llama2.c run.c (BOS + pieces).
TEST(GoldenTokenizer, Llama2cStories260K) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    auto tok = load_llama2c_tokenizer(shared / "models/stories260K/tok512.bin", 512);
    const auto expected =
        reference_tokens(shared / "reference/llama2c_dump_stories260K_onceupon.txt");
    EXPECT_EQ(ids_str(tok->encode_with_policy("Once upon a time", BosPolicy::ModelDefault)),
              ids_str(expected));
    EXPECT_EQ(tok->decode(expected), "Once upon a time");
}

// The stories260K greedy continuation, tokenized and decoded again, is unchanged (a long
// text through run.c's merge loop and decode).
TEST(GoldenTokenizer, Llama2cRoundTripReferenceText) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    auto tok = load_llama2c_tokenizer(shared / "models/stories260K/tok512.bin", 512);
    const std::string text =
        read_file(shared / "reference/llama2c_stories260K_greedy_onceupon.txt");
    EXPECT_EQ(tok->decode(tok->encode_with_policy(text, BosPolicy::Always)), text);
}

// Every zoo family with a BPE tokenizer.json gives exactly the golden input_ids (HF
// add_special_tokens=True = BosPolicy::ModelDefault) for every golden text input.
TEST(GoldenTokenizer, ZooGoldenInputIds) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    for (const char* family :
         {"gpt2", "pythia", "qwen2", "mistral", "gemma", "phi", "roberta", "bert"}) {
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
            if (input.contains("text_pair")) {
                const auto pair = tok->encode_pair(text, input.at("text_pair").get<std::string>());
                EXPECT_EQ(ids_str(pair.ids), ids_str(expected));
                const auto golden_types =
                    io::read_npy(dir / "golden" / name / "token_type_ids.npy").to_i64();
                EXPECT_EQ(ids_str(pair.type_ids),
                          ids_str(std::vector<int32_t>(golden_types.begin(), golden_types.end())));
                ++n_checked;
                continue;
            }
            EXPECT_EQ(ids_str(tok->encode_with_policy(text, BosPolicy::ModelDefault)),
                      ids_str(expected));
            // WordPiece lowercases, so only the other families decode back to the text.
            if (tok->kind() != "wordpiece") {
                EXPECT_EQ(tok->decode(expected), text);
            }
            ++n_checked;
        }
        EXPECT_GE(n_checked, 3);
    }
}

namespace {

struct VectorResult {
    int n_cases = 0;
    int n_pass = 0;
    std::string first_failure;
};

// Runs llama.cpp's tokenizer test vectors (<vocab>.gguf.inp / .out): texts separated by
// "\n__ggml_vocab_test__\n", expected ids one line per text, without special tokens
// (HF encode(add_special_tokens=False)).
VectorResult run_vectors(const Tokenizer& tok, const fs::path& inp, const fs::path& out) {
    const std::string all = read_file(inp);
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> texts;
    for (size_t pos = 0;;) {
        const size_t hit = all.find(sep, pos);
        if (hit == std::string::npos) break;
        texts.push_back(all.substr(pos, hit - pos));
        pos = hit + sep.size();
    }
    std::ifstream lines(out);
    VectorResult r;
    for (const std::string& text : texts) {
        std::string line;
        if (!std::getline(lines, line)) {
            ADD_FAILURE() << out << ": fewer lines than texts";
            break;
        }
        std::istringstream s(line);
        std::vector<int32_t> expected;
        for (int32_t id; s >> id;) expected.push_back(id);
        ++r.n_cases;
        const auto got = tok.encode_with_policy(text, BosPolicy::Never);
        if (got == expected) {
            ++r.n_pass;
        } else if (r.first_failure.empty()) {
            r.first_failure =
                "text '" + text + "': expected" + ids_str(expected) + ", got" + ids_str(got);
        }
    }
    return r;
}

}  // namespace

// llama.cpp's llama-spm vectors (SentencePiece BPE, Llama 2 vocabulary): every case.
TEST(GoldenTokenizer, GgufLlamaSpmVectors) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path base = shared / "models/tokenizers/ggml-vocab-llama-spm.gguf";
    auto tok = load_gguf_tokenizer(base);
    const auto r = run_vectors(*tok, base.string() + ".inp", base.string() + ".out");
    EXPECT_EQ(r.n_cases, 46);
    EXPECT_EQ(r.n_pass, r.n_cases) << r.first_failure;
}

// llama.cpp's gpt-2 vectors (byte-level BPE, GPT-2 regex): every case.
TEST(GoldenTokenizer, GgufGpt2Vectors) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path base = shared / "models/tokenizers/ggml-vocab-gpt-2.gguf";
    auto tok = load_gguf_tokenizer(base);
    const auto r = run_vectors(*tok, base.string() + ".inp", base.string() + ".out");
    EXPECT_EQ(r.n_cases, 46);
    EXPECT_EQ(r.n_pass, r.n_cases) << r.first_failure;
}

// phi-3 vectors (Llama SPM vocabulary + user-defined chat tokens): every case.
TEST(GoldenTokenizer, GgufPhi3Vectors) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path base = shared / "models/tokenizers/ggml-vocab-phi-3.gguf";
    auto tok = load_gguf_tokenizer(base);
    const auto r = run_vectors(*tok, base.string() + ".inp", base.string() + ".out");
    EXPECT_EQ(r.n_cases, 46);
    EXPECT_EQ(r.n_pass, r.n_cases) << r.first_failure;
}

// stories260K.gguf (converted from the llama2.c checkpoint) tokenizes the prompt like
// llama2.c's tok512.bin: BOS by default (add_bos_token absent -> true) and the same pieces.
TEST(GoldenTokenizer, GgufStories260KMatchesLlama2c) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    auto tok = load_gguf_tokenizer(shared / "models/stories260K/stories260K.gguf");
    const auto expected =
        reference_tokens(shared / "reference/llama2c_dump_stories260K_onceupon.txt");
    EXPECT_EQ(ids_str(tok->encode_with_policy("Once upon a time", BosPolicy::ModelDefault)),
              ids_str(expected));
    EXPECT_EQ(tok->decode(expected), "Once upon a time");
}

// The GPT-NeoX GGUF vocabulary (no test vectors here) loads as byte-level BPE, agrees with the
// zoo's reduced Pythia tokenizer wherever the text only needs the first 8,192 ids' merges
// (the space-run tokens are user-defined), and round-trips text.
TEST(GoldenTokenizer, GgufGptNeoxLoadsAndRoundTrips) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    auto tok = load_gguf_tokenizer(shared / "models/tokenizers/ggml-vocab-gpt-neox.gguf");
    EXPECT_EQ(tok->kind(), "bpe-byte-level");
    EXPECT_EQ(tok->vocab_size(), 50432);
    const std::string text =
        "Hello world!  \xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE \xF0\x9F\xA6\x99\n\tend";
    EXPECT_EQ(tok->decode(tok->encode(text)), text);
    auto pythia = load_hf_tokenizer(shared / "zoo/pythia/tokenizer.json");
    int n_compared = 0;
    for (const std::string s : {"Hello world", "the cat sat on the mat", "a b c", "and then"}) {
        const auto full = tok->encode(s);
        if (*std::max_element(full.begin(), full.end()) >= 8192) continue;  // beyond the zoo cut
        EXPECT_EQ(ids_str(full), ids_str(pythia->encode(s))) << s;
        ++n_compared;
    }
    EXPECT_GE(n_compared, 2);
}

// bert-bge vectors (WordPiece, uncased, llama.cpp's phantom-space vocabulary): every case.
TEST(GoldenTokenizer, GgufBertBgeVectors) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path base = shared / "models/tokenizers/ggml-vocab-bert-bge.gguf";
    auto tok = load_gguf_tokenizer(base);
    const auto r = run_vectors(*tok, base.string() + ".inp", base.string() + ".out");
    EXPECT_EQ(r.n_cases, 46);
    EXPECT_EQ(r.n_pass, r.n_cases) << r.first_failure;
}

// A megabyte of text round-trips exactly through the GPT-2 vocabulary (its speed is measured
// by bench/bench_tokenizer.cpp, not here).
TEST(GoldenTokenizer, EncodesOneMegabyteRoundTrip) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    auto tok = load_gguf_tokenizer(shared / "models/tokenizers/ggml-vocab-gpt-2.gguf");
    const std::string story =
        read_file(shared / "reference/llama2c_stories260K_greedy_onceupon.txt");
    std::string text;
    for (int k = 0; text.size() < 1000000; ++k) text += story + std::to_string(k) + "\n";
    const auto ids = tok->encode(text);
    EXPECT_GT(ids.size(), text.size() / 8);
    EXPECT_EQ(tok->decode(ids), text);
}

// The zoo's tokenizer.json files with full vocabularies (GPT-2 byte-level BPE, BERT uncased
// WordPiece) pass the same llama.cpp vectors through the Hugging Face loader.
TEST(GoldenTokenizer, HfJsonFullVocabulariesPassVectors) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const std::pair<const char*, const char*> cases[] = {{"gpt2", "ggml-vocab-gpt-2.gguf"},
                                                         {"bert", "ggml-vocab-bert-bge.gguf"}};
    for (const auto& [family, vocab] : cases) {
        SCOPED_TRACE(family);
        auto tok = load_hf_tokenizer(shared / "zoo" / family / "tokenizer.json");
        const std::string base = (shared / "models/tokenizers" / vocab).string();
        const auto r = run_vectors(*tok, base + ".inp", base + ".out");
        EXPECT_EQ(r.n_cases, 46);
        EXPECT_EQ(r.n_pass, r.n_cases) << r.first_failure;
    }
}

// The GPT-NeoX GGUF vocabulary (llama.cpp ships no test vectors for it) agrees with the zoo's
// Pythia golden input_ids (HF GPTNeoXTokenizerFast) word by word: the zoo vocabulary is the
// first 8,192 ids of the same one, and since a BPE merge's result id grows with its rank, a
// pre-token whose full-vocabulary ids are all below 8,192 used only merges the zoo kept, so its
// golden ids must be identical. Golden tokens are aligned to pre-tokens by their bytes.
TEST(GoldenTokenizer, GgufGptNeoxMatchesPythiaGoldenIds) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    auto tok = load_gguf_tokenizer(shared / "models/tokenizers/ggml-vocab-gpt-neox.gguf");
    const fs::path dir = shared / "zoo/pythia";
    const auto manifest = nlohmann::json::parse(read_file(dir / "golden/manifest.json"));
    const Regex gpt2(kGpt2Pattern);
    int n_words = 0, n_compared = 0, n_inputs = 0;
    for (const auto& input : manifest.at("inputs")) {
        if (input.value("kind", "") != "text" || !input.contains("text")) continue;
        ++n_inputs;
        const std::string name = input.at("name").get<std::string>();
        SCOPED_TRACE(name);
        const std::string text = input.at("text").get<std::string>();
        const auto golden = io::read_npy(dir / "golden" / name / "input_ids.npy").to_i64();
        // Byte offset where each golden token ends (all golden ids are below 8,192 here).
        std::vector<size_t> ends;
        size_t pos = 0;
        for (int64_t id : golden) {
            ASSERT_LT(id, 8192);
            pos += tok->decode_token(static_cast<int32_t>(id)).size();
            ends.push_back(pos);
        }
        ASSERT_EQ(pos, text.size());
        size_t k = 0;  // next golden token
        for (auto [b, e] : split_by_regex(text, gpt2, SplitBehavior::Isolated, false)) {
            std::vector<int32_t> group;
            while (k < ends.size() && ends[k] <= e)
                group.push_back(static_cast<int32_t>(golden[k++]));
            ASSERT_TRUE(!group.empty() && (k == 0 || ends[k - 1] == e))
                << "token crosses byte " << e;
            ++n_words;
            const auto ids = tok->encode(text.substr(b, e - b));
            if (*std::max_element(ids.begin(), ids.end()) >= 8192) continue;
            EXPECT_EQ(ids_str(ids), ids_str(group)) << "'" << text.substr(b, e - b) << "'";
            ++n_compared;
        }
    }
    std::printf("gpt-neox GGUF vs zoo pythia golden ids: %d of %d pre-tokens compared (%d texts)\n",
                n_compared, n_words, n_inputs);
    EXPECT_GE(n_inputs, 3);
    EXPECT_GE(n_compared, n_words / 2);
}
