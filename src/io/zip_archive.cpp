// Zip central-directory reader (PKWARE APPNOTE.TXT 6.3: sections 4.3.7 local file header,
// 4.3.12 central directory header, 4.3.14-4.3.16 zip64 and end of central directory records,
// 4.5.3 zip64 extended information extra field). The archive is trusted for nothing: every
// structure is bounds-checked against the mapping before it is read.
#include "sinkscope/io/zip_archive.hpp"

#include <algorithm>
#include <cstring>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"

namespace sinkscope::io {

namespace {

constexpr uint32_t k_local_sig = 0x04034b50;       // "PK\3\4"
constexpr uint32_t k_central_sig = 0x02014b50;     // "PK\1\2"
constexpr uint32_t k_eocd_sig = 0x06054b50;        // "PK\5\6"
constexpr uint32_t k_zip64_eocd_sig = 0x06064b50;  // "PK\6\6"
constexpr uint32_t k_zip64_loc_sig = 0x07064b50;   // "PK\6\7"
constexpr size_t k_eocd_size = 22;
constexpr size_t k_zip64_loc_size = 20;
constexpr size_t k_zip64_eocd_size = 56;
constexpr size_t k_central_size = 46;
constexpr size_t k_local_size = 30;
constexpr size_t k_max_comment = 0xFFFF;
constexpr uint16_t k_zip64_extra_id = 0x0001;

template <typename T>
T le(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));  // little-endian host (static_assert in npy.cpp)
    return v;
}

// [begin, begin + len) lies inside [0, limit) without overflow.
bool fits(uint64_t begin, uint64_t len, uint64_t limit) {
    return begin <= limit && len <= limit - begin;
}

struct Directory {
    uint64_t n_entries = 0;
    uint64_t offset = 0;  // of the central directory
    uint64_t size = 0;
    uint64_t end = 0;  // where the records after the central directory begin
};

// The end of central directory record (and its zip64 counterpart when present).
Directory read_directory(const uint8_t* d, uint64_t size, const std::string& file) {
    SS_CHECK_INPUT(size >= k_eocd_size, file, "not a zip archive: ", size,
                   " bytes is shorter than an end-of-central-directory record (truncated?)");
    // Scan back for the record whose comment length reaches exactly the end of the file.
    uint64_t eocd = UINT64_MAX;
    const uint64_t lowest =
        size - k_eocd_size > k_max_comment ? size - k_eocd_size - k_max_comment : 0;
    for (uint64_t pos = size - k_eocd_size + 1; pos-- > lowest;) {
        if (le<uint32_t>(d + pos) == k_eocd_sig &&
            pos + k_eocd_size + le<uint16_t>(d + pos + 20) == size) {
            eocd = pos;
            break;
        }
    }
    SS_CHECK_INPUT(eocd != UINT64_MAX, file,
                   "not a zip archive: no end-of-central-directory record (truncated?)");
    const uint8_t* e = d + eocd;
    const uint16_t disk = le<uint16_t>(e + 4), cd_disk = le<uint16_t>(e + 6);
    Directory dir;
    dir.n_entries = le<uint16_t>(e + 10);
    dir.size = le<uint32_t>(e + 12);
    dir.offset = le<uint32_t>(e + 16);
    dir.end = eocd;
    const bool has_loc =
        eocd >= k_zip64_loc_size && le<uint32_t>(d + eocd - k_zip64_loc_size) == k_zip64_loc_sig;
    if (has_loc) {
        const uint8_t* loc = d + eocd - k_zip64_loc_size;
        const uint64_t z = le<uint64_t>(loc + 8);
        SS_CHECK_INPUT(le<uint32_t>(loc + 4) == 0 && le<uint32_t>(loc + 16) <= 1, file,
                       "multi-disk zip archives are not supported");
        SS_CHECK_INPUT(fits(z, k_zip64_eocd_size, eocd - k_zip64_loc_size) &&
                           le<uint32_t>(d + z) == k_zip64_eocd_sig,
                       file, "zip64 end-of-central-directory record at offset ", z,
                       " is missing or out of bounds (corrupt archive)");
        SS_CHECK_INPUT(le<uint32_t>(d + z + 16) == 0 && le<uint32_t>(d + z + 20) == 0, file,
                       "multi-disk zip archives are not supported");
        dir.n_entries = le<uint64_t>(d + z + 32);
        dir.size = le<uint64_t>(d + z + 40);
        dir.offset = le<uint64_t>(d + z + 48);
        dir.end = z;
    } else {
        SS_CHECK_INPUT(disk == 0 && cd_disk == 0, file,
                       "multi-disk zip archives are not supported");
        SS_CHECK_INPUT(
            dir.n_entries != 0xFFFF && dir.size != 0xFFFFFFFF && dir.offset != 0xFFFFFFFF, file,
            "zip64 archive without its zip64 end-of-central-directory locator");
    }
    SS_CHECK_INPUT(fits(dir.offset, dir.size, dir.end), file, "central directory [", dir.offset,
                   ", +", dir.size, ") runs past its end record at offset ", dir.end,
                   " (truncated or corrupt archive)");
    SS_CHECK_INPUT(dir.n_entries <= dir.size / k_central_size, file, "central directory of ",
                   dir.size, " bytes cannot hold the ", dir.n_entries, " entries it announces");
    return dir;
}

