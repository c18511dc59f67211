// `sinkscope inspect` and `dump` on a Hugging Face directory whose tokenizer is a SentencePiece
// .model file (no tokenizer.json): the tinystories656K weights with a small Unigram model
// written here in the protobuf wire format (sentencepiece_model.proto field numbers).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <tuple>

#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/npy.hpp"
#include "testing.hpp"

using namespace sinkscope;
using testutil::run_cli;
namespace fs = std::filesystem;

namespace {

void put_varint(std::string& out, uint64_t v) {
    for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    out.push_back(static_cast<char>(v));
}
void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
    put_varint(out, (uint64_t{field} << 3) | 2);
    put_varint(out, bytes.size());
    out += bytes;
}

// ModelProto: pieces {1 piece, 2 score (fixed32), 3 type}, trainer_spec {3 model_type = 1
// (unigram)}, normalizer_spec {1 name "identity", 3 add_dummy_prefix, 4
// remove_extra_whitespaces} (no rules).
std::string unigram_model_proto(const std::vector<std::tuple<std::string, float, int>>& pieces) {
    std::string out;
    for (const auto& [text, score, type] : pieces) {
        std::string p;
        put_bytes(p, 1, text);
        put_varint(p, (2 << 3) | 5);
        uint32_t bits;
        std::memcpy(&bits, &score, 4);
        for (int k = 0; k < 4; ++k) p.push_back(static_cast<char>((bits >> (8 * k)) & 0xFF));
        put_varint(p, (3 << 3) | 0);
        put_varint(p, static_cast<uint64_t>(type));
        put_bytes(out, 1, p);
    }
    std::string trainer;
    put_varint(trainer, (3 << 3) | 0);
    put_varint(trainer, 1);
    put_bytes(out, 2, trainer);
    std::string norm;
    put_bytes(norm, 1, "identity");
    for (uint32_t f : {3u, 4u}) {
        put_varint(norm, (uint64_t{f} << 3) | 0);
        put_varint(norm, 1);
    }
    put_bytes(out, 3, norm);
    return out;
}

// tinystories656K's config and weights (linked) with a 30-piece Unigram tokenizer: <unk> <s>
// </s>, four whole words and the letters, so "Once upon a time" is exactly four pieces.
void make_model_dir(const fs::path& shared, const fs::path& dir, const std::string& name) {
    fs::create_directories(dir);
    for (const char* f : {"config.json", "model.safetensors"})
        fs::create_symlink(shared / "models/tinystories656K" / f, dir / f);
    std::vector<std::tuple<std::string, float, int>> pieces = {{"<unk>", 0, 2},
                                                               {"<s>", 0, 3},
                                                               {"</s>", 0, 3},
                                                               {"\xE2\x96\x81Once", -2, 1},
                                                               {"\xE2\x96\x81upon", -2, 1},
                                                               {"\xE2\x96\x81"
                                                                "a",
                                                                -2, 1},
                                                               {"\xE2\x96\x81time", -2, 1},
                                                               {"\xE2\x96\x81", -3, 1}};
    for (char c = 'a'; c <= 'z'; ++c) pieces.emplace_back(std::string(1, c), -5.0f, 1);
    std::ofstream(dir / name, std::ios::binary) << unigram_model_proto(pieces);
}

}  // namespace

// inspect finds tokenizer.model beside the weights and reports a SentencePiece Unigram
// tokenizer (ids 0..33, BOS 1, EOS 2) that prepends BOS (Llama convention).
TEST(CliUnigram, InspectFindsTokenizerModel) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    make_model_dir(shared, tmp / "m", "tokenizer.model");
    const auto r = run_cli({"inspect", "--model", (tmp / "m").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("tokenizer     spm-unigram (vocab 34, bos 1, eos 2)"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("default = prepend BOS"), std::string::npos) << r.out;
}

// dump tokenizes with sentencepiece.bpe.model (BOS + the four word pieces: length 5) and writes
// attention rows that are distributions.
TEST(CliUnigram, DumpWithSentencePieceModel) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    make_model_dir(shared, tmp / "m", "sentencepiece.bpe.model");
    std::ofstream(tmp / "data.txt") << "Once upon a time\n";
    const auto out = tmp / "out";
    const auto r =
        run_cli({"dump", "--model", (tmp / "m").string(), "--data", (tmp / "data.txt").string(),
                 "--hooks", "blocks.*.attn.hook_pattern", "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(io::read_npy(out / "lengths.npy").to_i64(), (std::vector<int64_t>{5}));
    const io::NpyArray a = io::read_npy(out / "attention.npy");
    ASSERT_EQ(a.shape.size(), 5u);
    ASSERT_EQ(a.shape[3], 5);
    const auto v = a.to_f64();
    double row = 0;
    for (int64_t j = 0; j < 5; ++j) row += v[static_cast<size_t>(4 * 5 + j)];
    EXPECT_WITHIN(row, 1.0, testutil::f32_softmax_sum_bound(5));
}
