// GGML block dequantization (ggml_quant.hpp through convert_to_f32): hand-built blocks whose values
// are worked out from the layouts in the comments (a wrong bit position or field offset fails),
// round trips through the reference encoders of ggml_quantize.hpp with the per-value error bound
// of each format and the re-quantization identities, the type table's sizes, and row errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ggml_quantize.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/io/ggml_quant.hpp"
#include "sinkscope/io/weights.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::io;
using D = WeightDType;

namespace {

TensorView view(WeightDType t, std::vector<int64_t> shape, const std::vector<uint8_t>& bytes) {
    TensorView v;
    v.name = "blk.0.ffn_up.weight";
    v.dtype = t;
    v.shape = std::move(shape);
    v.data = bytes.data();
    v.n_bytes = bytes.size();
    v.file = "model.gguf";
    return v;
}

void set16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
    std::memcpy(b.data() + at, &v, 2);
}

// Decodes one block of `t` and compares all of it with `want`.
void expect_block(WeightDType t, const std::vector<uint8_t>& b, const std::vector<float>& want) {
    const auto got = to_f32(view(t, {int64_t(want.size())}, b));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
        EXPECT_EQ(got[i], want[i]) << weight_dtype_name(t) << " value " << i;
}

constexpr D k_quant[] = {D::Q4_0, D::Q4_1, D::Q5_0, D::Q5_1, D::Q8_0, D::Q2_K,
                         D::Q3_K, D::Q4_K, D::Q5_K, D::Q6_K, D::Q8_K, D::IQ4_NL};

}  // namespace

// ---- hand-built blocks (fp16: 0x3C00 = 1, 0x4000 = 2, 0x3800 = 0.5, 0x3400 = 0.25, 0xBC00 = -1)

// Q4_0 {d; qs[16]}: value j = low nibble of qs[j] - 8, value j + 16 = its high nibble - 8; times d.
TEST(GgmlQuant, Q4_0Block) {
    std::vector<uint8_t> b(18, 0x88);  // every nibble 8: value 0
    set16(b, 0, 0x4000);               // d = 2
    b[2 + 0] = 0x1F;                   // y[0] = (15 - 8) * 2, y[16] = (1 - 8) * 2
    b[2 + 5] = 0x80;                   // y[5] = (0 - 8) * 2, y[21] = 0
    std::vector<float> want(32, 0.0f);
    want[0] = 14, want[16] = -14, want[5] = -16;
    expect_block(D::Q4_0, b, want);
}

// Q4_1 {d; m; qs[16]}: nibble * d + m.
TEST(GgmlQuant, Q4_1Block) {
    std::vector<uint8_t> b(20, 0);
    set16(b, 0, 0x3800);  // d = 0.5
    set16(b, 2, 0xBC00);  // m = -1
    b[4 + 3] = 0xF2;      // y[3] = 2 * 0.5 - 1 = 0, y[19] = 15 * 0.5 - 1 = 6.5
    std::vector<float> want(32, -1.0f);
    want[3] = 0, want[19] = 6.5f;
    expect_block(D::Q4_1, b, want);
}

// Q5_0 {d; qh (u32, bit j = bit 4 of value j); qs[16]}: (nibble | bit << 4) - 16, times d.
TEST(GgmlQuant, Q5_0Block) {
    std::vector<uint8_t> b(22, 0);
    set16(b, 0, 0x3C00);
    const uint32_t qh = (1u << 2) | (1u << 20);
    std::memcpy(b.data() + 2, &qh, 4);
    b[6 + 2] = 0x31;  // y[2] = (1 | 16) - 16 = 1, y[18] = 3 - 16 = -13
    b[6 + 4] = 0xFF;  // y[4] = 15 - 16 = -1, y[20] = (15 | 16) - 16 = 15
    std::vector<float> want(32, -16.0f);
    want[2] = 1, want[18] = -13, want[4] = -1, want[20] = 15;
    expect_block(D::Q5_0, b, want);
}

