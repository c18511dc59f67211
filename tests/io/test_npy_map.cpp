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

// In-memory arrays are read through their strides: a Fortran-ordered copy, a reversed view and a
// sub-sampled view of the same values give, element for element, the C-order values (checked
// from any starting element, as the pipeline reads one input at a time).
TEST(NpyMap, BorrowedArraysWithStrides) {
    const int64_t a = 2, b = 3, c = 4;
    auto value = [](int64_t i, int64_t j, int64_t k) { return float(100 * i + 10 * j + k); };
    std::vector<float> fortran(size_t(a * b * c)), big(size_t(8 * a * b * c));
    std::vector<double> want;
    for (int64_t i = 0; i < a; ++i)
        for (int64_t j = 0; j < b; ++j)
            for (int64_t k = 0; k < c; ++k) {
                want.push_back(value(i, j, k));
                fortran[size_t(i + a * (j + b * k))] = value(i, j, k);
                big[size_t(((2 * i) * (2 * b) + 2 * j) * (2 * c) + 2 * k)] = value(i, j, k);
            }
    const int64_t f = sizeof(float);
    NpyMap f_order("f", DType::F32, {a, b, c}, fortran.data(), {f, f * a, f * a * b});
    NpyMap every_second("s", DType::F32, {a, b, c}, big.data(), {f * 8 * b * c, f * 4 * c, f * 2});
    // The last axis reversed: element (i, j, k) at (i, j, c - 1 - k) of a C-order buffer.
    std::vector<float> flipped(size_t(a * b * c));
    for (int64_t r = 0; r < a * b; ++r)
        for (int64_t k = 0; k < c; ++k)
            flipped[size_t(r * c + (c - 1 - k))] = float(want[size_t(r * c + k)]);
    NpyMap reversed("r", DType::F32, {a, b, c}, flipped.data() + (c - 1), {f * b * c, f * c, -f});
    for (const NpyMap* m : {&f_order, &every_second, &reversed}) {
        EXPECT_FALSE(m->c_order()) << m->origin();
        for (int64_t first = 0; first < a * b * c; first += 5) {
            const int64_t count = a * b * c - first;
            std::vector<double> got(static_cast<size_t>(count));
            m->read_f64(first, count, got.data());
            for (int64_t k = 0; k < count; ++k)
                ASSERT_EQ(got[size_t(k)], want[size_t(first + k)]) << m->origin() << " " << k;
        }
    }
    // C-order strides are recognised as such (the contiguous path).
    NpyMap c_order("c", DType::F32, {a, b, c}, fortran.data(), {f * b * c, f * c, f});
    EXPECT_TRUE(c_order.c_order());
}
