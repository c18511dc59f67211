// .npy / .npz reader and writer (NumPy format description: NEP 1, "A simple file format for
// NumPy arrays"). Every length is validated against the file size before it is used.
#include "sinkscope/io/npy.hpp"

#include <array>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/mmap_file.hpp"

namespace sinkscope::io {

static_assert(std::endian::native == std::endian::little, "sinkscope assumes a little-endian host");

const char* dtype_descr(DType t) {
    switch (t) {
        case DType::F16:
            return "<f2";
        case DType::F32:
            return "<f4";
        case DType::F64:
            return "<f8";
        case DType::I32:
            return "<i4";
        case DType::I64:
            return "<i8";
    }
    return "?";
}

size_t dtype_size(DType t) {
    switch (t) {
        case DType::F16:
            return 2;
        case DType::F32:
            return 4;
        case DType::F64:
            return 8;
        case DType::I32:
            return 4;
        case DType::I64:
            return 8;
    }
    return 0;
}

int64_t NpyArray::numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

float half_to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: renormalise
            int e = -1;
            do {
                ++e;
                mant <<= 1;
            } while ((mant & 0x400) == 0);
            bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | mant << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | mant << 13;
    }
    return std::bit_cast<float>(bits);
}

uint16_t float_to_half(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    uint16_t sign = uint16_t((x >> 16) & 0x8000);
    uint32_t exp = (x >> 23) & 0xff;
    uint32_t mant = x & 0x7fffff;
    if (exp == 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
    int e = int(exp) - 127 + 15;
    if (e >= 31) return sign | 0x7c00;
    if (e <= 0) {
        if (e < -10) return sign;
        mant |= 0x800000;
        int shift = 14 - e;
        uint32_t half = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) ++half;
        return sign | uint16_t(half);
    }
    uint16_t out = sign | uint16_t(e << 10) | uint16_t(mant >> 13);
    uint32_t rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (out & 1))) ++out;  // may carry into exponent: correct
    return out;
}

std::vector<double> NpyArray::to_f64() const {
    int64_t n = numel();
    std::vector<double> out(static_cast<size_t>(n));
    const uint8_t* p = data.data();
    for (int64_t i = 0; i < n; ++i) {
        switch (dtype) {
            case DType::F16: {
                uint16_t h;
                std::memcpy(&h, p + 2 * i, 2);
                out[i] = half_to_float(h);
                break;
            }
            case DType::F32: {
                float v;
                std::memcpy(&v, p + 4 * i, 4);
                out[i] = v;
                break;
            }
            case DType::F64:
                std::memcpy(&out[i], p + 8 * i, 8);
                break;
            case DType::I32: {
                int32_t v;
                std::memcpy(&v, p + 4 * i, 4);
                out[i] = v;
                break;
            }
            case DType::I64: {
                int64_t v;
                std::memcpy(&v, p + 8 * i, 8);
                out[i] = static_cast<double>(v);
                break;
            }
        }
    }
    return out;
}

std::vector<int64_t> NpyArray::to_i64() const {
    if (dtype != DType::I32 && dtype != DType::I64)
        throw UnsupportedError(std::string("expected an integer array, found dtype ") +
                               dtype_descr(dtype));
    int64_t n = numel();
    std::vector<int64_t> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        if (dtype == DType::I32) {
            int32_t v;
            std::memcpy(&v, data.data() + 4 * i, 4);
            out[i] = v;
        } else {
            std::memcpy(&out[i], data.data() + 8 * i, 8);
        }
    }
    return out;
}

namespace {

// Minimal parser for the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct HeaderParser {
    const std::string& s;
    const std::string& origin;
    size_t i = 0;