// Applies the zip64 extra field to the 32-bit values that are saturated (APPNOTE 4.5.3: the
// 64-bit values appear in this order, each only when its 32-bit field is 0xFFFFFFFF).
void apply_zip64_extra(const uint8_t* extra, uint16_t n, uint64_t* size, uint64_t* csize,
                       uint64_t* offset, const std::string& file, const std::string& name) {
    const bool need = *size == 0xFFFFFFFF || *csize == 0xFFFFFFFF || *offset == 0xFFFFFFFF;
    size_t pos = 0;
    while (pos + 4 <= n) {
        const uint16_t id = le<uint16_t>(extra + pos), len = le<uint16_t>(extra + pos + 2);
        SS_CHECK_INPUT(pos + 4 + len <= n, file, "entry ", quote(name),
                       ": extra field runs past its header (corrupt central directory)");
        if (id == k_zip64_extra_id) {
            const uint8_t* f = extra + pos + 4;
            size_t at = 0;
            for (uint64_t* v : {size, csize, offset}) {
                if (*v != 0xFFFFFFFF) continue;
                SS_CHECK_INPUT(at + 8 <= len, file, "entry ", quote(name),
                               ": zip64 extra field too short for its 64-bit sizes");
                *v = le<uint64_t>(f + at);
                at += 8;
            }
            return;
        }
        pos += 4 + size_t(len);
    }
    SS_CHECK_INPUT(!need, file, "entry ", quote(name),
                   ": 32-bit size or offset is saturated but there is no zip64 extra field");
}

}  // namespace

ZipArchive::ZipArchive(const std::filesystem::path& path) : map_(path) {
    const std::string file = path.string();
    const uint8_t* d = map_.data();
    const uint64_t size = map_.size();
    const Directory dir = read_directory(d, size, file);

    entries_.reserve(size_t(dir.n_entries));
    uint64_t pos = dir.offset;
    const uint64_t cd_end = dir.offset + dir.size;
    for (uint64_t i = 0; i < dir.n_entries; ++i) {
        SS_CHECK_INPUT(fits(pos, k_central_size, cd_end) && le<uint32_t>(d + pos) == k_central_sig,
                       file, "central directory entry ", i, " at offset ", pos,
                       " is missing or out of bounds (corrupt archive)");
        const uint8_t* c = d + pos;
        const uint16_t name_len = le<uint16_t>(c + 28), extra_len = le<uint16_t>(c + 30),
                       comment_len = le<uint16_t>(c + 32);
        const uint64_t rec_len = k_central_size + name_len + extra_len + comment_len;
        SS_CHECK_INPUT(fits(pos, rec_len, cd_end), file, "central directory entry ", i,
                       " runs past the central directory (corrupt archive)");
        ZipEntry e;
        e.name.assign(reinterpret_cast<const char*>(c + k_central_size), name_len);
        e.flags = le<uint16_t>(c + 8);
        e.method = le<uint16_t>(c + 10);
        e.compressed_size = le<uint32_t>(c + 20);
        e.size = le<uint32_t>(c + 24);
        uint64_t local = le<uint32_t>(c + 42);
        apply_zip64_extra(c + k_central_size + name_len, extra_len, &e.size, &e.compressed_size,
                          &local, file, e.name);

        // The local header repeats the name; its own sizes may be zero (data descriptor).
        SS_CHECK_INPUT(
            fits(local, k_local_size, dir.offset) && le<uint32_t>(d + local) == k_local_sig, file,
            "entry ", quote(e.name), ": local header at offset ", local,
            " is missing or out of bounds (corrupt archive)");
        const uint16_t lname = le<uint16_t>(d + local + 26), lextra = le<uint16_t>(d + local + 28);
        SS_CHECK_INPUT(lname == name_len && fits(local + k_local_size, lname, dir.offset) &&
                           std::memcmp(d + local + k_local_size, e.name.data(), lname) == 0,
                       file, "entry ", quote(e.name),
                       ": local header names a different file (corrupt archive)");
        e.data_offset = local + k_local_size + lname + lextra;
        SS_CHECK_INPUT(fits(e.data_offset, e.compressed_size, dir.offset), file, "entry ",
                       quote(e.name), ": data [", e.data_offset, ", +", e.compressed_size,
                       ") runs past the end of the entries (truncated or corrupt archive)");
        SS_CHECK_INPUT(e.method != 0 || e.compressed_size == e.size, file, "entry ", quote(e.name),
                       ": stored entry with compressed size ", e.compressed_size, " != size ",
                       e.size);
        SS_CHECK_INPUT(by_name_.emplace(e.name, entries_.size()).second, file, "entry ",
                       quote(e.name), " appears twice");
        entries_.push_back(std::move(e));
        pos += rec_len;
    }
}

const ZipEntry* ZipArchive::find(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? nullptr : &entries_[it->second];
}

const uint8_t* ZipArchive::data(const ZipEntry& e) const {
    if (e.flags & 1u)
        throw UnsupportedError(path().string(), "encrypted zip entry " + quote(e.name));
    if (e.method != 0)
        throw UnsupportedError(path().string(),
                               "zip entry " + quote(e.name) + " is compressed (method " +
                                   std::to_string(e.method) +
                                   "); only stored entries are read, as torch.save writes them");
    return map_.data() + e.data_offset;
}

}  // namespace sinkscope::io
