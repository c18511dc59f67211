// convert_to_f32: bit-exact decoding of F16/BF16/F64/Q8_0 against hand-computed values, and
// the errors for views whose bytes do not match their dtype and shape.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/npy.hpp"
#include "sinkscope/io/weights.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::io;

namespace {
TensorView view(WeightDType t, std::vector<int64_t> shape, const std::vector<uint8_t>& bytes,
                size_t skip = 0) {
    TensorView v;
    v.name = "blk.0.attn_q.weight";
    v.dtype = t;
    v.shape = std::move(shape);
    v.data = bytes.data() + skip;
    v.n_bytes = bytes.size() - skip;
    v.file = "model.bin";
    return v;
}
std::vector<uint8_t> u16_bytes(std::initializer_list<uint16_t> xs) {
    std::vector<uint8_t> b;
    for (uint16_t x : xs) {
        b.push_back(uint8_t(x & 0xff));
        b.push_back(uint8_t(x >> 8));
    }
    return b;
}
}  // namespace

// IEEE half: normal, subnormal, largest finite, signed zero, infinities and NaN decode exactly.
TEST(Convert, HalfSpecialValues) {
    auto b = u16_bytes({0x3C00, 0x0001, 0x7BFF, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x3555});
    auto out = to_f32(view(WeightDType::F16, {8}, b));
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[1], std::ldexp(1.0f, -24));
    EXPECT_EQ(out[2], 65504.0f);
    EXPECT_TRUE(out[3] == 0.0f && std::signbit(out[3]));
    EXPECT_EQ(out[4], std::numeric_limits<float>::infinity());
    EXPECT_EQ(out[5], -std::numeric_limits<float>::infinity());
    EXPECT_TRUE(std::isnan(out[6]));
    EXPECT_EQ(out[7], 1365.0f / 4096.0f);  // 0x3555 = (1 + 341/1024) * 2^-2
}

// bfloat16 is the upper half of a float32: 0x4049 -> 3.140625, 0xFF80 -> -inf.
TEST(Convert, Bfloat16) {
    auto b = u16_bytes({0x3F80, 0x4049, 0xFF80, 0x0001});
    auto out = to_f32(view(WeightDType::BF16, {2, 2}, b));
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[1], 3.140625f);
    EXPECT_EQ(out[2], -std::numeric_limits<float>::infinity());
    EXPECT_EQ(out[3], std::ldexp(1.0f, -133));  // smallest bf16 subnormal
}

// Q8_0: each 34-byte block is an f16 scale d then 32 int8 q, decoded as d * q.
TEST(Convert, Q8_0Blocks) {
    std::vector<uint8_t> b;
    const uint16_t scales[2] = {0x3800, 0xC000};  // 0.5, -2
    for (int blk = 0; blk < 2; ++blk) {
        b.push_back(uint8_t(scales[blk] & 0xff));
        b.push_back(uint8_t(scales[blk] >> 8));
        for (int i = 0; i < 32; ++i) b.push_back(uint8_t(int8_t(blk == 0 ? -128 + 8 * i : i - 16)));
    }
    ASSERT_EQ(b.size(), 68u);
    auto out = to_f32(view(WeightDType::Q8_0, {2, 32}, b));
    for (int i = 0; i < 32; ++i) {
        EXPECT_EQ(out[i], 0.5f * float(-128 + 8 * i)) << i;
        EXPECT_EQ(out[32 + i], -2.0f * float(i - 16)) << i;
    }
}

// F64 narrows to the nearest float; F32 is copied from an unaligned address unchanged.
TEST(Convert, F64AndUnalignedF32) {
    std::vector<uint8_t> b(1 + 8 + 8);
    const double d[2] = {0.1, -1e300};
    std::memcpy(b.data() + 1, d, 16);
    auto out = to_f32(view(WeightDType::F64, {2}, b, 1));
    EXPECT_EQ(out[0], 0.1f);
    EXPECT_EQ(out[1], -std::numeric_limits<float>::infinity());
    std::vector<uint8_t> f(1 + 12);
    const float x[3] = {1.5f, -0.0f, 7e-45f};
    std::memcpy(f.data() + 1, x, 12);
    auto y = to_f32(view(WeightDType::F32, {3}, f, 1));
    EXPECT_EQ(std::memcmp(y.data(), x, 12), 0);
}