    [[noreturn]] void fail(const std::string& what) {
        throw InputError(origin, "malformed .npy header: " + what);
    }
    void ws() {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i;
    }
    void expect(char c) {
        ws();
        if (i >= s.size() || s[i] != c) fail(std::string("expected '") + c + "'");
        ++i;
    }
    std::string quoted() {
        ws();
        if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) fail("expected a string");
        char q = s[i++];
        size_t start = i;
        while (i < s.size() && s[i] != q) ++i;
        if (i >= s.size()) fail("unterminated string");
        return s.substr(start, i++ - start);
    }
    std::string word() {
        ws();
        size_t start = i;
        while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
        return s.substr(start, i - start);
    }
    std::vector<int64_t> tuple() {
        expect('(');
        std::vector<int64_t> dims;
        for (;;) {
            ws();
            if (i < s.size() && s[i] == ')') {
                ++i;
                return dims;
            }
            size_t start = i;
            while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
            if (start == i) fail("shape entries must be non-negative integers");
            if (i - start > 15) fail("shape entry too large");
            dims.push_back(std::stoll(s.substr(start, i - start)));
            ws();
            if (i < s.size() && s[i] == ',') ++i;
        }
    }
};

}  // namespace

NpyHeader parse_npy_header(const uint8_t* bytes, size_t size, const std::string& origin) {
    static const uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (size < 10)
        throw InputError(origin, "truncated .npy file: " + std::to_string(size) + " bytes");
    if (std::memcmp(bytes, kMagic, 6) != 0) throw InputError(origin, "not a .npy file (bad magic)");
    uint8_t major = bytes[6];
    size_t header_len, header_start;
    if (major == 1) {
        header_len = bytes[8] | size_t(bytes[9]) << 8;
        header_start = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12) throw InputError(origin, "truncated .npy file");
        header_len =
            bytes[8] | size_t(bytes[9]) << 8 | size_t(bytes[10]) << 16 | size_t(bytes[11]) << 24;
        header_start = 12;
    } else {
        throw UnsupportedError(origin, ".npy format version " + std::to_string(major));
    }
    if (header_len > size - header_start)
        throw InputError(origin, "truncated .npy file: header length " +
                                     std::to_string(header_len) + " beyond end of file");
    std::string header(reinterpret_cast<const char*>(bytes + header_start), header_len);

    HeaderParser p{header, origin};
    std::string descr;
    bool fortran = false, have_descr = false, have_shape = false, have_order = false;
    NpyHeader a;
    p.expect('{');
    for (;;) {
        p.ws();
        if (p.i < header.size() && header[p.i] == '}') break;
        std::string key = p.quoted();
        p.expect(':');
        if (key == "descr") {
            descr = p.quoted();
            have_descr = true;
        } else if (key == "fortran_order") {
            std::string w = p.word();
            if (w != "True" && w != "False") p.fail("fortran_order must be True or False");
            fortran = w == "True";
            have_order = true;
        } else if (key == "shape") {
            a.shape = p.tuple();
            have_shape = true;
        } else {
            p.fail("unknown key " + quote(key));
        }
        p.ws();
        if (p.i < header.size() && header[p.i] == ',') ++p.i;
    }
    if (!have_descr || !have_shape || !have_order) p.fail("missing descr, fortran_order or shape");
    if (fortran) throw UnsupportedError(origin, "Fortran-order arrays (save with C order)");
    if (descr == "<f2")
        a.dtype = DType::F16;
    else if (descr == "<f4")
        a.dtype = DType::F32;
    else if (descr == "<f8")
        a.dtype = DType::F64;
    else if (descr == "<i4")
        a.dtype = DType::I32;
    else if (descr == "<i8")
        a.dtype = DType::I64;
    else
        throw UnsupportedError(origin,
                               "dtype " + quote(descr) + " (supported: <f2 <f4 <f8 <i4 <i8)");

    size_t data_start = header_start + header_len;
    // numel with overflow check
    uint64_t numel = 1;
    for (auto d : a.shape) {
        if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / uint64_t(d) / 8)
            throw InputError(origin, "shape too large");
        numel *= uint64_t(d);
    }
    uint64_t need = numel * dtype_size(a.dtype);
    uint64_t have = size - data_start;
    if (have < need)
        throw InputError(origin, "truncated .npy data: expected " + std::to_string(need) +
                                     " bytes, found " + std::to_string(have));
    if (have > need)
        throw InputError(origin, "trailing data after .npy array: expected " +
                                     std::to_string(need) + " bytes, found " +
                                     std::to_string(have));
    a.data_offset = data_start;
    a.data_bytes = need;
    return a;
}

