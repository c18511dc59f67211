// Reference encoders for the GGML block formats sinkscope dequantizes (tests and benchmarks): a
// valid encoder per type written from the block layouts (ggml-common.h), not ggml's search
// heuristics. Scales are chosen by rounding *up* to fp16 (never clipping a value) and every quant
// is round-to-nearest in double, so each value's error is at most half its quantization step
// (for IQ4_NL: the largest distance to the nearest code-book entry, 14 steps) plus the float
// rounding of the decoder. Torch-free.
//
// Re-quantization identities (tests/io/test_ggml_quant.cpp):
// * with the same block parameters (quantize(x^, &first.params)), re-encoding the dequantized
//   values x^ gives the same bytes for every type: x^ lies on the grid to within float rounding,
//   far below half a step, so every quant rounds back to itself;
// * from scratch (quantize(x^)) for Q4_0, Q5_0, Q8_0, Q4_1, Q5_1: the scale is fp16_ceil(range /
//   qmax), the extreme value lands on q = qmax (range / d >= qmax / (1 + 2^-10) > qmax - 1/2), so
//   the range of x^ is exactly d * qmax and the same d (and m = the minimum) comes back; exact as
//   long as d * qmax + m is exact in float32 (true for data of similar magnitudes). The K-quants'
//   sub-block scales are ceil(s_j / d), which need not reproduce for small s_j, Q8_K's float32 d
//   times 127 rounds, and IQ4_NL's code book is asymmetric (+127 decodes to 113): no identity.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "sinkscope/io/ggml_quant.hpp"
#include "sinkscope/io/npy.hpp"  // half_to_float: an fp16 decoder independent of ggml_quant