// Byte counts per dtype, including Q8_0's 34 bytes per 32 values and the unrepresentable cases.
TEST(Convert, DtypeByteCounts) {
    EXPECT_EQ(weight_dtype_n_bytes(WeightDType::F32, 10), 40);
    EXPECT_EQ(weight_dtype_n_bytes(WeightDType::BF16, 3), 6);
    EXPECT_EQ(weight_dtype_n_bytes(WeightDType::I64, 2), 16);
    EXPECT_EQ(weight_dtype_n_bytes(WeightDType::Q8_0, 64), 68);
    EXPECT_EQ(weight_dtype_n_bytes(WeightDType::Q8_0, 33), -1);
    EXPECT_EQ(weight_dtype_n_bytes(WeightDType::F64, std::numeric_limits<int64_t>::max() / 4), -1);
    EXPECT_STREQ(weight_dtype_name(WeightDType::Q8_0), "Q8_0");
}

// A view whose bytes do not match dtype x shape is an InputError naming file and tensor,
// thrown before anything is written.
TEST(Convert, ByteCountMismatchIsInputError) {
    auto b = u16_bytes({1, 2, 3});
    for (auto [dtype, shape] : std::vector<std::pair<WeightDType, std::vector<int64_t>>>{
             {WeightDType::F16, {2}},      // 6 bytes for 2 halves
             {WeightDType::F32, {2}},      // 6 bytes for 2 floats
             {WeightDType::Q8_0, {3}},     // not a whole block
             {WeightDType::F16, {-3}}}) {  // negative dimension
        float sentinel[4] = {9, 9, 9, 9};
        try {
            convert_to_f32(view(dtype, shape, b), sentinel);
            ADD_FAILURE() << "no error for " << weight_dtype_name(dtype);
        } catch (const InputError& e) {
            const std::string msg = e.what();
            EXPECT_EQ(msg.rfind("model.bin: ", 0), 0u) << msg;
            EXPECT_NE(msg.find("blk.0.attn_q.weight"), std::string::npos) << msg;
        }
        EXPECT_EQ(sentinel[0], 9.0f);
    }
}

// Integer tensors are not weights: converting them is UnsupportedError naming the tensor.
TEST(Convert, IntegerTensorsAreUnsupported) {
    std::vector<uint8_t> b(8, 0);
    try {
        to_f32(view(WeightDType::I32, {2}, b));
        FAIL() << "no error";
    } catch (const UnsupportedError& e) {
        EXPECT_NE(std::string(e.what()).find("not supported: I32 in 'blk.0.attn_q.weight'"),
                  std::string::npos)
            << e.what();
    }
}

// All 65536 half bit patterns decode exactly as npy's independent half_to_float does (NaNs as
// NaNs of the same sign), so the fast F16 path has no rounding or subnormal error.
TEST(Convert, HalfExhaustiveAgainstNpyDecoder) {
    std::vector<uint8_t> b;
    for (uint32_t h = 0; h < 65536; ++h) {
        b.push_back(uint8_t(h & 0xff));
        b.push_back(uint8_t(h >> 8));
    }
    auto out = to_f32(view(WeightDType::F16, {65536}, b));
    int n_bad = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
        const float want = half_to_float(uint16_t(h));
        const bool same = std::isnan(want)
                              ? std::isnan(out[h]) && std::signbit(out[h]) == std::signbit(want)
                              : std::memcmp(&want, &out[h], 4) == 0;
        if (!same && n_bad++ < 5) ADD_FAILURE() << "half 0x" << std::hex << h;
    }
    EXPECT_EQ(n_bad, 0);
}