// Q5_1 {d; m; qh; qs[16]}: (nibble | bit << 4) * d + m.
TEST(GgmlQuant, Q5_1Block) {
    std::vector<uint8_t> b(24, 0);
    set16(b, 0, 0x3400);  // d = 0.25
    set16(b, 2, 0x3C00);  // m = 1
    const uint32_t qh = 1u | (1u << 31);
    std::memcpy(b.data() + 4, &qh, 4);
    b[8 + 0] = 0x0A;   // y[0] = (10 | 16) * 0.25 + 1 = 7.5, y[16] = 1
    b[8 + 15] = 0x50;  // y[15] = 1, y[31] = (5 | 16) * 0.25 + 1 = 6.25
    std::vector<float> want(32, 1.0f);
    want[0] = 7.5f, want[31] = 6.25f;
    expect_block(D::Q5_1, b, want);
}

// IQ4_NL {d; qs[16]}: nibbles as Q4_0, each an index into {-127, -104, ..., 89, 113}; times d.
TEST(GgmlQuant, Iq4NlBlock) {
    std::vector<uint8_t> b(18, 0x88);  // index 8: value 1
    set16(b, 0, 0x3800);               // d = 0.5
    b[2 + 0] = 0x0F;                   // y[0] = 0.5 * 113, y[16] = 0.5 * -127
    b[2 + 7] = 0x37;                   // y[7] = 0.5 * -10, y[23] = 0.5 * -65
    std::vector<float> want(32, 0.5f);
    want[0] = 56.5f, want[16] = -63.5f, want[7] = -5, want[23] = -32.5f;
    expect_block(D::IQ4_NL, b, want);
}

// Q8_K {float d; int8 qs[256]; int16 bsums[16]}: d * q (bsums ignored).
TEST(GgmlQuant, Q8_KBlock) {
    std::vector<uint8_t> b(292, 1);
    const float d = 0.25f;
    std::memcpy(b.data(), &d, 4);
    b[4 + 0] = 0x80;    // -128
    b[4 + 255] = 0x7F;  // 127
    std::vector<float> want(256, 0.25f);
    want[0] = -32, want[255] = 31.75f;
    expect_block(D::Q8_K, b, want);
}

// Q2_K {scales[16] (scale | min << 4); qs[64]; d; dmin}: value 128h + 32k + 16t + l is bits 2k of
// qs[32h + 16t + l], sub-block 8h + 2k + t: (d * scale) * q - dmin * min.
TEST(GgmlQuant, Q2_KBlock) {
    std::vector<uint8_t> b(84, 0);  // scales 0: every value 0 unless set
    set16(b, 80, 0x3C00);           // d = 1
    set16(b, 82, 0x3800);           // dmin = 0.5
    b[0] = 0x21;                    // sub-block 0: scale 1, min 2 -> 1 * q - 1
    b[6] = 0x42;                    // sub-block 6 (h 0, k 3, t 0): 2 * q - 2
    b[11] = 0x15;                   // sub-block 11 (h 1, k 1, t 1): 5 * q - 0.5
    b[16 + 0] = 0xE5;   // q = 1, 1, 2, 3 at shifts 0, 2, 4, 6: y[0], y[32], y[64], y[96]
    b[16 + 53] = 0x04;  // qs[32 + 16 + 5], shift 2 = 1: y[128 + 32 + 16 + 5]
    std::vector<float> want(256, 0.0f);
    for (int l = 0; l < 16; ++l) want[l] = -1, want[96 + l] = -2, want[176 + l] = -0.5f;
    want[0] = 0, want[96] = 4, want[181] = 4.5f;
    expect_block(D::Q2_K, b, want);
}

