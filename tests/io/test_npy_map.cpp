// Memory-mapped .npy reading: same values as read_npy, header checks against the file size.
#include <gtest/gtest.h>

#include <fstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/npy_map.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::io;

// Mapped elements widen to the same doubles and integers as the in-memory reader.
TEST(NpyMap, MatchesReadNpy) {
    testutil::ScratchDir dir;
    write_npy(dir / "f.npy", make_npy_f32({2, 3}, {1.5f, -2.0f, 0.25f, 3.0f, 1e-8f, 7.0f}));
    write_npy(dir / "i.npy", make_npy_i64({3}, {-4, 0, 1LL << 40}));
    NpyMap f(dir / "f.npy");
    EXPECT_EQ(f.shape(), (std::vector<int64_t>{2, 3}));
    std::vector<double> got(4);
    f.read_f64(2, 4, got.data());
    auto ref = read_npy(dir / "f.npy").to_f64();
    for (int k = 0; k < 4; ++k) EXPECT_EQ(got[k], ref[k + 2]);
    NpyMap i(dir / "i.npy");
    std::vector<int64_t> iv(3);
    i.read_i64(0, 3, iv.data());
    EXPECT_EQ(iv, (std::vector<int64_t>{-4, 0, 1LL << 40}));
    EXPECT_THROW(f.read_i64(0, 1, iv.data()), UnsupportedError);
}

// A truncated or missing file is rejected naming it.
TEST(NpyMap, TruncatedAndMissing) {
    testutil::ScratchDir dir;
    std::string bytes = serialize_npy(make_npy_f64({4}, {1, 2, 3, 4}));
    bytes.resize(bytes.size() - 3);
    std::ofstream(dir / "t.npy", std::ios::binary) << bytes;
    try {
        NpyMap m(dir / "t.npy");
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("t.npy: truncated"), std::string::npos) << e.what();
    }
    EXPECT_THROW(NpyMap(dir / "missing.npy"), IoError);
    std::ofstream(dir / "empty.npy", std::ios::binary).flush();
    EXPECT_THROW(NpyMap(dir / "empty.npy"), InputError);
}
