// GGML block formats: the type table and the dequantizers (ggml-common.h block_* layouts,
// ggml-quants.c dequantize_row_* semantics). Every multi-byte field is little-endian and read
// with memcpy (blocks in a mapping are unaligned). Each formula keeps ggml's operation order
// (e.g. Q4_K: d1 = d * sc, then d1 * q - m1; Q6_K: (d * sc) * q); this file is compiled with
// -ffp-contract=off (CMakeLists.txt) so `a * b - c` is never fused into an FMA, which would
// change the last bit against ggml's reference and gguf-py on CPUs whose compilers contract.
#include "sinkscope/io/ggml_quant.hpp"

#include <cstring>

namespace sinkscope::io {

namespace {

constexpr int64_t QK_K = 256;  // K-quant super-block

uint16_t u16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}
float half_at(const uint8_t* p) {
    return f16_to_f32(u16(p));
}

// block_q4_0 { half d; uint8 qs[16]; } (18 bytes): value j < 16 is the low nibble of qs[j],
// value j + 16 the high nibble; x = (nibble - 8) * d.
void dequant_q4_0(const uint8_t* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i, b += 18, y += 32) {
        const float d = half_at(b);
        const uint8_t* qs = b + 2;
        for (int j = 0; j < 16; ++j) {
            y[j] = float((qs[j] & 0x0F) - 8) * d;
            y[j + 16] = float((qs[j] >> 4) - 8) * d;
        }
    }
}

// block_q4_1 { half d; half m; uint8 qs[16]; } (20 bytes): x = nibble * d + m.
void dequant_q4_1(const uint8_t* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i, b += 20, y += 32) {
        const float d = half_at(b);
        const float m = half_at(b + 2);
        const uint8_t* qs = b + 4;
        for (int j = 0; j < 16; ++j) {
            y[j] = float(qs[j] & 0x0F) * d + m;
            y[j + 16] = float(qs[j] >> 4) * d + m;
        }
    }
}

// block_q5_0 { half d; uint8 qh[4]; uint8 qs[16]; } (22 bytes): qh is a little-endian uint32
// whose bit j is the fifth bit of value j; x = (nibble | bit << 4) - 16) * d.
void dequant_q5_0(const uint8_t* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i, b += 22, y += 32) {
        const float d = half_at(b);
        uint32_t qh;
        std::memcpy(&qh, b + 2, 4);
        const uint8_t* qs = b + 6;
        for (int j = 0; j < 16; ++j) {
            const int h0 = int((qh >> j) & 1u) << 4;
            const int h1 = int((qh >> (j + 16)) & 1u) << 4;
            y[j] = float(((qs[j] & 0x0F) | h0) - 16) * d;
            y[j + 16] = float(((qs[j] >> 4) | h1) - 16) * d;
        }
    }
}

// block_q5_1 { half d; half m; uint8 qh[4]; uint8 qs[16]; } (24 bytes): x = q5 * d + m.
void dequant_q5_1(const uint8_t* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i, b += 24, y += 32) {
        const float d = half_at(b);
        const float m = half_at(b + 2);
        uint32_t qh;
        std::memcpy(&qh, b + 4, 4);
        const uint8_t* qs = b + 8;
        for (int j = 0; j < 16; ++j) {
            const int h0 = int((qh >> j) & 1u) << 4;
            const int h1 = int((qh >> (j + 16)) & 1u) << 4;
            y[j] = float((qs[j] & 0x0F) | h0) * d + m;
            y[j + 16] = float((qs[j] >> 4) | h1) * d + m;
        }
    }
}

// block_q8_0 { half d; int8 qs[32]; } (34 bytes): x = q * d.
void dequant_q8_0(const uint8_t* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i, b += 34, y += 32) {
        const float d = half_at(b);
        for (int j = 0; j < 32; ++j) y[j] = float(int8_t(b[2 + j])) * d;
    }
}