// Q3_K {hmask[32]; qs[64]; scales[12]; d}: value 128h + 32k + 16t + l has 2 low bits at bits 2k
// of qs[32h + 16t + l] and subtracts 4 unless bit 4h + k of hmask[16t + l] is set; 6-bit scale of
// sub-block j (8h + 2k + t) minus 32: low nibble of byte j (j < 8) or high nibble of byte j - 8,
// top 2 bits at bits 2(j / 4) of byte 8 + j % 4.
TEST(GgmlQuant, Q3_KBlock) {
    std::vector<uint8_t> b(110, 0);
    uint8_t* s = b.data() + 96;
    for (int i = 8; i < 12; ++i) s[i] = 0xAA;  // top bits 2 everywhere: scale 32 - 32 = 0
    s[0] = 0x02;                               // sub-block 0: 34 - 32 = 2
    s[5] = 0xD0;                               // sub-block 13: low 13 ...
    s[9] = 0x6A;                               // ... top bits (bits 6-7 of byte 9) 1: 29 - 32 = -3
    set16(b, 108, 0x3800);                     // d = 0.5
    b[32 + 0] = 0x03, b[0] = 0x01;             // y[0]: q = 3, high bit set: 3 * (0.5 * 2)
    b[32 + 1] = 0x02;                          // y[1]: 2 - 4 = -2
    b[32 + 51] = 0x10, b[19] = 0x40;  // y[128 + 64 + 16 + 3]: qs[48 + 3] bits 4-5 = 1, hmask bit 6
    std::vector<float> want(256, 0.0f);
    for (int l = 0; l < 16; ++l) want[l] = -4, want[208 + l] = 6;  // q = -4 by default
    want[0] = 3, want[1] = -2, want[211] = -1.5f;
    expect_block(D::Q3_K, b, want);
}

// Q4_K {d; dmin; scales[12]; qs[128]}: value 64g + 32t + l is nibble t of qs[32g + l], sub-block
// j = 2g + t: (d * sc_j) * q - dmin * m_j. For j < 4: sc = byte j & 63, m = byte j + 4 & 63; for
// j >= 4: low 4 bits from byte j + 4 (sc low nibble, m high), top 2 bits from bits 6-7 of byte
// j - 4 (sc) and byte j (m).
TEST(GgmlQuant, Q4_KBlock) {
    std::vector<uint8_t> b(144, 0);
    set16(b, 0, 0x3C00);  // d = 1
    set16(b, 2, 0x3400);  // dmin = 0.25
    uint8_t* s = b.data() + 4;
    s[1] = 3, s[5] = 4;         // sub-block 1: 3 * q - 1
    s[10] = 0x25, s[2] = 0x80;  // sub-block 6: sc = 5 | 2 << 4 = 37
    s[6] = 0x40;                //              m = 2 | 1 << 4 = 18: 37 * q - 4.5
    b[16 + 7] = 0xA0;           // y[32 + 7] = 3 * 10 - 1
    b[16 + 96 + 2] = 0x0F;      // y[192 + 2] = 37 * 15 - 4.5
    std::vector<float> want(256, 0.0f);
    for (int l = 0; l < 32; ++l) want[32 + l] = -1, want[192 + l] = -4.5f;
    want[39] = 29, want[194] = 550.5f;
    expect_block(D::Q4_K, b, want);
}

// Q5_K {d; dmin; scales[12]; qh[32]; qs[128]}: Q4_K plus 16 where bit 2g + t of qh[l] is set.
TEST(GgmlQuant, Q5_KBlock) {
    std::vector<uint8_t> b(176, 0);
    set16(b, 0, 0x3C00);
    set16(b, 2, 0x3400);
    uint8_t* s = b.data() + 4;
    s[1] = 3, s[5] = 4, s[10] = 0x25, s[2] = 0x80, s[6] = 0x40;  // as in Q4_KBlock
    uint8_t* qh = b.data() + 16;
    uint8_t* qs = b.data() + 48;
    qs[7] = 0xA0, qh[7] = 0x02;       // y[39]: 10 + 16 = 26 -> 3 * 26 - 1
    qh[8] = 0x02;                     // y[40]: 16 -> 47
    qs[96 + 2] = 0x0F, qh[2] = 0x40;  // y[194]: 15 + 16 = 31 -> 37 * 31 - 4.5
    std::vector<float> want(256, 0.0f);
    for (int l = 0; l < 32; ++l) want[32 + l] = -1, want[192 + l] = -4.5f;
    want[39] = 77, want[40] = 47, want[194] = 1142.5f;
    expect_block(D::Q5_K, b, want);
}