namespace sinkscope::testutil {

// Smallest fp16 >= x (x >= 0, below 65504), as bits: positive halves are ordered like their bits.
inline uint16_t f16_ceil(double x) {
    uint16_t lo = 0, hi = 0x7bff;
    while (lo < hi) {
        const uint16_t mid = uint16_t((lo + hi) / 2);
        if (double(io::half_to_float(mid)) >= x)
            hi = mid;
        else
            lo = uint16_t(mid + 1);
    }
    return lo;
}
// Largest fp16 <= x (|x| below 65504).
inline uint16_t f16_floor(double x) {
    if (x >= 0) {
        const uint16_t h = f16_ceil(x);
        return double(io::half_to_float(h)) > x ? uint16_t(h - 1) : h;
    }
    return uint16_t(0x8000 | f16_ceil(-x));  // -ceil(|x|) <= x
}
inline double f16d(uint16_t h) {
    return double(io::half_to_float(h));
}

// Parameters of one block (one super-block for the K-quants).
struct BlockParams {
    uint16_t d = 0, dmin = 0;       // fp16 scale (min scale for Q2_K/Q4_K/Q5_K, or m for Q4_1/Q5_1)
    float d32 = 0;                  // Q8_K's float32 scale
    std::array<int, 16> sc{}, m{};  // sub-block scales and mins (K-quants)
};

struct Quantized {
    std::vector<uint8_t> bytes;
    std::vector<BlockParams> params;  // per block
    std::vector<double> bound;        // per value: max |x - dequantized x| the format allows
};

namespace ggml_detail {

inline constexpr double k_u = 1.0 / (1 << 24);  // float32 unit roundoff

inline void put16(uint8_t* p, uint16_t v) {
    std::memcpy(p, &v, 2);
}
inline int round_clamp(double v, int lo, int hi) {
    return std::clamp(int(std::lround(v)), lo, hi);
}
// Per-value bound: half the step D (times `steps` for a non-uniform code book) plus two float
// roundings in the decoder (product, then the min term), each at most 2^-24 of a magnitude no
// larger than D * qmax + |offset|.
inline double bound(double D, int qmax, double offset, double steps = 0.5) {
    return steps * D + 2 * k_u * (D * qmax + std::abs(offset));
}

struct Geometry {
    int block, bytes;
};

// Symmetric one-scale blocks: x = d * q, q in [-qmax, qmax] (Q4_0, Q5_0, Q8_0), stored as q + bias.
inline void symmetric(const float* x, int n, int qmax, const BlockParams* fixed, BlockParams& p,
                      std::vector<int>& q, double* b) {
    double amax = 0;
    for (int i = 0; i < n; ++i) amax = std::max(amax, std::abs(double(x[i])));
    p.d = fixed ? fixed->d : f16_ceil(amax / qmax);
    const double d = f16d(p.d);
    for (int i = 0; i < n; ++i) {
        q[i] = d > 0 ? round_clamp(x[i] / d, -qmax, qmax) : 0;
        b[i] = bound(d, qmax, 0);
    }
}

// Affine one-scale blocks: x = d * q + m, q in [0, qmax] (Q4_1, Q5_1); m = fp16_floor(min).
inline void affine(const float* x, int n, int qmax, const BlockParams* fixed, BlockParams& p,
                   std::vector<int>& q, double* b) {
    double lo = x[0], hi = x[0];
    for (int i = 0; i < n; ++i) lo = std::min(lo, double(x[i])), hi = std::max(hi, double(x[i]));
    p.dmin = fixed ? fixed->dmin : f16_floor(lo);
    const double m = f16d(p.dmin);
    p.d = fixed ? fixed->d : f16_ceil((hi - m) / qmax);
    const double d = f16d(p.d);
    for (int i = 0; i < n; ++i) {
        q[i] = d > 0 ? round_clamp((x[i] - m) / d, 0, qmax) : 0;
        b[i] = bound(d, qmax, m);
    }
}

// K-quant super-block of `n_sub` sub-blocks of `sub` values: x = (d * sc_j) * q - dmin * m_j with
// q in [0, qmax] when `with_min`, else x = (d * sc_j) * q with q in [-qmax, qmax]; sc_j, m_j in
// [0, smax]. Scales round up (sc_j = ceil(s_j / d) with d = fp16_ceil(max s / smax)), so
// (x + M_j) / D_j stays within [0, qmax] (resp. [-qmax, qmax]) and q never clips.
inline void k_block(const float* x, int n_sub, int sub, int qmax, int smax, bool with_min,
                    const BlockParams* fixed, BlockParams& p, std::vector<int>& q, double* b) {
    std::array<double, 16> s{}, M{};
    if (fixed) {
        p = *fixed;
    } else {
        double max_M = 0;
        for (int j = 0; j < n_sub; ++j) {
            double lo = 0, amax = 0;
            for (int l = 0; l < sub; ++l) {
                lo = std::min(lo, double(x[j * sub + l]));
                amax = std::max(amax, std::abs(double(x[j * sub + l])));
            }
            M[j] = with_min ? -lo : 0;
            s[j] = amax;  // finished below, once M'_j is known
            max_M = std::max(max_M, M[j]);
        }
        if (with_min) {
            p.dmin = f16_ceil(max_M / smax);
            const double dmin = f16d(p.dmin);
            for (int j = 0; j < n_sub; ++j)
                p.m[j] = dmin > 0 ? std::min(smax, int(std::ceil(M[j] / dmin))) : 0;
        }
        double max_s = 0;
        for (int j = 0; j < n_sub; ++j) {
            if (with_min) {
                double hi = 0;
                for (int l = 0; l < sub; ++l) hi = std::max(hi, double(x[j * sub + l]));
                s[j] = (hi + f16d(p.dmin) * p.m[j]) / qmax;
            } else {
                s[j] /= qmax;
            }
            max_s = std::max(max_s, s[j]);
        }
        p.d = f16_ceil(max_s / smax);
        const double d = f16d(p.d);
        for (int j = 0; j < n_sub; ++j)
            p.sc[j] = d > 0 ? std::min(smax, int(std::ceil(s[j] / d))) : 0;
    }
    const double d = f16d(p.d), dmin = f16d(p.dmin);
    for (int j = 0; j < n_sub; ++j) {
        const double D = d * p.sc[j], Mj = with_min ? dmin * p.m[j] : 0;
        for (int l = 0; l < sub; ++l) {
            const int i = j * sub + l;
            q[i] = D > 0 ? round_clamp((x[i] + Mj) / D, with_min ? 0 : -qmax, qmax) : 0;
            b[i] = bound(D, qmax, Mj);
        }
    }
}

}  // namespace ggml_detail

// Quantizes `x` (a multiple of the type's block) into GGML type `type` (Q4_0 ... IQ4_NL).
// With `fixed`, the per-block parameters are taken from it instead of being chosen from x.
inline Quantized quantize(io::WeightDType type, const std::vector<float>& x,
                          const std::vector<BlockParams>* fixed = nullptr) {
    using namespace ggml_detail;
    using io::WeightDType;
    const io::GgmlTypeInfo* info = io::ggml_quant_info(type);
    if (!info || x.size() % size_t(info->block) != 0)
        throw std::invalid_argument("quantize: bad type or length");
    const int QK = int(info->block), NB = int(info->block_bytes);
    const size_t n_blocks = x.size() / size_t(QK);
    Quantized out;
    out.bytes.assign(n_blocks * size_t(NB), 0);
    out.params.resize(n_blocks);
    out.bound.resize(x.size());
    std::vector<int> q(static_cast<size_t>(QK));
    for (size_t ib = 0; ib < n_blocks; ++ib) {
        const float* xb = x.data() + ib * size_t(QK);
        uint8_t* o = out.bytes.data() + ib * size_t(NB);
        double* bd = out.bound.data() + ib * size_t(QK);
        BlockParams& p = out.params[ib];
        const BlockParams* f = fixed ? &(*fixed)[ib] : nullptr;
        switch (type) {
            case WeightDType::Q4_0:  // d, qs[16]: value j low nibble of qs[j], j + 16 high
                symmetric(xb, 32, 7, f, p, q, bd);
                put16(o, p.d);
                for (int j = 0; j < 16; ++j) o[2 + j] = uint8_t((q[j] + 8) | (q[j + 16] + 8) << 4);
                break;
            case WeightDType::Q4_1:  // d, m, qs[16]
                affine(xb, 32, 15, f, p, q, bd);
                put16(o, p.d), put16(o + 2, p.dmin);
                for (int j = 0; j < 16; ++j) o[4 + j] = uint8_t(q[j] | q[j + 16] << 4);
                break;
            case WeightDType::Q5_0:
            case WeightDType::Q5_1: {  // d, [m], qh (u32: bit j = bit 4 of value j), qs[16]
                const bool is1 = type == WeightDType::Q5_1;
                if (is1)
                    affine(xb, 32, 31, f, p, q, bd);
                else
                    symmetric(xb, 32, 15, f, p, q, bd);
                put16(o, p.d);
                if (is1) put16(o + 2, p.dmin);
                uint8_t* qh = o + (is1 ? 4 : 2);
                uint32_t h = 0;
                for (int j = 0; j < 32; ++j) {
                    const int v = q[j] + (is1 ? 0 : 16);
                    h |= uint32_t(v >> 4) << j;
                    qh[4 + j % 16] |= uint8_t((v & 15) << (j < 16 ? 0 : 4));
                }
                std::memcpy(qh, &h, 4);
                break;
            }
            case WeightDType::Q8_0:
                symmetric(xb, 32, 127, f, p, q, bd);
                put16(o, p.d);
                for (int j = 0; j < 32; ++j) o[2 + j] = uint8_t(int8_t(q[j]));
                break;
            case WeightDType::IQ4_NL: {  // d, qs[16]: nibbles index k_iq4nl_values
                double amax = 0;
                for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(double(xb[j])));
                p.d = f ? f->d : f16_ceil(amax / 127);
                const double d = f16d(p.d);
                put16(o, p.d);
                for (int j = 0; j < 32; ++j) {
                    int best = 0;
                    for (int k = 1; k < 16; ++k)
                        if (std::abs(xb[j] - d * io::k_iq4nl_values[k]) <
                            std::abs(xb[j] - d * io::k_iq4nl_values[best]))
                            best = k;
                    // |x / d| <= 127: nearest entry at most 14 away (127 - 113; inner gaps <= 24)
                    bd[j] = bound(d, 127, 0, 14.0);
                    o[2 + j % 16] |= uint8_t(best << (j < 16 ? 0 : 4));
                }
                break;
            }
            case WeightDType::Q2_K: {  // scales[16] (sc | m << 4), qs[64], d, dmin
                k_block(xb, 16, 16, 3, 15, true, f, p, q, bd);
                for (int j = 0; j < 16; ++j) o[j] = uint8_t(p.sc[j] | p.m[j] << 4);
                // value 128 h + 32 k + 16 t + l: qs[32 h + 16 t + l], bits 2k
                for (int i = 0; i < 256; ++i) {
                    const int h = i / 128, k = i % 128 / 32, t = i % 32 / 16, l = i % 16;
                    o[16 + 32 * h + 16 * t + l] |= uint8_t(q[i] << (2 * k));
                }
                put16(o + 80, p.d), put16(o + 82, p.dmin);
                break;
            }
            case WeightDType::Q3_K: {  // hmask[32], qs[64], scales[12], d
                k_block(xb, 16, 16, 3, 31, false, f, p, q, bd);
                for (int i = 0; i < 256; ++i) {
                    const int h = i / 128, k = i % 128 / 32, t = i % 32 / 16, l = i % 16;
                    const int v = q[i];  // -3..3: high bit set means "no -4"
                    const int low = v >= 0 ? v : v + 4;
                    if (v >= 0) o[16 * t + l] |= uint8_t(1 << (4 * h + k));
                    o[32 + 32 * h + 16 * t + l] |= uint8_t(low << (2 * k));
                }
                uint8_t* s =
                    o + 96;  // 6-bit sc + 32: low nibbles bytes 0-7 (lo/hi), top 2 bits 8-11
                for (int j = 0; j < 16; ++j) {
                    const int v = p.sc[j] + 32;
                    s[j % 8] |= uint8_t((v & 15) << (j < 8 ? 0 : 4));
                    s[8 + j % 4] |= uint8_t((v >> 4) << (2 * (j / 4)));
                }
                put16(o + 108, p.d);
                break;
            }
            case WeightDType::Q4_K:
            case WeightDType::Q5_K: {  // d, dmin, scales[12], [qh[32]], qs[128]
                const bool is5 = type == WeightDType::Q5_K;
                k_block(xb, 8, 32, is5 ? 31 : 15, 63, true, f, p, q, bd);
                put16(o, p.d), put16(o + 2, p.dmin);
                uint8_t* s = o + 4;
                for (int j = 0; j < 4; ++j) {
                    s[j] = uint8_t(p.sc[j] | (p.sc[j + 4] >> 4) << 6);
                    s[j + 4] = uint8_t(p.m[j] | (p.m[j + 4] >> 4) << 6);
                    s[j + 8] = uint8_t((p.sc[j + 4] & 15) | (p.m[j + 4] & 15) << 4);
                }
                uint8_t* qh = o + 16;
                uint8_t* qs = o + (is5 ? 48 : 16);
                // value 64 g + 32 t + l: nibble t of qs[32 g + l]; Q5_K bit 4 in qh[l] bit 2g + t
                for (int i = 0; i < 256; ++i) {
                    const int g = i / 64, t = i % 64 / 32, l = i % 32;
                    qs[32 * g + l] |= uint8_t((q[i] & 15) << (4 * t));
                    if (is5) qh[l] |= uint8_t((q[i] >> 4) << (2 * g + t));
                }
                break;
            }
            case WeightDType::Q6_K: {  // ql[128], qh[64], int8 scales[16], d
                k_block(xb, 16, 16, 31, 127, false, f, p, q, bd);
                // value 128 h + 32 r + l (+32 biased, 6 bits): nibble r/2 of ql[64 h + 32 (r%2) +
                // l], bits 2r of qh[32 h + l]
                for (int i = 0; i < 256; ++i) {
                    const int h = i / 128, r = i % 128 / 32, l = i % 32;
                    const int v = q[i] + 32;
                    o[64 * h + 32 * (r % 2) + l] |= uint8_t((v & 15) << (4 * (r / 2)));
                    o[128 + 32 * h + l] |= uint8_t((v >> 4) << (2 * r));
                }
                for (int j = 0; j < 16; ++j) o[192 + j] = uint8_t(int8_t(p.sc[j]));
                put16(o + 208, p.d);
                break;
            }
            case WeightDType::Q8_K: {  // float d, int8 qs[256], int16 bsums[16]
                double amax = 0;
                for (int j = 0; j < 256; ++j) amax = std::max(amax, std::abs(double(xb[j])));
                float d = f ? f->d32 : float(amax / 127);
                if (!f && double(d) * 127 < amax) d = std::nextafter(d, 1e30f);
                p.d32 = d;
                std::memcpy(o, &d, 4);
                for (int j = 0; j < 256; ++j) {
                    q[j] = d > 0 ? round_clamp(xb[j] / double(d), -127, 127) : 0;
                    o[4 + j] = uint8_t(int8_t(q[j]));
                    bd[j] = bound(d, 127, 0);
                }
                for (int g = 0; g < 16; ++g) {
                    int16_t sum = 0;
                    for (int l = 0; l < 16; ++l) sum = int16_t(sum + q[16 * g + l]);
                    std::memcpy(o + 260 + 2 * g, &sum, 2);
                }
                break;
            }
            default:
                throw std::invalid_argument("quantize: not a quantized type");
        }
    }
    return out;
}

}  // namespace sinkscope::testutil
