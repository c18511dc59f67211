// llama2.c checkpoint loader: tensor order and shapes of run.c's layout, shared and unshared
// classifier, and InputErrors for truncated files and impossible headers.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/weights.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::io;
namespace fs = std::filesystem;

namespace {
// Header ints, then n_floats floats whose value is their own index (so a view's first value
// is its offset in floats after the header).
void write_ckpt(const fs::path& p, std::vector<int32_t> header, int64_t n_floats) {
    std::ofstream f(p, std::ios::binary);
    f.write(reinterpret_cast<const char*>(header.data()), std::streamsize(header.size() * 4));
    for (int64_t i = 0; i < n_floats; ++i) {
        float v = float(i);
        f.write(reinterpret_cast<const char*>(&v), 4);
    }
}
// dim 8, hidden 12, 2 layers, 4 heads, 2 kv heads (head 2, kv_dim 4), vocab 5, seq_len 6.
// Floats by hand: emb 40, rms_att 16, wq 128, wk 64, wv 64, wo 128, rms_ffn 16, w1 192,
// w2 192, w3 192, rms_final 8, freq_cis 2 * 6 * 2 / 2 = 12 -> 1052; + wcls 40 -> 1092.
constexpr int64_t k_shared_floats = 1052, k_unshared_floats = 1092;
std::vector<int32_t> tiny_header(int32_t vocab = 5) {
    return {8, 12, 2, 4, 2, vocab, 6};
}

float first(const WeightStore& s, const std::string& name) {
    return to_f32(s.get(name)).front();
}

std::string open_error(const fs::path& p, ErrorKind* kind) {
    try {
        open_llama2c(p, nullptr);
    } catch (const Error& e) {
        *kind = e.kind();
        return e.what();
    }
    return "no error";
}
}  // namespace

// Every tensor sits at the offset and has the shape run.c's memory_map_weights gives it.
TEST(Llama2c, SharedClassifierLayout) {
    testutil::ScratchDir dir;
    write_ckpt(dir / "m.bin", tiny_header(), k_shared_floats);
    Llama2cHeader h{};
    auto store = open_llama2c(dir / "m.bin", &h);
    EXPECT_EQ(h.dim, 8);
    EXPECT_EQ(h.n_kv_heads, 2);
    EXPECT_TRUE(h.shared_classifier);
    EXPECT_FALSE(store->has("wcls"));
    EXPECT_EQ(store->names().size(), 1u + 9u * 2u + 1u);
    struct Want {
        const char* name;
        std::vector<int64_t> shape;
        float offset;
    };
    for (const Want& w : std::vector<Want>{{"token_embedding_table", {5, 8}, 0},
                                           {"rms_att_weight.0", {8}, 40},
                                           {"rms_att_weight.1", {8}, 48},
                                           {"wq.0", {8, 8}, 56},
                                           {"wq.1", {8, 8}, 120},
                                           {"wk.0", {4, 8}, 184},
                                           {"wk.1", {4, 8}, 216},
                                           {"wv.1", {4, 8}, 280},
                                           {"wo.0", {8, 8}, 312},
                                           {"rms_ffn_weight.1", {8}, 448},
                                           {"w1.0", {12, 8}, 456},
                                           {"w2.1", {8, 12}, 744},
                                           {"w3.1", {12, 8}, 936},
                                           {"rms_final_weight", {8}, 1032}}) {
        SCOPED_TRACE(w.name);
        TensorView v = store->get(w.name);
        EXPECT_EQ(v.shape, w.shape);
        EXPECT_EQ(v.dtype, WeightDType::F32);
        auto x = to_f32(v);
        EXPECT_EQ(x.front(), w.offset);
        EXPECT_EQ(x.back(), w.offset + float(x.size() - 1));
    }
}

// A negative vocab_size means an unshared classifier stored after freq_cis.
TEST(Llama2c, UnsharedClassifier) {
    testutil::ScratchDir dir;
    write_ckpt(dir / "m.bin", tiny_header(-5), k_unshared_floats);
    Llama2cHeader h{};
    auto store = open_llama2c(dir / "m.bin", &h);
    EXPECT_FALSE(h.shared_classifier);
    EXPECT_EQ(store->get("wcls").shape, (std::vector<int64_t>{5, 8}));
    EXPECT_EQ(first(*store, "wcls"), 1052.0f);
    EXPECT_EQ(store->get("token_embedding_table").shape, (std::vector<int64_t>{5, 8}));
    EXPECT_EQ(store->files(), std::vector<fs::path>{dir / "m.bin"});
}

// Truncated or padded files, short headers and impossible header values are InputErrors
// naming the file; the "ak42" export format is UnsupportedError; nothing crashes.
TEST(Llama2c, BadFiles) {
    struct Case {
        const char* what;
        std::vector<int32_t> header;
        int64_t n_floats;
        ErrorKind kind;
        const char* phrase;
    };
    const std::vector<Case> cases = {
        {"truncated", tiny_header(), k_shared_floats - 1, ErrorKind::Input, "(truncated)"},
        {"unshared but no wcls", tiny_header(-5), k_shared_floats, ErrorKind::Input, "truncated"},
        {"trailing bytes", tiny_header(), k_shared_floats + 1, ErrorKind::Input, "trailing"},
        {"short header", {8, 12, 2, 4}, 0, ErrorKind::Input, "too short"},
        {"zero dim", {0, 12, 2, 4, 2, 5, 6}, 0, ErrorKind::Input, "non-positive"},
        {"zero kv heads", {8, 12, 2, 4, 0, 5, 6}, 0, ErrorKind::Input, "non-positive"},
        {"heads do not divide dim",
         {8, 12, 2, 3, 1, 5, 6},
         0,
         ErrorKind::Input,
         "not a multiple of n_heads"},
        {"kv heads do not divide heads",
         {8, 12, 2, 4, 3, 5, 6},
         0,
         ErrorKind::Input,
         "not a multiple of n_kv_heads"},
        {"huge header",
         {1 << 30, 1 << 30, 1000, 1, 1, -0x7fffffff - 1, 0x7fffffff},
         4,
         ErrorKind::Input,
         "implies"},
        {"export v1 magic", {0x616b3432, 1, 8, 12, 2, 4, 2}, 0, ErrorKind::Unsupported, "ak42"},
    };
    testutil::ScratchDir dir;
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        const fs::path p = dir / "bad.bin";
        write_ckpt(p, c.header, c.n_floats);
        ErrorKind kind{};
        const std::string msg = open_error(p, &kind);
        EXPECT_EQ(kind, c.kind) << msg;
        EXPECT_EQ(msg.rfind(p.string() + ": ", 0), 0u) << msg;
        EXPECT_NE(msg.find(c.phrase), std::string::npos) << msg;
    }
}
