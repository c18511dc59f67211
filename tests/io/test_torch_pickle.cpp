// PyTorch zip checkpoints: the zip reader, the restricted unpickler and the weight store, against
// files written by Python's torch.save (torch_save_fixtures.hpp) and against archives and pickles
// built byte by byte here (malicious globals, corrupt zips, storages too small).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/model_files.hpp"
#include "sinkscope/io/torch_pickle.hpp"
#include "sinkscope/io/zip_archive.hpp"
#include "testing.hpp"
#include "torch_bin_writer.hpp"
#include "torch_save_fixtures.hpp"

using namespace sinkscope;
using namespace sinkscope::io;
namespace fs = std::filesystem;
using namespace sinkscope::testutil;

namespace {

void write(const fs::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

std::string from_hex(const char* hex) {
    std::string out;
    for (size_t i = 0; hex[i] && hex[i + 1]; i += 2)
        out.push_back(char(std::stoi(std::string(hex + i, 2), nullptr, 16)));
    return out;
}

std::string floats(std::initializer_list<float> v) {
    std::string s;
    for (float f : v) put<float>(s, f);
    return s;
}

// The error open_pytorch_bin(path) throws ("no error" when none), and its kind.
std::string open_error(const fs::path& p, ErrorKind* kind = nullptr) {
    try {
        auto store = open_pytorch_bin(p);
        for (const std::string& n : store->names()) store->get(n);
    } catch (const Error& e) {
        if (kind) *kind = e.kind();
        return e.what();
    }
    return "no error";
}

// Opening `p` gives a one-line InputError that starts with the name of `named` (default: `p`)
// and contains `phrase`.
void expect_input_error(const fs::path& p, const std::string& phrase, fs::path named = {}) {
    if (named.empty()) named = p;
    ErrorKind kind{};
    const std::string msg = open_error(p, &kind);
    EXPECT_EQ(kind, ErrorKind::Input) << msg;
    EXPECT_EQ(msg.rfind(named.string() + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

std::vector<float> values(const WeightStore& s, const std::string& name) {
    return to_f32(s.get(name));
}

}  // namespace

// Every tensor of a Python torch.save checkpoint reads back with its dtype, shape and values,
// including a view into a shared storage (offset 3), a 0-d tensor and an nn.Parameter.
TEST(TorchPickle, ReadsPythonTorchSave) {
    testutil::ScratchDir dir;
    write(dir / "sd.bin", from_hex(testfixture::k_torch_save_sd_hex));
    const auto store = open_pytorch_bin(dir / "sd.bin");
    EXPECT_EQ(store->names(), (std::vector<std::string>{"a.weight", "b", "c", "d", "s", "p"}));
    const TensorView a = store->get("a.weight");
    EXPECT_EQ(a.dtype, WeightDType::F32);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a.file, dir / "sd.bin");
    EXPECT_EQ(values(*store, "a.weight"), (std::vector<float>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(store->get("b").dtype, WeightDType::F16);
    EXPECT_EQ(values(*store, "b"), (std::vector<float>{0, 1, 2, 3}));
    EXPECT_EQ(store->get("c").dtype, WeightDType::BF16);
    EXPECT_EQ(values(*store, "c"), (std::vector<float>{1, -2, 0.5}));
    const TensorView d = store->get("d");
    EXPECT_EQ(d.data, a.data + 3 * sizeof(float));  // a view into the mapping, not a copy
    EXPECT_EQ(values(*store, "d"), (std::vector<float>{3, 4, 5}));
    EXPECT_TRUE(store->get("s").shape.empty());
    EXPECT_EQ(values(*store, "s"), (std::vector<float>{3}));
    EXPECT_EQ(values(*store, "p"), (std::vector<float>{1, 1}));
    EXPECT_EQ(store->files(), (std::vector<fs::path>{dir / "sd.bin"}));
}

// An nn.Module state dict pickled with protocol 4 (FRAME, MEMOIZE, SHORT_BINUNICODE, and BUILD
// of the dict's _metadata attribute) reads back; the archive folder is the file stem "module".
TEST(TorchPickle, ReadsModuleStateDictProtocol4) {
    testutil::ScratchDir dir;
    write(dir / "module.bin", from_hex(testfixture::k_torch_save_module_hex));
    const auto store = open_pytorch_bin(dir / "module.bin");
    EXPECT_EQ(store->names(),
              (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));
    EXPECT_EQ(values(*store, "0.weight"), (std::vector<float>{1, 2, 3, 4}));
    EXPECT_EQ(values(*store, "0.bias"), (std::vector<float>{5, 6}));
    EXPECT_EQ(values(*store, "1.weight"), (std::vector<float>{1, 1}));
}

// Any prefix of a valid checkpoint, and any prefix of its data.pkl inside an intact archive, is
// refused with one InputError line naming the file.
TEST(TorchPickle, EveryTruncationIsAnInputError) {
    testutil::ScratchDir dir;
    const std::string full = from_hex(testfixture::k_torch_save_sd_hex);
    for (size_t n = 0; n < full.size(); n += 17) {
        SCOPED_TRACE(n);
        write(dir / "t.bin", full.substr(0, n));
        expect_input_error(dir / "t.bin", "");
    }
    write(dir / "sd.bin", full);
    const ZipArchive zip(dir / "sd.bin");
    const ZipEntry* pkl = zip.find("sd/data.pkl");
    ASSERT_NE(pkl, nullptr);
    const std::string pickle(reinterpret_cast<const char*>(zip.data(*pkl)), pkl->size);
    std::vector<ZipItem> items;
    for (const ZipEntry& e : zip.entries())
        items.push_back({e.name, std::string(reinterpret_cast<const char*>(zip.data(e)), e.size)});
    for (size_t n = 0; n < pickle.size(); ++n) {
        SCOPED_TRACE(n);
        try {
            unpickle_state_dict(zip.data(*pkl), n, "x.bin");
            ADD_FAILURE() << "prefix accepted";
        } catch (const InputError& e) {
            EXPECT_EQ(std::string(e.what()).rfind("x.bin: pickle", 0), 0u) << e.what();
        }
        if (n % 50 != 0) continue;  // through the whole store only now and then (file I/O)
        items[0].data = pickle.substr(0, n);
        write(dir / "p.bin", make_zip(items));
        expect_input_error(dir / "p.bin", "pickle");
    }
    items[0].data = pickle;
    write(dir / "p.bin", make_zip(items));
    EXPECT_EQ(open_error(dir / "p.bin"), "no error");
}

// A hand-built archive (any top folder name, zip64 or not) reads back exactly.
TEST(TorchPickle, HandBuiltArchiveAndZip64) {
    testutil::ScratchDir dir;
    const std::string pkl = state_dict_pickle({{"w", "FloatStorage", "0", 6, 0, {2, 3}, {3, 1}},
                                               {"v", "FloatStorage", "0", 6, 4, {2}, {1}}});
    for (bool zip64 : {false, true}) {
        SCOPED_TRACE(zip64);
        write(dir / "m.bin", make_zip({{"my model/data.pkl", pkl},
                                       {"my model/data/0", floats({1, 2, 3, 4, 5, 6})},
                                       {"my model/version", "3\n"}},
                                      zip64));
        const ZipArchive zip(dir / "m.bin");
        ASSERT_EQ(zip.entries().size(), 3u);
        EXPECT_EQ(zip.entries()[1].size, 24u);
        EXPECT_EQ(zip.entries()[1].data_offset % 64, 0u);
        const auto store = open_pytorch_bin(dir / "m.bin");
        EXPECT_EQ(values(*store, "w"), (std::vector<float>{1, 2, 3, 4, 5, 6}));
        EXPECT_EQ(values(*store, "v"), (std::vector<float>{5, 6}));
    }
}

// GLOBALs outside the whitelist are refused by name in one line, before anything runs: the
// command os.system would run never creates its marker file.
TEST(TorchPickle, RefusesNonTensorGlobals) {
    testutil::ScratchDir dir;
    const fs::path marker = dir / "pwned";
    const std::string cmd = "touch " + marker.string();
    Pickle os_system;
    os_system.op(0x80).op(2).global("os", "system").str(cmd).op(0x85).op('R').op('.');
    Pickle eval;
    eval.op(0x80).op(2).global("builtins", "eval").str("1+1").op(0x85).op('R').op('.');
    Pickle getattr;
    getattr.op(0x80).op(2).global("__builtin__", "getattr").op('.');
    Pickle stack_global;  // protocol 4 names the callable through the stack
    stack_global.op(0x80).op(4).op(0x8c).op(2).raw("os").op(0x8c).op(6).raw("system").op(0x93);
    stack_global.str(cmd).op(0x85).op('R').op('.');
    // A whitelisted constructor whose argument smuggles a forbidden global.
    const std::string hooks = state_dict_pickle({{"w", "FloatStorage", "0", 1, 0, {1}, {1}}});
    std::string nested = hooks;
    const std::string od = "ccollections\nOrderedDict\n)R";
    nested.replace(nested.rfind(od), od.size(), "cposix\nsystem\n" + Pickle().str(cmd).b + "\x85R");
    const std::vector<std::pair<std::string, std::string>> cases = {
        {os_system.b, "os.system"},
        {eval.b, "builtins.eval"},
        {getattr.b, "__builtin__.getattr"},
        {stack_global.b, "os.system"},
        {nested, "posix.system"}};
    for (const auto& [bytes, global] : cases) {
        SCOPED_TRACE(global);
        const std::string want =
            "x.bin: pickle references '" + global + "', refused (only tensors are read)";
        try {
            unpickle_state_dict(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                "x.bin");
            ADD_FAILURE() << "accepted";
        } catch (const InputError& e) {
            EXPECT_EQ(std::string(e.what()), want);
        }
        write(dir / "evil.bin", make_zip({{"archive/data.pkl", bytes}}));
        expect_input_error(dir / "evil.bin", "pickle references '" + global + "', refused");
    }
    EXPECT_FALSE(fs::exists(marker));
}

// Opcodes torch.save never writes (INST, OBJ, NEWOBJ, EXT1) are refused by number and position.
TEST(TorchPickle, RefusesUnknownOpcodes) {
    for (uint8_t op : {uint8_t('i'), uint8_t('o'), uint8_t(0x81), uint8_t(0x82)}) {
        const std::string bytes = std::string("\x80\x02", 2) + char(op) + "....";
        try {
            unpickle_state_dict(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                "x.bin");
            ADD_FAILURE() << "opcode " << int(op) << " accepted";
        } catch (const InputError& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find("unsupported opcode"), std::string::npos) << msg;
            EXPECT_NE(msg.find("at byte 2"), std::string::npos) << msg;
        }
    }
}

// Corrupt archives: every structure the reader follows is bounds-checked and named.
TEST(TorchPickle, CorruptZipIsAnInputError) {
    testutil::ScratchDir dir;
    const std::string pkl = state_dict_pickle({{"w", "FloatStorage", "0", 2, 0, {2}, {1}}});
    const std::string good =
        make_zip({{"archive/data.pkl", pkl}, {"archive/data/0", floats({1, 2})}});
    write(dir / "good.bin", good);
    ASSERT_EQ(open_error(dir / "good.bin"), "no error");
    const size_t eocd = good.size() - 22;
    uint32_t cd_offset = 0;
    std::memcpy(&cd_offset, good.data() + eocd + 16, 4);
    auto patched = [&](size_t at, uint32_t v) {
        std::string s = good;
        std::memcpy(s.data() + at, &v, 4);
        return s;
    };
    const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
        {"empty.bin", "", "not a zip archive"},
        {"noeocd.bin", good.substr(0, eocd) + std::string(22, '\0'), "no end-of-central-directory"},
        {"cdsig.bin", patched(cd_offset, 0x12345678), "central directory entry 0"},
        {"cdpast.bin", patched(eocd + 16, uint32_t(good.size())), "central directory"},
        {"cdsize.bin", patched(eocd + 12, 1u << 30), "central directory"},
        {"local.bin", patched(cd_offset + 42, cd_offset - 4), "local header"},
        {"datasize.bin", patched(cd_offset + 20, 1u << 30), "runs past the end of the entries"},
        {"nopkl.bin", make_zip({{"archive/data/0", floats({1, 2})}}), "no <name>/data.pkl"},
        {"dup.bin", make_zip({{"a/data.pkl", pkl}, {"a/data.pkl", pkl}}), "appears twice"},
    };
    for (const auto& [name, bytes, phrase] : cases) {
        SCOPED_TRACE(name);
        write(dir / name, bytes);
        expect_input_error(dir / name, phrase);
    }
}

// Storages that do not hold what the pickle claims, or are too small for a tensor's shape,
// stride and offset, are InputErrors naming the file and tensor.
TEST(TorchPickle, StorageTooSmallIsAnInputError) {
    testutil::ScratchDir dir;
    const std::string six = floats({1, 2, 3, 4, 5, 6});
    const std::vector<std::tuple<TensorSpec, std::string, std::string>> cases = {
        {{"w", "FloatStorage", "0", 6, 0, {3, 3}, {3, 1}}, six, "reach element 8"},
        {{"w", "FloatStorage", "0", 6, 4, {3}, {1}}, six, "has only 6 elements"},
        {{"w", "FloatStorage", "0", 6, 0, {2, 3}, {3, 1}}, six.substr(0, 20), "holds 20 bytes"},
        {{"w", "FloatStorage", "1", 6, 0, {6}, {1}}, six, "is missing from the archive"},
        // A control byte in the storage key is escaped in the message, never printed raw.
        {{"w", "FloatStorage", "0q\x06", 6, 0, {6}, {1}},
         six,
         "'0q\\x06' (entry 'archive/data/0q\\x06')"},
        {{"w", "FloatStorage", "0", 6, -1, {2}, {1}}, six, "negative"},
        {{"w", "FloatStorage", "0", 6, 0, {2}, {-1}}, six, "negative"},
    };
    for (const auto& [spec, storage, phrase] : cases) {
        SCOPED_TRACE(phrase);
        write(dir / "s.bin", make_zip({{"archive/data.pkl", state_dict_pickle({spec})},
                                       {"archive/data/0", storage}}));
        expect_input_error(dir / "s.bin", phrase);
        expect_input_error(dir / "s.bin", "tensor 'w'");
    }
}

// Valid but unreadable: compressed entries, the legacy format, and (only when asked for) bool
// tensors and non-contiguous views are UnsupportedError; the other tensors stay readable.
TEST(TorchPickle, UnsupportedButWellFormed) {
    testutil::ScratchDir dir;
    const std::string pkl = state_dict_pickle({{"w", "FloatStorage", "0", 2, 0, {2}, {1}}});
    write(dir / "deflate.bin", make_zip({{"archive/data.pkl", pkl, 8}}));
    ErrorKind kind{};
    EXPECT_NE(open_error(dir / "deflate.bin", &kind).find("compressed (method 8)"),
              std::string::npos);
    EXPECT_EQ(kind, ErrorKind::Unsupported);

    write(dir / "legacy.bin", from_hex("80028a0a6cfc9c46f9206aa850192e80024de903"));
    EXPECT_NE(open_error(dir / "legacy.bin", &kind).find("legacy (non-zip) torch.save format"),
              std::string::npos);
    EXPECT_EQ(kind, ErrorKind::Unsupported);

    const std::string mixed = state_dict_pickle({{"t", "FloatStorage", "0", 6, 0, {3, 2}, {1, 3}},
                                                 {"mask", "BoolStorage", "1", 4, 0, {2, 2}, {2, 1}},
                                                 {"w", "FloatStorage", "0", 6, 0, {6}, {1}}});
    write(dir / "mixed.bin", make_zip({{"archive/data.pkl", mixed},
                                       {"archive/data/0", floats({1, 2, 3, 4, 5, 6})},
                                       {"archive/data/1", std::string(4, '\1')}}));
    const auto store = open_pytorch_bin(dir / "mixed.bin");
    EXPECT_EQ(values(*store, "w"), (std::vector<float>{1, 2, 3, 4, 5, 6}));
    EXPECT_THROW(store->get("t"), UnsupportedError);
    EXPECT_THROW(store->get("mask"), UnsupportedError);
    EXPECT_THROW(store->get("nope"), InputError);
}

// A state dict whose values are not tensors is refused, naming the entry.
TEST(TorchPickle, NonTensorValueIsRefused) {
    Pickle p;
    p.op(0x80).op(2).op('}').str("epoch").integer(3).op('s').op('.');
    try {
        unpickle_state_dict(reinterpret_cast<const uint8_t*>(p.b.data()), p.b.size(), "x.bin");
        ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("'epoch' is not a tensor"), std::string::npos);
    }
}

// HF directories: pytorch_model.bin and the sharded pytorch_model.bin.index.json open through
// locate_model/open_weights; the index takes from each shard only the tensors it places there.
TEST(TorchPickle, HfDirectoryAndShardedIndex) {
    testutil::ScratchDir dir;
    write(dir / "config.json", "{}");
    const auto shard = [&](const std::string& file, const std::string& name, float v) {
        write(dir / file,
              make_zip({{"archive/data.pkl",
                         state_dict_pickle({{name, "FloatStorage", "0", 1, 0, {1}, {1}},
                                            {"extra", "FloatStorage", "0", 1, 0, {1}, {1}}})},
                        {"archive/data/0", floats({v})}}));
    };
    shard("pytorch_model.bin", "single", 7);
    EXPECT_EQ(values(*open_weights(locate_model(dir.path())), "single"), std::vector<float>{7});

    shard("pytorch_model-00001-of-00002.bin", "a", 1);
    shard("pytorch_model-00002-of-00002.bin", "b", 2);
    write(dir / "pytorch_model.bin.index.json",
          R"({"metadata": {}, "weight_map": {"a": "pytorch_model-00001-of-00002.bin",
                                             "b": "pytorch_model-00002-of-00002.bin"}})");
    const auto store = open_weights(locate_model(dir.path()));
    EXPECT_EQ(store->names(), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(values(*store, "a"), std::vector<float>{1});
    EXPECT_EQ(values(*store, "b"), std::vector<float>{2});
    EXPECT_EQ(store->files().size(), 2u);

    write(dir / "pytorch_model.bin.index.json",
          R"({"weight_map": {"c": "pytorch_model-00001-of-00002.bin"}})");
    expect_input_error(dir / "pytorch_model.bin.index.json", "'c' listed in",
                       dir / "pytorch_model-00001-of-00002.bin");
}