NpyArray parse_npy(const uint8_t* bytes, size_t size, const std::string& origin) {
    NpyHeader h = parse_npy_header(bytes, size, origin);
    NpyArray a;
    a.dtype = h.dtype;
    a.shape = std::move(h.shape);
    a.data.assign(bytes + h.data_offset, bytes + h.data_offset + h.data_bytes);
    return a;
}

NpyArray read_npy(const std::filesystem::path& path) {
    // Mapped rather than read: a regular file only (no device or pipe read without end), and the
    // array's bytes are copied once, from the mapping into the result.
    const MappedFile file(path);
    return parse_npy(file.data(), file.size(), path.string());
}

NpyArray read_npy(const RunFiles& dir, const std::string& rel) {
    if (!dir.is_memory()) return read_npy(dir.dir() / rel);
    const std::string bytes = dir.read(rel);
    return parse_npy(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), dir.shown(rel));
}

std::string serialize_npy(const NpyArray& a) {
    SS_CHECK(a.data.size() == size_t(a.numel()) * dtype_size(a.dtype), "array data size ",
             a.data.size(), " does not match its shape");
    std::string shape = "(";
    for (size_t i = 0; i < a.shape.size(); ++i) shape += std::to_string(a.shape[i]) + ", ";
    if (a.shape.size() > 1)
        shape.resize(shape.size() - 2), shape += ")";
    else if (a.shape.size() == 1)
        shape.resize(shape.size() - 1), shape += ")";
    else
        shape += ")";
    std::string dict = std::string("{'descr': '") + dtype_descr(a.dtype) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
    // Pad so that data starts on a 64-byte boundary; header ends with '\n'.
    size_t total = 10 + dict.size() + 1;
    size_t pad = (64 - total % 64) % 64;
    dict += std::string(pad, ' ') + "\n";
    std::string out("\x93NUMPY\x01\x00", 8);
    out += static_cast<char>(dict.size() & 0xff);
    out += static_cast<char>((dict.size() >> 8) & 0xff);
    out += dict;
    out.append(reinterpret_cast<const char*>(a.data.data()), a.data.size());
    return out;
}

void write_npy(const std::filesystem::path& path, const NpyArray& a) {
    write_file_atomic(path, serialize_npy(a));
}

