// Writers for PyTorch-style zip checkpoints in tests: a minimal stored-entry zip writer (PKWARE
// APPNOTE 4.3, data aligned to 64 bytes as PyTorch's writer does, optional zip64 records) and
// pickle bytes as torch.save writes a state dict (torch/serialization.py, protocol 2). They are
// independent of src/io's readers, so tests can build valid, corrupt and malicious files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sinkscope::testutil {

template <typename T>
inline void put(std::string& s, T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// ---- a minimal zip writer (APPNOTE 4.3), independent of the reader under test -------------
struct ZipItem {
    std::string name;
    std::string data;
    uint16_t method = 0;
};

// Stored entries with data aligned to 64 bytes by an extra field, as PyTorch's writer does;
// `zip64` saturates every 32-bit size and offset and adds the zip64 records.
inline std::string make_zip(const std::vector<ZipItem>& items, bool zip64 = false) {
    std::string out, central;
    for (const ZipItem& it : items) {
        const uint64_t local = out.size();
        const size_t pad = (64 - (out.size() + 30 + it.name.size() + 4) % 64) % 64;
        put<uint32_t>(out, 0x04034b50);
        put<uint16_t>(out, 20);
        put<uint16_t>(out, 0);  // flags
        put<uint16_t>(out, it.method);
        put<uint32_t>(out, 0);  // time, date
        put<uint32_t>(out, 0);  // crc (not checked by the reader)
        put<uint32_t>(out, uint32_t(it.data.size()));
        put<uint32_t>(out, uint32_t(it.data.size()));
        put<uint16_t>(out, uint16_t(it.name.size()));
        put<uint16_t>(out, uint16_t(4 + pad));
        out += it.name;
        put<uint16_t>(out, 0x4246);  // "FB": padding
        put<uint16_t>(out, uint16_t(pad));
        out += std::string(pad, 'Z');
        out += it.data;

        std::string extra;
        if (zip64) {
            put<uint16_t>(extra, 0x0001);
            put<uint16_t>(extra, 24);
            put<uint64_t>(extra, it.data.size());
            put<uint64_t>(extra, it.data.size());
            put<uint64_t>(extra, local);
        }
        const uint32_t sat = 0xFFFFFFFF;
        put<uint32_t>(central, 0x02014b50);
        put<uint16_t>(central, 45);
        put<uint16_t>(central, 45);
        put<uint16_t>(central, 0);
        put<uint16_t>(central, it.method);
        put<uint32_t>(central, 0);
        put<uint32_t>(central, 0);
        put<uint32_t>(central, zip64 ? sat : uint32_t(it.data.size()));
        put<uint32_t>(central, zip64 ? sat : uint32_t(it.data.size()));
        put<uint16_t>(central, uint16_t(it.name.size()));
        put<uint16_t>(central, uint16_t(extra.size()));
        put<uint16_t>(central, 0);  // comment
        put<uint16_t>(central, 0);  // disk
        put<uint16_t>(central, 0);  // internal attributes
        put<uint32_t>(central, 0);  // external attributes
        put<uint32_t>(central, zip64 ? sat : uint32_t(local));
        central += it.name + extra;
    }
    const uint64_t cd_offset = out.size();
    out += central;
    if (zip64) {
        const uint64_t z = out.size();
        put<uint32_t>(out, 0x06064b50);
        put<uint64_t>(out, 44);
        put<uint16_t>(out, 45);
        put<uint16_t>(out, 45);
        put<uint32_t>(out, 0);
        put<uint32_t>(out, 0);
        put<uint64_t>(out, items.size());
        put<uint64_t>(out, items.size());
        put<uint64_t>(out, central.size());
        put<uint64_t>(out, cd_offset);
        put<uint32_t>(out, 0x07064b50);
        put<uint32_t>(out, 0);
        put<uint64_t>(out, z);
        put<uint32_t>(out, 1);
    }
    put<uint32_t>(out, 0x06054b50);
    put<uint16_t>(out, 0);
    put<uint16_t>(out, 0);
    put<uint16_t>(out, zip64 ? 0xFFFF : uint16_t(items.size()));
    put<uint16_t>(out, zip64 ? 0xFFFF : uint16_t(items.size()));
    put<uint32_t>(out, zip64 ? 0xFFFFFFFF : uint32_t(central.size()));
    put<uint32_t>(out, zip64 ? 0xFFFFFFFF : uint32_t(cd_offset));
    put<uint16_t>(out, 0);
    return out;
}

// ---- pickle bytes as torch.save writes them (torch/serialization.py, protocol 2) -------------
struct Pickle {
    std::string b;
    Pickle& op(uint8_t c) {
        b.push_back(char(c));
        return *this;
    }
    Pickle& global(const std::string& module, const std::string& name) {
        return op('c').raw(module + "\n" + name + "\n");
    }
    Pickle& str(const std::string& s) {
        op('X');
        put<uint32_t>(b, uint32_t(s.size()));
        return raw(s);
    }
    Pickle& integer(int32_t v) {
        op('J');
        put<int32_t>(b, v);
        return *this;
    }
    Pickle& raw(const std::string& s) {
        b += s;
        return *this;
    }
};

struct TensorSpec {
    std::string name, storage = "FloatStorage", key = "0";
    int32_t numel = 0, offset = 0;
    std::vector<int32_t> shape, stride;
};

inline std::string state_dict_pickle(const std::vector<TensorSpec>& tensors) {
    Pickle p;
    p.op(0x80).op(2).global("collections", "OrderedDict").op(')').op('R').op('(');
    for (const TensorSpec& t : tensors) {
        p.str(t.name).global("torch._utils", "_rebuild_tensor_v2").op('(').op('(');
        p.str("storage").global("torch", t.storage).str(t.key).str("cpu").integer(t.numel);
        p.op('t').op('Q').integer(t.offset).op('(');
        for (int32_t d : t.shape) p.integer(d);
        p.op('t').op('(');
        for (int32_t s : t.stride) p.integer(s);
        p.op('t').op(0x89).global("collections", "OrderedDict").op(')').op('R').op('t').op('R');
    }
    p.op('u').op('.');
    return p.b;
}

}  // namespace sinkscope::testutil