// Q6_K {ql[128]; qh[64]; int8 scales[16]; d}: value 128h + 32r + l is nibble r / 2 of
// ql[64h + 32(r % 2) + l] with bits 2r of qh[32h + l] on top, minus 32; sub-block 8h + l/16 + 2r:
// (d * scale) * q.
TEST(GgmlQuant, Q6_KBlock) {
    std::vector<uint8_t> b(210, 0);
    set16(b, 208, 0x3800);              // d = 0.5
    b[192 + 0] = 3;                     // sub-block 0: 1.5 * q
    b[192 + 15] = 0xFE;                 // sub-block 15 (h 1, l >= 16, r 3): -1 * q
    b[1] = 0x05, b[128 + 1] = 0x03;     // y[1]: 5 | 3 << 4 = 53 - 32 = 21 -> 31.5
    b[116] = 0x70, b[128 + 52] = 0x80;  // y[128 + 96 + 20]: 7 | 2 << 4 = 39 - 32 = 7 -> -7
    std::vector<float> want(256, 0.0f);
    for (int l = 0; l < 16; ++l) want[l] = -48, want[240 + l] = 32;  // q = -32 by default
    want[1] = 31.5f, want[244] = -7;
    expect_block(D::Q6_K, b, want);
}

// ---- the type table

// Block sizes from the ggml-common.h structs (sum of the field sizes), the quant <-> GGML id
// mapping, and ids ggml never defined or removed.
TEST(GgmlQuant, TypeTable) {
    struct Row {
        D t;
        uint32_t id;
        int64_t block, bytes;
    };
    const Row rows[] = {
        {D::Q4_0, 2, 32, 2 + 16},
        {D::Q4_1, 3, 32, 2 + 2 + 16},
        {D::Q5_0, 6, 32, 2 + 4 + 16},
        {D::Q5_1, 7, 32, 2 + 2 + 4 + 16},
        {D::Q8_0, 8, 32, 2 + 32},
        {D::Q2_K, 10, 256, 16 + 64 + 2 + 2},
        {D::Q3_K, 11, 256, 32 + 64 + 12 + 2},
        {D::Q4_K, 12, 256, 2 + 2 + 12 + 128},
        {D::Q5_K, 13, 256, 2 + 2 + 12 + 32 + 128},
        {D::Q6_K, 14, 256, 128 + 64 + 16 + 2},
        {D::Q8_K, 15, 256, 4 + 256 + 32},
        {D::IQ4_NL, 20, 32, 2 + 16},
    };
    for (const Row& r : rows) {
        const GgmlTypeInfo* q = ggml_quant_info(r.t);
        ASSERT_NE(q, nullptr) << weight_dtype_name(r.t);
        EXPECT_EQ(q->id, r.id);
        EXPECT_EQ(q->block, r.block);
        EXPECT_EQ(q->block_bytes, r.bytes);
        EXPECT_EQ(ggml_type_info(r.id), q);
        EXPECT_EQ(weight_dtype_n_bytes(r.t, 3 * r.block), 3 * r.bytes);
        EXPECT_EQ(weight_dtype_n_bytes(r.t, 3 * r.block + 1), -1);
    }
    EXPECT_EQ(ggml_quant_info(D::F16), nullptr);
    for (uint32_t gone : {4u, 5u, 31u, 99u}) EXPECT_EQ(ggml_type_info(gone), nullptr) << gone;
    ASSERT_NE(ggml_type_info(16), nullptr);
    EXPECT_STREQ(ggml_type_info(16)->name, "IQ2_XXS");
    EXPECT_FALSE(ggml_type_info(16)->dtype.has_value());  // listed, not read
}