// block_q2_K { uint8 scales[16]; uint8 qs[64]; half d; half dmin; } (84 bytes). Sixteen
// sub-blocks of 16 values; scales[k] holds the 4-bit scale (low nibble) and 4-bit min (high) of
// sub-block k. Each half of 128 values reads 32 qs bytes four times, 2 bits at shift 0, 2, 4, 6;
// bytes 0-15 feed one sub-block, 16-31 the next: x = (d * sc) * q - dmin * m.
void dequant_q2_k(const uint8_t* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i, b += 84) {
        const uint8_t* scales = b;
        const uint8_t* q = b + 16;
        const float d = half_at(b + 80);
        const float dmin = half_at(b + 82);
        int is = 0;
        for (int half = 0; half < 2; ++half, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; ++part) {
                    const uint8_t sc = scales[is++];
                    const float dl = d * float(sc & 0x0F);
                    const float ml = dmin * float(sc >> 4);
                    for (int l = 0; l < 16; ++l)
                        *y++ = dl * float((q[16 * part + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

// block_q3_K { uint8 hmask[32]; uint8 qs[64]; uint8 scales[12]; half d; } (110 bytes). Values
// are 2 low bits from qs (same walk as Q2_K) minus 4 where the hmask bit is clear (bit `m`,
// advancing once per shift, of hmask[l] / hmask[l + 16]). Sixteen 6-bit scales, stored minus
// 32: low 4 bits are the low nibbles of bytes 0-7 (scales 0-7) then their high nibbles (8-15);
// the top 2 bits of scale k are bits 2*(k/4) of byte 8 + k%4. x = (d * (sc - 32)) * q.
void dequant_q3_k(const uint8_t* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i, b += 110) {
        const uint8_t* hm = b;
        const uint8_t* q = b + 32;
        const uint8_t* s = b + 96;
        const float d_all = half_at(b + 108);
        int8_t scales[16];
        for (int k = 0; k < 16; ++k) {
            const int low = k < 8 ? (s[k] & 0x0F) : (s[k - 8] >> 4);
            const int high = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
            scales[k] = int8_t((low | high << 4) - 32);
        }
        int is = 0;
        uint8_t m = 1;
        for (int half = 0; half < 2; ++half, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int part = 0; part < 2; ++part) {
                    const float dl = d_all * float(scales[is++]);
                    for (int l = 16 * part; l < 16 * part + 16; ++l) {
                        const int v = int((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4);
                        *y++ = dl * float(v);
                    }
                }
            }
        }
    }
}

// K_SCALE_SIZE = 12 bytes packing eight 6-bit scales and eight 6-bit mins (ggml
// get_scale_min_k4): for j < 4, scale = q[j] & 63 and min = q[j + 4] & 63; for j >= 4 the low 4
// bits come from q[j + 4] (scale: low nibble, min: high nibble) and the top 2 bits from bits 6-7
// of q[j - 4] (scale) and q[j] (min).
void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// block_q4_K { half d; half dmin; uint8 scales[12]; uint8 qs[128]; } (144 bytes). Eight
// sub-blocks of 32; each 64 values read 32 qs bytes, low nibbles (sub-block 2k) then high
// nibbles (2k + 1): x = (d * sc) * q - (dmin * m).
void dequant_q4_k(const uint8_t* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i, b += 144) {
        const float d = half_at(b);
        const float dmin = half_at(b + 2);
        const uint8_t* scales = b + 4;
        const uint8_t* q = b + 16;
        for (int is = 0; is < 8; is += 2, q += 32) {
            int sc, m;
            scale_min_k4(is, scales, sc, m);
            const float d1 = d * float(sc), m1 = dmin * float(m);
            scale_min_k4(is + 1, scales, sc, m);
            const float d2 = d * float(sc), m2 = dmin * float(m);
            for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0x0F) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
        }
    }
}

// block_q5_K { half d; half dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]; } (176 bytes):
// Q4_K plus a fifth bit (+16) from qh[l], bit 2k for sub-block 2k and bit 2k + 1 for 2k + 1.
void dequant_q5_k(const uint8_t* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i, b += 176) {
        const float d = half_at(b);
        const float dmin = half_at(b + 2);
        const uint8_t* scales = b + 4;
        const uint8_t* qh = b + 16;
        const uint8_t* ql = b + 48;
        uint8_t u1 = 1, u2 = 2;
        for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
            int sc, m;
            scale_min_k4(is, scales, sc, m);
            const float d1 = d * float(sc), m1 = dmin * float(m);
            scale_min_k4(is + 1, scales, sc, m);
            const float d2 = d * float(sc), m2 = dmin * float(m);
            for (int l = 0; l < 32; ++l)
                *y++ = d1 * float((ql[l] & 0x0F) + ((qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l)
                *y++ = d2 * float((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
        }
    }
}

// block_q6_K { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; half d; } (210 bytes). Per half of
// 128 values (64 ql, 32 qh, 8 scales): value l + 32 r (r = 0..3) takes the low (r even) or high
// (r odd) nibble of ql[l + 32 (r % 2)] and bits 2r..2r+1 of qh[l]; minus 32. Sub-blocks of 16:
// x = (d * scales[l / 16 + 2 r]) * q.
void dequant_q6_k(const uint8_t* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i, b += 210) {
        const uint8_t* ql = b;
        const uint8_t* qh = b + 128;
        const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
        const float d = half_at(b + 208);
        for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = int((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) - 32;
                const int q2 = int((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * float(sc[is]) * float(q1);
                y[l + 32] = d * float(sc[is + 2]) * float(q2);
                y[l + 64] = d * float(sc[is + 4]) * float(q3);
                y[l + 96] = d * float(sc[is + 6]) * float(q4);
            }
        }
    }
}

// block_q8_K { float d; int8 qs[256]; int16 bsums[16]; } (292 bytes): x = d * q (bsums are
// partial sums for dot products, not needed to decode).
void dequant_q8_k(const uint8_t* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i, b += 292, y += QK_K) {
        float d;
        std::memcpy(&d, b, 4);
        for (int j = 0; j < QK_K; ++j) y[j] = d * float(int8_t(b[4 + j]));
    }
}

// block_iq4_nl { half d; uint8 qs[16]; } (18 bytes): nibbles as Q4_0 index the non-linear code
// book: x = d * k_iq4nl_values[nibble].
void dequant_iq4_nl(const uint8_t* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i, b += 18, y += 32) {
        const float d = half_at(b);
        const uint8_t* qs = b + 2;
        for (int j = 0; j < 16; ++j) {
            y[j] = d * float(k_iq4nl_values[qs[j] & 0x0F]);
            y[j + 16] = d * float(k_iq4nl_values[qs[j] >> 4]);
        }
    }
}

using D = WeightDType;
// ggml.h enum ggml_type with the block sizes of ggml's type traits (ggml.c type_traits,
// gguf-py GGML_QUANT_SIZES). Ids 4, 5 (Q4_2, Q4_3), 31-33 and 36-38 (repacked Q4_0/IQ4_NL
// variants) were removed from ggml and are not valid in a file.
constexpr GgmlTypeInfo k_types[] = {
    {0, "F32", 1, 4, D::F32, nullptr},
    {1, "F16", 1, 2, D::F16, nullptr},
    {2, "Q4_0", 32, 18, D::Q4_0, dequant_q4_0},
    {3, "Q4_1", 32, 20, D::Q4_1, dequant_q4_1},
    {6, "Q5_0", 32, 22, D::Q5_0, dequant_q5_0},
    {7, "Q5_1", 32, 24, D::Q5_1, dequant_q5_1},
    {8, "Q8_0", 32, 34, D::Q8_0, dequant_q8_0},
    {9, "Q8_1", 32, 36, std::nullopt, nullptr},
    {10, "Q2_K", QK_K, 84, D::Q2_K, dequant_q2_k},
    {11, "Q3_K", QK_K, 110, D::Q3_K, dequant_q3_k},
    {12, "Q4_K", QK_K, 144, D::Q4_K, dequant_q4_k},
    {13, "Q5_K", QK_K, 176, D::Q5_K, dequant_q5_k},
    {14, "Q6_K", QK_K, 210, D::Q6_K, dequant_q6_k},
    {15, "Q8_K", QK_K, 292, D::Q8_K, dequant_q8_k},
    {16, "IQ2_XXS", QK_K, 66, std::nullopt, nullptr},
    {17, "IQ2_XS", QK_K, 74, std::nullopt, nullptr},
    {18, "IQ3_XXS", QK_K, 98, std::nullopt, nullptr},
    {19, "IQ1_S", QK_K, 50, std::nullopt, nullptr},
    {20, "IQ4_NL", 32, 18, D::IQ4_NL, dequant_iq4_nl},
    {21, "IQ3_S", QK_K, 110, std::nullopt, nullptr},
    {22, "IQ2_S", QK_K, 82, std::nullopt, nullptr},
    {23, "IQ4_XS", QK_K, 136, std::nullopt, nullptr},
    {24, "I8", 1, 1, std::nullopt, nullptr},
    {25, "I16", 1, 2, std::nullopt, nullptr},
    {26, "I32", 1, 4, D::I32, nullptr},
    {27, "I64", 1, 8, D::I64, nullptr},
    {28, "F64", 1, 8, D::F64, nullptr},
    {29, "IQ1_M", QK_K, 56, std::nullopt, nullptr},
    {30, "BF16", 1, 2, D::BF16, nullptr},
    {34, "TQ1_0", QK_K, 54, std::nullopt, nullptr},
    {35, "TQ2_0", QK_K, 66, std::nullopt, nullptr},
};

}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
    for (const GgmlTypeInfo& t : k_types)
        if (t.id == id) return &t;
    return nullptr;
}

const GgmlTypeInfo* ggml_quant_info(WeightDType dtype) {
    for (const GgmlTypeInfo& t : k_types)
        if (t.dtype == dtype && t.dequantize) return &t;
    return nullptr;
}

}  // namespace sinkscope::io
