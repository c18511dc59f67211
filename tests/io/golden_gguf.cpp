// GGUF reader on the real files in ../shared: llama.cpp-converted stories260K and vocab files.
#include <gtest/gtest.h>

#include "sinkscope/io/gguf.hpp"
#include "testing.hpp"

using namespace sinkscope::io;

// stories260K.gguf carries the hyper-parameters listed in ../shared/models/README.md.
TEST(GgufGolden, Stories260KMetadata) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    GgufFile f(shared / "models/stories260K/stories260K.gguf");
    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    EXPECT_EQ(f.get_int("llama.block_count"), 5);
    EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
    EXPECT_EQ(f.get_int("llama.attention.head_count"), 8);
    EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 4);
    EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 512u);
    const auto* emb = f.find_tensor("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->dims, (std::vector<int64_t>{64, 512}));
}

// Every vocabulary-only GGUF of ../shared parses and has a token list.
TEST(GgufGolden, VocabFilesParse) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    for (const char* name : {"gpt-2", "gpt-neox", "bert-bge", "llama-spm", "phi-3"}) {
        GgufFile f(shared / "models/tokenizers" / (std::string("ggml-vocab-") + name + ".gguf"));
        EXPECT_GT(f.get_string_array("tokenizer.ggml.tokens").size(), 1000u) << name;
        EXPECT_TRUE(f.has("tokenizer.ggml.model")) << name;
    }
}
