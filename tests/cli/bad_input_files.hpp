// Writers of small crafted files for the bad-input catalogue (integration_bad_input.cpp): each
// follows its format's definition just far enough to reach the check a case is about. They are
// written here, independently of the readers in src/io, so a case cannot agree with a reader's
// bug.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace sinkscope::testutil {

inline void put_le(std::string& s, uint64_t v, int n_bytes) {
    for (int i = 0; i < n_bytes; ++i) s.push_back(char((v >> (8 * i)) & 0xFF));
}
inline void put_be32(std::string& s, uint32_t v) {
    for (int i = 3; i >= 0; --i) s.push_back(char((v >> (8 * i)) & 0xFF));
}

// safetensors (huggingface/safetensors README): u64 little-endian header length, the JSON
// header, then the data section.
inline std::string safetensors_bytes(const std::string& header, const std::string& data) {
    std::string out;
    put_le(out, header.size(), 8);
    return out + header + data;
}

// .npy version 1.0 (numpy format.py): magic, version, u16 header length, the header dict padded
// with spaces to a multiple of 64 bytes and ended by '\n', then the data.
inline std::string npy_bytes(const std::string& dict, const std::string& data) {
    std::string header = dict;
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::string out = "\x93NUMPY";
    out += char(1);
    out += char(0);
    put_le(out, header.size(), 2);
    return out + header + data;
}
inline std::string f32_bytes(const std::vector<float>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// GGUF v3 (ggml docs/gguf.md): magic, version, tensor count, key/value count, the key/values,
// the tensor infos (name, n_dims, dims in ggml order, type, offset), padding to the alignment
// (32), the data.
class GgufBytes {
public:
    GgufBytes& str(const std::string& key, const std::string& v) {
        head(key, 8);
        put_str(kv_, v);
        return *this;
    }
    GgufBytes& u32(const std::string& key, uint32_t v) {
        head(key, 4);
        put_le(kv_, v, 4);
        return *this;
    }
    GgufBytes& f32(const std::string& key, float v) {
        head(key, 6);
        kv_.append(reinterpret_cast<const char*>(&v), 4);
        return *this;
    }
    // An array of `n` u8 (GGUF type 9 of element type 0).
    GgufBytes& u8_array(const std::string& key, uint64_t n) {
        head(key, 9);
        put_le(kv_, 0, 4);
        put_le(kv_, n, 8);
        kv_.append(size_t(n), '\1');
        return *this;
    }
    // A key/value of any type code with `raw` value bytes (for unknown types).
    GgufBytes& raw(const std::string& key, uint32_t type, const std::string& value) {
        head(key, type);
        kv_ += value;
        return *this;
    }
    // An F32 tensor of `ne` (ggml order: fastest dimension first), zero-filled.
    GgufBytes& tensor(const std::string& name, const std::vector<uint64_t>& ne, uint32_t type = 0) {
        put_str(infos_, name);
        put_le(infos_, ne.size(), 4);
        uint64_t n = 1;
        for (uint64_t d : ne) put_le(infos_, d, 8), n *= d;
        put_le(infos_, type, 4);
        put_le(infos_, data_.size(), 8);
        data_.append(size_t(n * 4), '\0');
        data_.resize((data_.size() + 31) / 32 * 32, '\0');
        ++n_tensors_;
        return *this;
    }
    std::string bytes(uint32_t version = 3) const {
        std::string b = "GGUF";
        put_le(b, version, 4);
        put_le(b, n_tensors_, 8);
        put_le(b, n_kv_, 8);
        b += kv_ + infos_;
        b.resize((b.size() + 31) / 32 * 32, '\0');
        return b + data_;
    }

private:
    static void put_str(std::string& s, const std::string& v) {
        put_le(s, v.size(), 8);
        s += v;
    }
    void head(const std::string& key, uint32_t type) {
        put_str(kv_, key);
        put_le(kv_, type, 4);
        ++n_kv_;
    }
    std::string kv_, infos_, data_;
    uint64_t n_kv_ = 0, n_tensors_ = 0;
};

// A llama2.c checkpoint header (run.c Config: 7 int32) followed by `n_floats` zero floats.
inline std::string llama2c_bytes(const std::vector<int32_t>& header, uint64_t n_floats) {
    std::string out;
    for (int32_t v : header) put_le(out, uint32_t(v), 4);
    out.append(size_t(n_floats * 4), '\0');
    return out;
}

// CRC-32 (ISO 3309, as PNG chunks use it; PNG specification 5.5).
inline uint32_t crc32(const std::string& bytes) {
    uint32_t c = 0xFFFFFFFFu;
    for (unsigned char b : bytes) {
        c ^= b;
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

// A PNG chunk (PNG specification 5.3): length, type, data, CRC of type + data.
inline std::string png_chunk(const std::string& type, const std::string& data) {
    std::string out;
    put_be32(out, uint32_t(data.size()));
    out += type + data;
    put_be32(out, crc32(type + data));
    return out;
}

// The PNG signature and an IHDR chunk (11.2.2) for a `width` x `height` 8-bit image of
// `color_type` (6 = RGBA), then `rest` (further chunks).
inline std::string png_with_ihdr(uint32_t width, uint32_t height, uint8_t color_type,
                                 const std::string& rest) {
    std::string ihdr;
    put_be32(ihdr, width);
    put_be32(ihdr, height);
    ihdr += char(8);  // bit depth
    ihdr += char(color_type);
    ihdr += std::string(3, '\0');  // compression, filter, interlace
    return std::string("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr) + rest;
}

// A valid 8-bit RGB PNG of `width` x `height` (every pixel `level`): IDAT is a zlib stream
// (RFC 1950: header 78 01, Adler-32 at the end) of stored deflate blocks (RFC 1951 3.2.4), each
// scanline led by filter type 0 (PNG specification 9.2).
inline std::string png_rgb(uint32_t width, uint32_t height, uint8_t level) {
    std::string raw;
    for (uint32_t y = 0; y < height; ++y) {
        raw += '\0';
        raw += std::string(size_t(width) * 3, char(level));
    }
    std::string z = "\x78\x01";
    for (size_t at = 0; at < raw.size() || at == 0; at += 65535) {
        const size_t n = std::min<size_t>(65535, raw.size() - at);
        z += char(at + n >= raw.size() ? 1 : 0);  // BFINAL, BTYPE 00
        put_le(z, n, 2);
        put_le(z, ~n & 0xFFFF, 2);
        z += raw.substr(at, n);
        if (at + n >= raw.size()) break;
    }
    uint32_t a = 1, b = 0;
    for (unsigned char c : raw) a = (a + c) % 65521, b = (b + a) % 65521;
    put_be32(z, b << 16 | a);
    return png_with_ihdr(width, height, 2, png_chunk("IDAT", z) + png_chunk("IEND", ""));
}

// `depth` nested JSON arrays around `inner`: [[[...inner...]]].
inline std::string nested_json(size_t depth, const std::string& inner = "") {
    return std::string(depth, '[') + inner + std::string(depth, ']');
}

}  // namespace sinkscope::testutil
