// tokenizer/byte_bpe_trainer.hpp: merges worked out by hand on a tiny text, and the written
// tokenizer.json read back by load_hf_tokenizer: BOS in front by default, merges applied,
// decode(encode(x)) == x.
#include <gtest/gtest.h>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/tokenizer/byte_bpe_trainer.hpp"
#include "sinkscope/tokenizer/tokenizer.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::tokenizer;

// "aaab aaab": the GPT-2 pre-tokenizer gives the pieces "aaab" and " aaab" (space = U+0120 'Ġ'
// in the byte alphabet). Pair counts: (a,a) 4, (a,b) 2, (Ġ,a) 1 -> merge "a a". Then (aa,a) 2,
// (a,b) 2, (Ġ,aa) 1: a tie, broken by the smaller ids, (a=97, b=98) before (aa=257, a=97)
// -> "a b". Then (aa,ab) 2, (Ġ,aa) 1 -> "aa ab"; then only (Ġ,aaab) once: stop.
TEST(ByteBpeTrainer, MergesByHand) {
    const std::vector<Merge> m = train_byte_bpe("aaab aaab", 10);
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(m[0], Merge("a", "a"));
    EXPECT_EQ(m[1], Merge("a", "b"));
    EXPECT_EQ(m[2], Merge("aa", "ab"));
    EXPECT_EQ(train_byte_bpe("aaab aaab", 1).size(), 1u);
}

TEST(ByteBpeTrainer, TokenizerJsonLoadsBack) {
    testutil::ScratchDir tmp;
    write_file_atomic(tmp / "tokenizer.json",
                      byte_bpe_tokenizer_json(train_byte_bpe("aaab aaab", 10)));
    const auto tok = load_hf_tokenizer(tmp / "tokenizer.json");
    EXPECT_EQ(tok->vocab_size(), 257 + 3);
    EXPECT_EQ(tok->bos_id(), kByteBpeBosId);
    // "aaab" is one token (id 259 = 257 + the third merge); " aaab" is 'Ġ' (byte 32) + it.
    EXPECT_EQ(tok->encode_with_policy("aaab aaab", BosPolicy::ModelDefault),
              (std::vector<int32_t>{256, 259, 32, 259}));
    const std::string text = "Ünïcode, bytes \x01 and aaab!";
    EXPECT_EQ(tok->decode(tok->encode_with_policy(text, BosPolicy::ModelDefault)), text);
}