namespace {
template <typename T>
NpyArray make_typed(DType t, std::vector<int64_t> shape, const std::vector<T>& v) {
    NpyArray a;
    a.dtype = t;
    a.shape = std::move(shape);
    SS_CHECK(size_t(a.numel()) == v.size(), "values (", v.size(), ") do not match shape (",
             a.numel(), ")");
    a.data.resize(v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(a.data.data(), v.data(), a.data.size());
    return a;
}
}  // namespace

NpyArray make_npy_f64(std::vector<int64_t> shape, const std::vector<double>& v) {
    return make_typed(DType::F64, std::move(shape), v);
}
NpyArray make_npy_f32(std::vector<int64_t> shape, const std::vector<float>& v) {
    return make_typed(DType::F32, std::move(shape), v);
}
NpyArray make_npy_i64(std::vector<int64_t> shape, const std::vector<int64_t>& v) {
    return make_typed(DType::I64, std::move(shape), v);
}

// ---- .npz (zip, stored members) -------------------------------------------------------------

namespace {

uint32_t crc32(const uint8_t* p, size_t n) {
    static const auto table = [] {
        std::array<uint32_t, 256> t{};
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uint32_t rd32(const uint8_t* p) {
    return p[0] | p[1] << 8 | p[2] << 16 | uint32_t(p[3]) << 24;
}
uint16_t rd16(const uint8_t* p) {
    return uint16_t(p[0] | p[1] << 8);
}
void wr32(std::string& s, uint32_t v) {
    for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}
void wr16(std::string& s, uint16_t v) {
    s += static_cast<char>(v & 0xff);
    s += static_cast<char>(v >> 8);
}

}  // namespace

std::map<std::string, NpyArray> read_npz(const std::filesystem::path& path) {
    const MappedFile file(path);  // as read_npy: regular files only, no copy of the archive
    const std::string origin = path.string();
    const uint8_t* b = file.data();
    size_t n = file.size();
    if (n < 22) throw InputError(origin, "truncated .npz (zip) file");
    // End of central directory: scan back over a possible comment (<= 65535 bytes).
    size_t eocd = std::string::npos;
    for (size_t i = n - 22 + 1; i-- > 0 && n - i <= 22 + 65535;) {
        if (rd32(b + i) == 0x06054b50) {
            eocd = i;
            break;
        }
    }
    if (eocd == std::string::npos) throw InputError(origin, "not a zip archive (no end record)");
    uint16_t count = rd16(b + eocd + 10);
    uint32_t cd_size = rd32(b + eocd + 12), cd_off = rd32(b + eocd + 16);
    if (cd_off == 0xffffffffu) throw UnsupportedError(origin, "zip64 archives");
    if (uint64_t(cd_off) + cd_size > eocd)
        throw InputError(origin, "zip central directory out of range");
    std::map<std::string, NpyArray> out;
    size_t p = cd_off;
    for (uint16_t k = 0; k < count; ++k) {
        if (p + 46 > eocd || rd32(b + p) != 0x02014b50)
            throw InputError(origin, "corrupt zip central directory entry " + std::to_string(k));
        uint16_t method = rd16(b + p + 10);
        uint32_t csize = rd32(b + p + 20), usize = rd32(b + p + 24);
        uint16_t name_len = rd16(b + p + 28), extra_len = rd16(b + p + 30),
                 comment_len = rd16(b + p + 32);
        uint32_t local = rd32(b + p + 42);
        if (p + 46 + name_len > eocd) throw InputError(origin, "corrupt zip entry name");
        std::string name(reinterpret_cast<const char*>(b + p + 46), name_len);
        p += 46 + name_len + extra_len + comment_len;
        if (method != 0)
            throw UnsupportedError(origin, "compressed member " + quote(name) +
                                               " (save with np.savez, not savez_compressed)");
        if (csize != usize) throw InputError(origin, "member " + quote(name) + " size mismatch");
        if (uint64_t(local) + 30 > n || rd32(b + local) != 0x04034b50)
            throw InputError(origin, "member " + quote(name) + " local header out of range");
        size_t data = local + 30 + rd16(b + local + 26) + rd16(b + local + 28);
        if (data > n || csize > n - data)
            throw InputError(origin, "member " + quote(name) + " data beyond end of file");
        std::string key =
            name.size() > 4 && name.ends_with(".npy") ? name.substr(0, name.size() - 4) : name;
        out[key] = parse_npy(b + data, csize, origin + ":" + printable(name));
    }
    return out;
}

void write_npz(const std::filesystem::path& path, const std::map<std::string, NpyArray>& arrays) {
    std::string out, central;
    uint16_t count = 0;
    for (const auto& [key, arr] : arrays) {
        std::string payload = serialize_npy(arr);
        std::string name = key + ".npy";
        SS_CHECK(payload.size() < 0xffffffffu, "npz member too large for a plain zip");
        uint32_t crc = crc32(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
        uint32_t offset = static_cast<uint32_t>(out.size());
        wr32(out, 0x04034b50);
        wr16(out, 20);
        wr16(out, 0);
        wr16(out, 0);
        wr16(out, 0);
        wr16(out, 0x21);
        wr32(out, crc);
        wr32(out, uint32_t(payload.size()));
        wr32(out, uint32_t(payload.size()));
        wr16(out, uint16_t(name.size()));
        wr16(out, 0);
        out += name;
        out += payload;
        wr32(central, 0x02014b50);
        wr16(central, 20);
        wr16(central, 20);
        wr16(central, 0);
        wr16(central, 0);
        wr16(central, 0);
        wr16(central, 0x21);
        wr32(central, crc);
        wr32(central, uint32_t(payload.size()));
        wr32(central, uint32_t(payload.size()));
        wr16(central, uint16_t(name.size()));
        wr16(central, 0);
        wr16(central, 0);
        wr16(central, 0);
        wr16(central, 0);
        wr32(central, 0);
        wr32(central, offset);
        central += name;
        ++count;
    }
    uint32_t cd_off = static_cast<uint32_t>(out.size());
    out += central;
    wr32(out, 0x06054b50);
    wr16(out, 0);
    wr16(out, 0);
    wr16(out, count);
    wr16(out, count);
    wr32(out, uint32_t(central.size()));
    wr32(out, cd_off);
    wr16(out, 0);
    write_file_atomic(path, out);
}

}  // namespace sinkscope::io
