// .npy/.npz reader and writer: byte-level format, round trips, and every malformed-file error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/table.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::io;

namespace {
std::string npy_bytes(const std::string& dict, const std::string& payload, char major = 1) {
    std::string header = dict;
    size_t total = (major == 1 ? 10 : 12) + header.size() + 1;
    header += std::string((64 - total % 64) % 64, ' ') + "\n";
    std::string out("\x93NUMPY", 6);
    out += major;
    out += '\0';
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>(header.size() >> 8);
    if (major != 1) out += std::string(2, '\0');
    return out + header + payload;
}
NpyArray parse(const std::string& bytes) {
    return parse_npy(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "x.npy");
}
std::string expect_input_error(const std::string& bytes) {
    try {
        parse(bytes);
    } catch (const Error& e) {
        return e.what();
    }
    return "no error";
}
}  // namespace

// A header written the way numpy writes it parses to the right dtype, shape and values.
TEST(Npy, ParsesNumpyHeader) {
    float vals[6] = {1, 2, 3, 4, 5, 6.5f};
    std::string payload(reinterpret_cast<char*>(vals), sizeof vals);
    auto a =
        parse(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", payload));
    EXPECT_EQ(a.dtype, DType::F32);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a.to_f64()[5], 6.5);
    // Version 2 headers and scalar shapes.
    double one = 1.25;
    auto s = parse(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
                             std::string(reinterpret_cast<char*>(&one), 8), 2));
    EXPECT_TRUE(s.shape.empty());
    EXPECT_EQ(s.to_f64()[0], 1.25);
}

// Writing then reading returns identical bytes for every supported dtype and rank.
TEST(Npy, RoundTripAllDtypes) {
    testutil::ScratchDir tmp;
    std::vector<double> v = {0.5, -2, 3, 1e-3, 7, 8};
    for (DType t : {DType::F16, DType::F32, DType::F64, DType::I32, DType::I64}) {
        NpyArray a;
        a.dtype = t;
        a.shape = {1, 2, 3};
        a.data.resize(6 * dtype_size(t));
        for (size_t i = 0; i < 6; ++i) {
            uint8_t* p = a.data.data() + i * dtype_size(t);
            switch (t) {
                case DType::F16: {
                    uint16_t h = float_to_half(float(v[i]));
                    std::memcpy(p, &h, 2);
                    break;
                }
                case DType::F32: {
                    float f = float(v[i]);
                    std::memcpy(p, &f, 4);
                    break;
                }
                case DType::F64:
                    std::memcpy(p, &v[i], 8);
                    break;
                case DType::I32: {
                    int32_t k = int32_t(v[i]);
                    std::memcpy(p, &k, 4);
                    break;
                }
                case DType::I64: {
                    int64_t k = int64_t(v[i]);
                    std::memcpy(p, &k, 8);
                    break;
                }
            }
        }
        write_npy(tmp / "a.npy", a);
        auto b = read_npy(tmp / "a.npy");
        EXPECT_EQ(b.dtype, t);
        EXPECT_EQ(b.shape, a.shape);
        EXPECT_EQ(b.data, a.data);
    }
}

// Half-precision conversion is exact on representable values and rounds to nearest even.
TEST(Npy, HalfConversion) {
    for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f})
        EXPECT_EQ(half_to_float(float_to_half(f)), f);
    EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
    EXPECT_EQ(half_to_float(float_to_half(1.0f + 1.0f / 4096)), 1.0f);  // ties to even
}

// Malformed files give one-line errors naming the file and the problem.
TEST(Npy, BadInputErrors) {
    std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    EXPECT_NE(
        expect_input_error(npy_bytes(ok_dict, std::string(20, '\0'))).find("truncated .npy data"),
        std::string::npos);
    EXPECT_NE(expect_input_error(npy_bytes(ok_dict, std::string(28, '\0'))).find("trailing data"),
              std::string::npos);
    EXPECT_NE(expect_input_error(std::string("\x93NUMPX\x01\x00\x10\x00", 10)).find("bad magic"),
              std::string::npos);
    auto e = expect_input_error(npy_bytes(
        "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')));
    EXPECT_NE(e.find("x.npy: not supported: dtype '<c8'"), std::string::npos) << e;
    EXPECT_NE(
        expect_input_error(npy_bytes("{'descr': '<f4', 'shape': (1,), }", "abcd")).find("missing"),
        std::string::npos);
    std::string big_header("\x93NUMPY\x01\x00\xff\x7f", 10);
    EXPECT_NE(expect_input_error(big_header + "{}").find("header length"), std::string::npos);
    EXPECT_NE(expect_input_error("\x93NU").find("truncated"), std::string::npos);
}

// An .npz of stored members round-trips every array under its key.
TEST(Npz, RoundTrip) {
    testutil::ScratchDir tmp;
    std::map<std::string, NpyArray> m;
    m["attn"] = make_npy_f64({2, 2}, {0.25, 0.75, 1, 0});
    m["ids"] = make_npy_i64({3}, {5, 6, 7});
    write_npz(tmp / "x.npz", m);
    auto r = read_npz(tmp / "x.npz");
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r["attn"].to_f64()[1], 0.75);
    EXPECT_EQ(r["ids"].to_i64()[2], 7);
    // Truncation anywhere is an input error, not a crash.
    std::ifstream in(tmp / "x.npz", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t cut : {bytes.size() - 1, bytes.size() / 2, size_t(10)}) {
        std::ofstream(tmp / "t.npz", std::ios::binary) << bytes.substr(0, cut);
        EXPECT_THROW(read_npz(tmp / "t.npz"), Error) << "cut at " << cut;
    }
}

// Tables write non-finite numbers as strings and read back what they wrote.
TEST(Table, CsvJsonlRoundTrip) {
    testutil::ScratchDir tmp;
    auto t = make_long_table();
    add_long_row(t, "m,1", "final", 0, 3, "sink_mass", "keep", 0.5);
    add_long_row(t, "m,1", "final", -1, -1, "rho", "model", std::nan(""));
    t.write(tmp.path(), "x");
    auto r = Table::read_csv(tmp / "x.csv");
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(std::get<std::string>(r.rows()[0][0]), "m,1");
    EXPECT_EQ(std::get<double>(r.rows()[0][6]), 0.5);
    EXPECT_TRUE(std::isnan(std::get<double>(r.rows()[1][6])));
    EXPECT_NE(t.to_jsonl().find("\"value\":\"nan\""), std::string::npos);
}