// A quantized tensor whose rows are not whole blocks is refused even when its total size is whole
// blocks (ggml quantizes row by row): [2, 128] Q4_K is 256 values = one super-block.
TEST(GgmlQuant, RowOfPartialBlocksIsInputError) {
    std::vector<uint8_t> b(144, 0);
    float out[256] = {};
    try {
        convert_to_f32(view(D::Q4_K, {2, 128}, b), out);
        FAIL() << "no error";
    } catch (const InputError& e) {
        const std::string msg = e.what();
        EXPECT_EQ(msg.rfind("model.gguf: tensor blk.0.ffn_up.weight: row of 128", 0), 0u) << msg;
        EXPECT_NE(msg.find("Q4_K blocks (256)"), std::string::npos) << msg;
    }
    EXPECT_EQ(to_f32(view(D::Q4_K, {1, 256}, b)).size(), 256u);
}

// ---- round trips through the reference encoders

class GgmlQuantRoundTrip : public ::testing::TestWithParam<D> {};

// Seeded data with varied magnitudes (per row and per 16 values, so sub-block scales differ) and
// one all-zero block: every dequantized value is within the encoder's per-value bound (half a step
// plus the decoder's float rounding, ggml_quantize.hpp); re-encoding the dequantized values with
// the same block parameters reproduces the bytes; from scratch too for Q4_0/Q5_0/Q8_0/Q4_1/Q5_1.
TEST_P(GgmlQuantRoundTrip, BoundAndRequantization) {
    const D t = GetParam();
    const int64_t rows = 8, cols = 512;
    std::mt19937 rng(1234);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> mag(0.05f, 1.0f);
    std::vector<float> x(size_t(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
        const float row_scale = std::ldexp(1.0f, int(r) - 4);  // 2^-4 .. 2^3
        for (int64_t c = 0; c < cols; c += 16) {
            const float s = row_scale * mag(rng);
            for (int64_t l = 0; l < 16; ++l) x[size_t(r * cols + c + l)] = s * normal(rng);
        }
    }
    std::fill(x.begin(), x.begin() + 256, 0.0f);  // a zero (super-)block: d = 0
    const testutil::Quantized q = testutil::quantize(t, x);
    ASSERT_EQ(int64_t(q.bytes.size()), weight_dtype_n_bytes(t, rows * cols));
    const std::vector<float> y = to_f32(view(t, {rows, cols}, q.bytes));
    int n_bad = 0;
    double worst = 0;  // largest error / bound
    for (size_t i = 0; i < x.size(); ++i) {
        const double err = std::abs(double(x[i]) - double(y[i]));
        worst = std::max(worst, err / std::max(q.bound[i], 1e-300));
        if (!(err <= q.bound[i]) && n_bad++ < 5)
            ADD_FAILURE() << "value " << i << ": x " << x[i] << " dequantized " << y[i] << " error "
                          << err << " > bound " << q.bound[i];
    }
    EXPECT_EQ(n_bad, 0);
    // The bound is reached to within a factor: the steps are really that coarse (a decoder that
    // returned x itself would pass the bound; this does not make it vacuous, the identities do).
    EXPECT_GT(worst, 0.5) << "errors far below the bound: bound or data wrong";

    const testutil::Quantized same = testutil::quantize(t, y, &q.params);
    EXPECT_TRUE(same.bytes == q.bytes) << "re-encoding with the same parameters changed the bytes";
    if (t == D::Q4_0 || t == D::Q5_0 || t == D::Q8_0 || t == D::Q4_1 || t == D::Q5_1) {
        const testutil::Quantized fresh = testutil::quantize(t, y);
        EXPECT_TRUE(fresh.bytes == q.bytes) << "re-encoding from scratch changed the bytes";
    }
}

INSTANTIATE_TEST_SUITE_P(Types, GgmlQuantRoundTrip, ::testing::ValuesIn(k_quant),
                         [](const auto& info) {
                             return std::string(weight_dtype_name(info.param));
                         });
