// MappedFile: the mapping shows the file's bytes, survives moves, and maps empty files to
// (nullptr, 0); unopenable paths are IoErrors naming the path.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/mmap_file.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::io;

// The mapped bytes are the file's bytes, and a moved-to object owns the same mapping.
TEST(MappedFile, BytesAndMove) {
    testutil::ScratchDir dir;
    std::ofstream(dir / "f.bin", std::ios::binary) << "hello";
    MappedFile a(dir / "f.bin");
    ASSERT_EQ(a.size(), 5u);
    EXPECT_EQ(std::memcmp(a.data(), "hello", 5), 0);
    const uint8_t* p = a.data();
    MappedFile b(std::move(a));
    EXPECT_EQ(b.data(), p);
    EXPECT_EQ(a.data(), nullptr);
    MappedFile c;
    c = std::move(b);
    EXPECT_EQ(c.data(), p);
    EXPECT_EQ(c.path(), dir / "f.bin");
}

// An empty file has no mapping; a missing file or a directory is an IoError naming the path.
TEST(MappedFile, EmptyMissingAndDirectory) {
    testutil::ScratchDir dir;
    std::ofstream(dir / "empty.bin", std::ios::binary).flush();
    MappedFile e(dir / "empty.bin");
    EXPECT_EQ(e.size(), 0u);
    EXPECT_EQ(e.data(), nullptr);
    for (const auto& p : {dir / "missing.bin", dir.path()}) {
        try {
            MappedFile m(p);
            ADD_FAILURE() << "no error for " << p;
        } catch (const IoError& err) {
            EXPECT_NE(std::string(err.what()).find(p.string()), std::string::npos) << err.what();
        }
    }
}
