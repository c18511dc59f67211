// GGUF metadata reader: a file written byte by byte here parses back; corrupt headers fail cleanly.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/gguf.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::io;

namespace {
struct Writer {
    std::string b;
    template <typename T>
    void put(T v) {
        b.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
    void str(const std::string& s) {
        put<uint64_t>(s.size());
        b += s;
    }
};

// A v3 file: 2 metadata keys, one F32 tensor [3 x 2] (ne0 = 3).
std::string tiny_gguf(uint32_t version = 3, uint64_t n_tensors = 1, uint64_t tensor_offset = 0) {
    Writer w;
    w.b = "GGUF";
    w.put<uint32_t>(version);
    w.put<uint64_t>(n_tensors);
    w.put<uint64_t>(3);
    w.str("general.architecture");
    w.put<uint32_t>(8);
    w.str("llama");
    w.str("llama.block_count");
    w.put<uint32_t>(4);
    w.put<uint32_t>(5);
    w.str("tokenizer.ggml.tokens");
    w.put<uint32_t>(9);
    w.put<uint32_t>(8);
    w.put<uint64_t>(2);
    w.str("a");
    w.str("bc");
    w.str("w");
    w.put<uint32_t>(2);
    w.put<uint64_t>(3);
    w.put<uint64_t>(2);
    w.put<uint32_t>(0);
    w.put<uint64_t>(tensor_offset);
    while (w.b.size() % 32) w.b += '\0';
    for (int i = 0; i < 6; ++i) w.put<float>(float(i));
    return w.b;
}
}  // namespace

// Metadata of every kind and tensor descriptions read back as written.
TEST(Gguf, ParsesWrittenFile) {
    testutil::ScratchDir tmp;
    std::ofstream(tmp / "a.gguf", std::ios::binary) << tiny_gguf();
    GgufFile f(tmp / "a.gguf");
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    EXPECT_EQ(f.get_int("llama.block_count"), 5);
    EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens"), (std::vector<std::string>{"a", "bc"}));
    ASSERT_EQ(f.tensors().size(), 1u);
    const auto* t = f.find_tensor("w");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dims, (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(t->n_bytes, 24u);
    float v;
    std::memcpy(&v, f.tensor_data(*t) + 4 * 5, 4);
    EXPECT_EQ(v, 5.0f);
    EXPECT_THROW(f.get_int("general.architecture"), InputError);
}

// Corrupt magic, version, counts, offsets and truncation: InputError naming the file.
TEST(Gguf, CorruptFilesFailCleanly) {
    testutil::ScratchDir tmp;
    auto expect_error = [&](std::string bytes, const std::string& needle) {
        std::ofstream(tmp / "bad.gguf", std::ios::binary | std::ios::trunc) << bytes;
        try {
            GgufFile f(tmp / "bad.gguf");
            ADD_FAILURE() << "no error for " << needle;
        } catch (const Error& e) {
            std::string msg = e.what();
            EXPECT_NE(msg.find("bad.gguf"), std::string::npos) << msg;
            EXPECT_NE(msg.find(needle), std::string::npos) << msg;
        }
    };
    std::string good = tiny_gguf();
    expect_error("GGUX" + good.substr(4), "bad magic");
    expect_error(tiny_gguf(1), "version 1");
    expect_error(tiny_gguf(3, uint64_t(1) << 60), "tensor count");
    expect_error(tiny_gguf(3, 1, 64), "beyond the end");
    expect_error(good.substr(0, 60), "truncated");
    expect_error(good.substr(0, good.size() - 4), "beyond the end");
}
