// safetensors loader: values of every readable dtype, sharded checkpoints, and one clear
// InputError (naming file and tensor) for every malformed header.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/weights.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::io;
namespace fs = std::filesystem;

namespace {

// 8-byte little-endian header length, header, data (written by hand, independent of the loader).
std::string st_bytes(const std::string& header, const std::string& data) {
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[i] = char((n >> (8 * i)) & 0xff);
    return out + header + data;
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

// The message of the Error that opening `p` throws ("no error" when none).
std::string open_error(const fs::path& p, ErrorKind* kind = nullptr) {
    try {
        open_safetensors(p);
    } catch (const Error& e) {
        if (kind) *kind = e.kind();
        return e.what();
    }
    return "no error";
}

std::string f32_header(const std::string& name, const std::string& shape, int begin, int end) {
    return "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[" +
           std::to_string(begin) + "," + std::to_string(end) + "]}";
}

}  // namespace

// Every readable dtype decodes to the values whose bit patterns were written by hand.
TEST(Safetensors, ReadsEveryDtype) {
    testutil::ScratchDir dir;
    const std::string header = R"({"__metadata__":{"format":"pt"},)"
                               R"("a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                               R"("b":{"dtype":"F16","shape":[3],"data_offsets":[16,22]},)"
                               R"("c":{"dtype":"BF16","shape":[2],"data_offsets":[22,26]},)"
                               R"("d":{"dtype":"F64","shape":[1],"data_offsets":[26,34]},)"
                               R"("e":{"dtype":"I32","shape":[1],"data_offsets":[34,38]},)"
                               R"("s":{"dtype":"F32","shape":[],"data_offsets":[38,42]}})";
    const std::string data = raw<float>({1.f, 2.f, 3.f, 4.f}) +
                             raw<uint16_t>({0x3C00, 0xC000, 0x3555}) +
                             raw<uint16_t>({0x3F80, 0xC020}) + raw<double>({0.1}) +
                             raw<int32_t>({-7}) + raw<float>({-0.5f});
    write(dir / "m.safetensors", st_bytes(header, data));
    auto store = open_safetensors(dir / "m.safetensors");

    EXPECT_EQ(store->names(), (std::vector<std::string>{"a", "b", "c", "d", "e", "s"}));
    EXPECT_FALSE(store->has("__metadata__"));
    EXPECT_EQ(store->files(), std::vector<fs::path>{dir / "m.safetensors"});

    TensorView a = store->get("a");
    EXPECT_EQ(a.dtype, WeightDType::F32);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(a.n_bytes, 16u);
    EXPECT_EQ(to_f32(a), (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
    EXPECT_EQ(to_f32(store->get("b")), (std::vector<float>{1.f, -2.f, 0.333251953125f}));
    EXPECT_EQ(to_f32(store->get("c")), (std::vector<float>{1.f, -2.5f}));
    EXPECT_EQ(to_f32(store->get("d")), (std::vector<float>{0.1f}));
    TensorView e = store->get("e");
    EXPECT_EQ(e.dtype, WeightDType::I32);
    int32_t ev;
    std::memcpy(&ev, e.data, 4);
    EXPECT_EQ(ev, -7);
    TensorView s = store->get("s");  // a 0-d tensor has one element
    EXPECT_TRUE(s.shape.empty());
    EXPECT_EQ(to_f32(s), std::vector<float>{-0.5f});
}

// A directory resolves to its model.safetensors; an empty directory is an InputError.
TEST(Safetensors, DirectoryResolvesToModelFile) {
    testutil::ScratchDir dir;
    write(dir / "model.safetensors",
          st_bytes("{" + f32_header("w", "[1]", 0, 4) + "}", raw<float>({3.f})));
    auto store = open_safetensors(dir.path());
    EXPECT_EQ(to_f32(store->get("w")), std::vector<float>{3.f});
    testutil::ScratchDir empty;
    ErrorKind kind{};
    const std::string msg = open_error(empty.path(), &kind);
    EXPECT_EQ(kind, ErrorKind::Input);
    EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
}

// A valid dtype sinkscope does not read is listed but get() throws "not supported: U8 in 't'".
TEST(Safetensors, UnreadableDtypeIsUnsupportedOnGet) {
    testutil::ScratchDir dir;
    write(dir / "m.safetensors",
          st_bytes(R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", "abcd"));
    auto store = open_safetensors(dir / "m.safetensors");
    EXPECT_TRUE(store->has("t"));
    try {
        store->get("t");
        FAIL() << "no error";
    } catch (const UnsupportedError& e) {
        EXPECT_NE(std::string(e.what()).find("not supported: U8 in 't'"), std::string::npos)
            << e.what();
    }
}

// Asking for an absent tensor names the file and the tensor.
TEST(Safetensors, MissingTensorNamesFileAndTensor) {
    testutil::ScratchDir dir;
    write(dir / "m.safetensors",
          st_bytes("{" + f32_header("w", "[1]", 0, 4) + "}", raw<float>({3.f})));
    auto store = open_safetensors(dir / "m.safetensors");
    try {
        store->get("lm_head.weight");
        FAIL() << "no error";
    } catch (const InputError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("m.safetensors"), std::string::npos) << msg;
        EXPECT_NE(msg.find("lm_head.weight"), std::string::npos) << msg;
    }
}

struct BadCase {
    const char* what;
    std::string bytes;
    const char* tensor;  // must appear in the message (nullptr: file-level problem)
    const char* phrase;  // a phrase of the expected message
};

// Each malformed file is an InputError whose one line names the file, the tensor and the problem.
TEST(Safetensors, MalformedFilesAreInputErrors) {
    const std::string two_f32 = raw<float>({1.f, 2.f});
    const std::vector<BadCase> cases = {
        {"shorter than the length field", "abc", nullptr, "too short"},
        {"header length beyond file", st_bytes("{}", "").substr(0, 8).replace(0, 1, "\xe8") + "{}",
         nullptr, "runs past the end"},
        {"header not JSON", st_bytes("{\"w\": [", ""), nullptr, "not valid JSON"},
        {"header not an object", st_bytes("[1,2]", ""), nullptr, "not a JSON object"},
        {"metadata not strings", st_bytes(R"({"__metadata__":{"a":1}})", ""), nullptr,
         "__metadata__"},
        {"unknown dtype",
         st_bytes(R"({"w":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}})", two_f32.substr(0, 4)),
         "w", "unknown dtype 'Q9'"},
        {"missing dtype", st_bytes(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", "abcd"), "w",
         "dtype"},
        {"negative dim", st_bytes("{" + f32_header("w", "[-1]", 0, 4) + "}", "abcd"), "w",
         "non-negative"},
        {"missing offsets", st_bytes(R"({"w":{"dtype":"F32","shape":[1]}})", "abcd"), "w",
         "data_offsets"},
        {"shape x dtype != span", st_bytes("{" + f32_header("w", "[3]", 0, 8) + "}", two_f32), "w",
         "needs 12 bytes"},
        {"end before begin", st_bytes("{" + f32_header("w", "[0]", 8, 0) + "}", two_f32), "w",
         "end before begin"},
        {"offsets out of range", st_bytes("{" + f32_header("w", "[4]", 0, 16) + "}", two_f32), "w",
         "run past"},
        {"truncated data", st_bytes("{" + f32_header("w", "[2]", 0, 8) + "}", "abcd"), "w",
         "truncated"},
        {"overlap",
         st_bytes("{" + f32_header("a", "[2]", 0, 8) + "," + f32_header("b", "[2]", 4, 12) + "}",
                  two_f32 + "abcd"),
         "b", "overlap tensor 'a'"},
        {"hole",
         st_bytes("{" + f32_header("a", "[1]", 0, 4) + "," + f32_header("b", "[1]", 8, 12) + "}",
                  two_f32 + "abcd"),
         "b", "belong to no tensor"},
        {"trailing bytes", st_bytes("{" + f32_header("a", "[1]", 0, 4) + "}", two_f32), "a",
         "after the last tensor"},
    };
    testutil::ScratchDir dir;
    for (const BadCase& c : cases) {
        SCOPED_TRACE(c.what);
        const fs::path p = dir / "bad.safetensors";
        write(p, c.bytes);
        ErrorKind kind{};
        const std::string msg = open_error(p, &kind);
        EXPECT_EQ(kind, ErrorKind::Input) << msg;
        EXPECT_EQ(msg.rfind(p.string() + ": ", 0), 0u) << msg;  // starts with the file
        if (c.tensor) {
            EXPECT_NE(msg.find(std::string("'") + c.tensor + "'"), std::string::npos) << msg;
        }
        EXPECT_NE(msg.find(c.phrase), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;  // one line
    }
}

// A sharded checkpoint maps each shard once and exposes exactly the tensors of weight_map.
TEST(Safetensors, ShardedIndex) {
    testutil::ScratchDir dir;
    write(dir / "s1.safetensors",
          st_bytes("{" + f32_header("a", "[1]", 0, 4) + "," + f32_header("b", "[1]", 4, 8) + "}",
                   raw<float>({1.f, 2.f})));
    write(dir / "s2.safetensors", st_bytes("{" + f32_header("c", "[2]", 0, 8) + "," +
                                               f32_header("stray", "[1]", 8, 12) + "}",
                                           raw<float>({3.f, 4.f, 5.f})));
    write(dir / "model.safetensors.index.json",
          R"({"metadata":{"total_size":20},"weight_map":{"a":"s1.safetensors",)"
          R"("b":"s1.safetensors","c":"s2.safetensors"}})");
    for (const fs::path& p : {dir.path(), dir / "model.safetensors.index.json"}) {
        auto store = open_safetensors(p);
        EXPECT_EQ(store->names(), (std::vector<std::string>{"a", "b", "c"}));
        EXPECT_FALSE(store->has("stray"));
        EXPECT_EQ(store->files().size(), 2u);
        EXPECT_EQ(to_f32(store->get("b")), std::vector<float>{2.f});
        EXPECT_EQ(to_f32(store->get("c")), (std::vector<float>{3.f, 4.f}));
        EXPECT_EQ(store->get("c").file, dir / "s2.safetensors");
    }
}

// Index problems (bad JSON, no weight_map, a missing shard, a tensor absent from its shard)
// are InputErrors naming the index or shard and the tensor.
TEST(Safetensors, ShardedIndexErrors) {
    testutil::ScratchDir dir;
    write(dir / "s1.safetensors",
          st_bytes("{" + f32_header("a", "[1]", 0, 4) + "}", raw<float>({1.f})));
    const fs::path index = dir / "model.safetensors.index.json";
    struct Case {
        std::string json;
        std::vector<std::string> phrases;
    };
    const std::vector<Case> cases = {
        {"{\"weight_map\":", {index.string(), "not valid JSON"}},
        {R"({"metadata":{}})", {index.string(), "weight_map"}},
        {R"({"weight_map":{"a":"s1.safetensors","b":"gone.safetensors"}})",
         {index.string(), "'gone.safetensors'", "'b'", "not found"}},
        {R"({"weight_map":{"a":"s1.safetensors","z":"s1.safetensors"}})",
         {(dir / "s1.safetensors").string(), "'z'", "missing from this shard"}},
        {R"({"weight_map":{"a":"/etc/passwd"}})", {index.string(), "is not a file name inside"}},
        // A name longer than any file system allows (NAME_MAX is 255 on Linux) cannot be
        // looked up at all: an error of the index, not an uncaught filesystem_error.
        {R"({"weight_map":{"a":")" + std::string(300, 'n') + R"(.safetensors"}})",
         {index.string(), "'a'", "cannot be looked at"}},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.json);
        write(index, c.json);
        ErrorKind kind{};
        const std::string msg = open_error(dir.path(), &kind);
        EXPECT_EQ(kind, ErrorKind::Input) << msg;
        for (const auto& ph : c.phrases) EXPECT_NE(msg.find(ph), std::string::npos) << msg;
    }
}

// A path that does not exist is an IoError naming it (the OS refused, not a malformed file).
TEST(Safetensors, NonexistentFileIsIoError) {
    testutil::ScratchDir dir;
    ErrorKind kind{};
    const std::string msg = open_error(dir / "nope.safetensors", &kind);
    EXPECT_EQ(kind, ErrorKind::Io) << msg;
    EXPECT_NE(msg.find("nope.safetensors"), std::string::npos) << msg;
}

// The Hugging Face cache links every file of a snapshot to its blob store outside the snapshot
// folder: a shard that is such a link is read; a shard name that climbs out, or a linked folder
// leading out, is refused before anything of the named file is read.
TEST(Safetensors, ShardNamesStayInsideTheFolder) {
    testutil::ScratchDir dir;
    fs::create_directories(dir / "blobs");
    fs::create_directories(dir / "snapshot/sub");
    write(dir / "blobs/0123abcd",
          st_bytes("{" + f32_header("a", "[1]", 0, 4) + "}", raw<float>({7.f})));
    fs::create_symlink("../blobs/0123abcd", dir / "snapshot/s.safetensors");
    fs::create_symlink("../../blobs/0123abcd", dir / "snapshot/sub/t.safetensors");
    const fs::path index = dir / "snapshot/model.safetensors.index.json";
    for (const char* shard : {"s.safetensors", "sub/t.safetensors", "./sub/../s.safetensors"}) {
        SCOPED_TRACE(shard);
        write(index, std::string(R"({"weight_map":{"a":")") + shard + "\"}}");
        EXPECT_EQ(to_f32(open_safetensors(index)->get("a")), std::vector<float>{7.f});
    }
    fs::create_directory_symlink("../blobs", dir / "snapshot/linked");
    for (const char* shard :
         {"../blobs/0123abcd", "sub/../../blobs/0123abcd", "linked/0123abcd", "/etc/passwd", ""}) {
        SCOPED_TRACE(shard);
        write(index, std::string(R"({"weight_map":{"a":")") + shard + "\"}}");
        ErrorKind kind{};
        const std::string msg = open_error(index, &kind);
        EXPECT_EQ(kind, ErrorKind::Input) << msg;
        EXPECT_EQ(msg.rfind(index.string() + ": tensor 'a': shard '" + shard + "' ", 0), 0u) << msg;
    }
}
