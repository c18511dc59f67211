// locate_model: which of HF directory / GGUF / llama2.c a path is, the files that go with it,
// and one InputError naming the path when it is none of them.
#include <gtest/gtest.h>

#include <fstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/model_files.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::io;
namespace fs = std::filesystem;

namespace {
void write(const fs::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}
// A valid llama2.c checkpoint: dim 8, hidden 12, 2 layers, 4 heads, 2 kv heads, vocab 5,
// seq_len 6 -> 1052 floats after the header (counted in test_llama2c.cpp).
void write_llama2c(const fs::path& p, int64_t n_floats = 1052) {
    const int32_t h[7] = {8, 12, 2, 4, 2, 5, 6};
    std::string b(reinterpret_cast<const char*>(h), sizeof h);
    b += std::string(size_t(n_floats) * 4, '\0');
    write(p, b);
}
std::string locate_error(const fs::path& p, ErrorKind* kind) {
    try {
        locate_model(p);
    } catch (const Error& e) {
        *kind = e.kind();
        return e.what();
    }
    return "no error";
}
}  // namespace

// A directory with config.json is HF; the sharded index wins over a single file, and
// tokenizer.json over tokenizer.model; naming config.json resolves to the same directory.
TEST(ModelFiles, HfDirectory) {
    testutil::ScratchDir dir;
    write(dir / "config.json", "{}");
    write(dir / "model.safetensors", "x");
    write(dir / "tokenizer.model", "x");
    ModelFiles m = locate_model(dir.path());
    EXPECT_EQ(m.format, ModelFormat::HfDirectory);
    EXPECT_EQ(m.weights_format, WeightsFormat::Safetensors);
    EXPECT_EQ(m.config, dir / "config.json");
    EXPECT_EQ(m.weights, dir / "model.safetensors");
    EXPECT_EQ(m.tokenizer, dir / "tokenizer.model");
    write(dir / "model.safetensors.index.json", "{}");
    write(dir / "tokenizer.json", "{}");
    m = locate_model(dir / "config.json");
    EXPECT_EQ(m.root, dir.path());
    EXPECT_EQ(m.weights, dir / "model.safetensors.index.json");
    EXPECT_EQ(m.tokenizer, dir / "tokenizer.json");
    EXPECT_STREQ(model_format_name(m.format), "hf");
}

// pytorch_model.bin is located when no safetensors is present; a truncated one is an
// InputError naming the file (valid ones are read in test_torch_pickle.cpp).
TEST(ModelFiles, PytorchBinIsLocated) {
    testutil::ScratchDir dir;
    write(dir / "config.json", "{}");
    write(dir / "pytorch_model.bin", "PK\x03\x04");
    ModelFiles m = locate_model(dir.path());
    EXPECT_EQ(m.weights_format, WeightsFormat::PytorchBin);
    EXPECT_EQ(m.weights, dir / "pytorch_model.bin");
    EXPECT_TRUE(m.tokenizer.empty());
    try {
        open_weights(m);
        ADD_FAILURE() << "a 4-byte pytorch_model.bin was accepted";
    } catch (const InputError& e) {
        EXPECT_EQ(e.file(), (dir / "pytorch_model.bin").string());
    }
    write(dir / "pytorch_model.bin.index.json", "{}");
    EXPECT_EQ(locate_model(dir.path()).weights, dir / "pytorch_model.bin.index.json");
    write(dir / "model.safetensors", "x");
    EXPECT_EQ(locate_model(dir.path()).weights_format, WeightsFormat::Safetensors);
}

// GGUF is recognised by its magic, whatever the extension; a directory with one .gguf and no
// config.json resolves to it.
TEST(ModelFiles, GgufByMagic) {
    testutil::ScratchDir dir;
    write(dir / "weights.bin", std::string("GGUF\x03\0\0\0", 8));
    ModelFiles m = locate_model(dir / "weights.bin");
    EXPECT_EQ(m.format, ModelFormat::Gguf);
    EXPECT_EQ(m.tokenizer, dir / "weights.bin");
    fs::rename(dir / "weights.bin", dir / "m.gguf");
    EXPECT_EQ(locate_model(dir.path()).weights, dir / "m.gguf");
}

// A llama2.c checkpoint finds tok<vocab>.bin beside it, else tokenizer.bin, else nothing.
TEST(ModelFiles, Llama2cWithTokenizer) {
    testutil::ScratchDir dir;
    write_llama2c(dir / "model.bin");
    EXPECT_TRUE(locate_model(dir / "model.bin").tokenizer.empty());
    write(dir / "tokenizer.bin", "x");
    EXPECT_EQ(locate_model(dir / "model.bin").tokenizer, dir / "tokenizer.bin");
    write(dir / "tok5.bin", "x");
    ModelFiles m = locate_model(dir / "model.bin");
    EXPECT_EQ(m.format, ModelFormat::Llama2c);
    EXPECT_EQ(m.tokenizer, dir / "tok5.bin");
    EXPECT_EQ(open_weights(m)->get("wq.1").shape, (std::vector<int64_t>{8, 8}));
}

// Paths that are no model give one InputError line naming the path and what was expected.
TEST(ModelFiles, NothingMatches) {
    testutil::ScratchDir dir;
    write(dir / "notes.txt", "hello");
    write_llama2c(dir / "short.bin", 1051);
    write(dir / "torch.bin", "PK\x03\x04rest");
    fs::create_directories(dir / "empty");
    fs::create_directories(dir / "cfg_only");
    write(dir / "cfg_only/config.json", "{}");
    fs::create_directories(dir / "st_only");
    write(dir / "st_only/model.safetensors", "x");
    const std::vector<std::pair<fs::path, std::string>> cases = {
        {dir / "missing", "no such file"},
        {dir / "notes.txt", "not a recognised model file"},
        {dir / "short.bin", "truncated"},
        {dir / "torch.bin", "PyTorch zip"},
        {dir / "empty", "no config.json"},
        {dir / "cfg_only", "no model.safetensors"},
        {dir / "st_only/model.safetensors", "no config.json"},
    };
    for (const auto& [p, phrase] : cases) {
        SCOPED_TRACE(p.string());
        ErrorKind kind{};
        const std::string msg = locate_error(p, &kind);
        EXPECT_EQ(kind, ErrorKind::Input) << msg;
        EXPECT_EQ(msg.rfind(p.string() + ": ", 0), 0u) << msg;
        EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
}
