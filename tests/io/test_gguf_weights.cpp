// GGUF weights: dtypes and PyTorch-order shapes of tensors in a file written byte by byte here,
// "not supported: TYPE in TENSOR" for other GGML types, and clean errors for corrupt files.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/gguf.hpp"
#include "sinkscope/io/weights.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::io;
namespace fs = std::filesystem;

namespace {
struct Bytes {
    std::string b;
    template <typename T>
    void put(T v) {
        b.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
    void str(const std::string& s) {
        put<uint64_t>(s.size());
        b += s;
    }
    void align(size_t a) {
        while (b.size() % a) b += '\0';
    }
};

struct GgTensor {
    std::string name;
    std::vector<uint64_t> ne;  // GGUF order
    uint32_t type;
    std::string data;
};

// GGUF v`version` with one metadata key and `tensors` laid out at 32-byte aligned offsets.
std::string gguf_bytes(const std::vector<GgTensor>& tensors, uint32_t version = 3) {
    Bytes w;
    w.b = "GGUF";
    w.put<uint32_t>(version);
    w.put<uint64_t>(tensors.size());
    w.put<uint64_t>(1);
    w.str("general.architecture");
    w.put<uint32_t>(8);
    w.str("llama");
    uint64_t off = 0;
    for (const auto& t : tensors) {
        w.str(t.name);
        w.put<uint32_t>(uint32_t(t.ne.size()));
        for (uint64_t d : t.ne) w.put<uint64_t>(d);
        w.put<uint32_t>(t.type);
        w.put<uint64_t>(off);
        off += (t.data.size() + 31) / 32 * 32;
    }
    w.align(32);
    for (const auto& t : tensors) {
        w.b += t.data;
        w.align(32);
    }
    return w.b;
}

template <typename T>
std::string raw(std::initializer_list<T> values) {
    std::string s;
    for (T v : values) s.append(reinterpret_cast<const char*>(&v), sizeof v);
    return s;
}

void write(const fs::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

std::string q8_block(uint16_t scale_bits, int8_t q0) {
    std::string s = raw<uint16_t>({scale_bits});
    for (int i = 0; i < 32; ++i) s += char(int8_t(q0 + i));
    return s;
}

std::string open_error(const fs::path& p, ErrorKind* kind) {
    try {
        auto store = open_gguf_weights(p);
        for (const auto& n : store->names()) to_f32(store->get(n));
    } catch (const Error& e) {
        *kind = e.kind();
        return e.what();
    }
    return "no error";
}

std::vector<GgTensor> sample_tensors() {
    return {
        {"token_embd.weight", {3, 2}, 0, raw<float>({0, 1, 2, 3, 4, 5})},
        {"output_norm.weight", {2}, 1, raw<uint16_t>({0x3C00, 0xC100})},       // F16 1, -2.5
        {"blk.0.attn_norm.weight", {2}, 30, raw<uint16_t>({0x3F80, 0x4049})},  // BF16
        {"blk.0.attn_q.weight", {32, 2}, 8, q8_block(0x3800, -16) + q8_block(0x4000, 0)},
        {"blk.0.ffn_up.weight", {256, 1}, 16, std::string(66, '\0')},  // IQ2_XXS
    };
}
}  // namespace

// Shapes come out reversed (ne [3, 2] -> [2, 3]) with row-major values, and each readable
// GGML type decodes to the hand-written values.
TEST(GgufWeights, ReadsTypesInPyTorchOrder) {
    testutil::ScratchDir dir;
    write(dir / "m.gguf", gguf_bytes(sample_tensors()));
    auto store = open_gguf_weights(dir / "m.gguf");
    EXPECT_EQ(store->names().size(), 5u);
    EXPECT_EQ(store->names().front(), "token_embd.weight");
    EXPECT_EQ(store->files(), std::vector<fs::path>{dir / "m.gguf"});

    TensorView emb = store->get("token_embd.weight");
    EXPECT_EQ(emb.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(emb.dtype, WeightDType::F32);
    EXPECT_EQ(to_f32(emb), (std::vector<float>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(to_f32(store->get("output_norm.weight")), (std::vector<float>{1.f, -2.5f}));
    EXPECT_EQ(to_f32(store->get("blk.0.attn_norm.weight")), (std::vector<float>{1.f, 3.140625f}));

    TensorView q = store->get("blk.0.attn_q.weight");
    EXPECT_EQ(q.dtype, WeightDType::Q8_0);
    EXPECT_EQ(q.shape, (std::vector<int64_t>{2, 32}));
    EXPECT_EQ(q.n_bytes, 68u);
    auto qv = to_f32(q);
    for (int i = 0; i < 32; ++i) {
        EXPECT_EQ(qv[i], 0.5f * float(i - 16));
        EXPECT_EQ(qv[32 + i], 2.0f * float(i));
    }
}

// Types sinkscope does not read (IQ2_XXS, an id ggml does not define) are listed, and get()
// names the type and the tensor.
TEST(GgufWeights, OtherTypesAreUnsupported) {
    testutil::ScratchDir dir;
    auto tensors = sample_tensors();
    tensors.push_back({"blk.0.odd", {4}, 99, std::string(4, '\0')});  // no such GGML type
    write(dir / "m.gguf", gguf_bytes(tensors));
    auto store = open_gguf_weights(dir / "m.gguf");
    EXPECT_TRUE(store->has("blk.0.ffn_up.weight"));
    for (auto [name, type] : std::vector<std::pair<std::string, std::string>>{
             {"blk.0.ffn_up.weight", "IQ2_XXS"}, {"blk.0.odd", "GGML type 99"}}) {
        try {
            store->get(name);
            ADD_FAILURE() << "no error for " << name;
        } catch (const UnsupportedError& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find("not supported: " + type + " in '" + name + "'"), std::string::npos)
                << msg;
            EXPECT_EQ(msg.rfind((dir / "m.gguf").string(), 0), 0u) << msg;
        }
    }
}

// A missing tensor or a name used twice is an InputError naming file and tensor.
TEST(GgufWeights, MissingAndDuplicateTensors) {
    testutil::ScratchDir dir;
    write(dir / "m.gguf", gguf_bytes(sample_tensors()));
    auto store = open_gguf_weights(dir / "m.gguf");
    try {
        store->get("output.weight");
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("'output.weight'"), std::string::npos) << e.what();
    }
    auto dup = sample_tensors();
    dup[1].name = dup[0].name;
    write(dir / "dup.gguf", gguf_bytes(dup));
    ErrorKind kind{};
    const std::string msg = open_error(dir / "dup.gguf", &kind);
    EXPECT_EQ(kind, ErrorKind::Input) << msg;
    EXPECT_NE(msg.find("'token_embd.weight' appears twice"), std::string::npos) << msg;
}

// The store keeps a shared GgufFile alive after the caller lets go of it.
TEST(GgufWeights, SharedFileOutlivesCaller) {
    testutil::ScratchDir dir;
    write(dir / "m.gguf", gguf_bytes(sample_tensors()));
    auto file = std::make_shared<const GgufFile>(dir / "m.gguf");
    auto store = open_gguf_weights(file);
    file.reset();
    EXPECT_EQ(to_f32(store->get("token_embd.weight"))[5], 5.0f);
}

// Corrupt magic, version, counts, truncation and offsets fail with one line naming the file.
TEST(GgufWeights, CorruptFiles) {
    const std::string good = gguf_bytes(sample_tensors());
    auto patched = [&](size_t at, const std::string& bytes) {
        std::string b = good;
        b.replace(at, bytes.size(), bytes);
        return b;
    };
    struct Case {
        const char* what;
        std::string bytes;
        ErrorKind kind;
        const char* phrase;
    };
    const std::vector<Case> cases = {
        {"bad magic", patched(0, "GGML"), ErrorKind::Input, "magic"},
        {"version 1", patched(4, raw<uint32_t>({1})), ErrorKind::Unsupported, "version 1"},
        {"version 4", patched(4, raw<uint32_t>({4})), ErrorKind::Unsupported, "version 4"},
        {"tensor count", patched(8, raw<uint64_t>({uint64_t(1) << 60})), ErrorKind::Input,
         "tensor count"},
        {"metadata count", patched(16, raw<uint64_t>({uint64_t(1) << 60})), ErrorKind::Input,
         "metadata count"},
        {"metadata count one too many", patched(16, raw<uint64_t>({2})), ErrorKind::Input, "GGUF"},
        {"truncated data", good.substr(0, good.size() - 40), ErrorKind::Input, "GGUF"},
        {"truncated header", good.substr(0, 60), ErrorKind::Input, "GGUF"},
        {"too short", "GGUF", ErrorKind::Input, "GGUF"},
    };
    testutil::ScratchDir dir;
    for (const Case& c : cases) {
        SCOPED_TRACE(c.what);
        const fs::path p = dir / "bad.gguf";
        write(p, c.bytes);
        ErrorKind kind{};
        const std::string msg = open_error(p, &kind);
        EXPECT_EQ(kind, c.kind) << msg;
        EXPECT_EQ(msg.rfind(p.string() + ": ", 0), 0u) << msg;
        EXPECT_NE(msg.find(c.phrase), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
}

// A tensor offset past the data section is an InputError naming the tensor.
TEST(GgufWeights, OffsetOutOfRange) {
    auto tensors = sample_tensors();
    std::string b = gguf_bytes(tensors);
    // the first tensor's offset field follows "token_embd.weight", n_dims, 2 dims and type
    const size_t name_at = b.find("token_embd.weight");
    const size_t offset_at = name_at + 17 + 4 + 16 + 4;
    const uint64_t far = uint64_t(1) << 20;
    std::memcpy(b.data() + offset_at, &far, 8);
    testutil::ScratchDir dir;
    write(dir / "m.gguf", b);
    ErrorKind kind{};
    const std::string msg = open_error(dir / "m.gguf", &kind);
    EXPECT_EQ(kind, ErrorKind::Input) << msg;
    EXPECT_NE(msg.find("token_embd.weight"), std::string::npos) << msg;
}
