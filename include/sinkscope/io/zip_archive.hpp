// Read-only zip archive over a memory mapping, enough for PyTorch's zip checkpoints
// (torch.save since 1.6, torch::pickle_save): STORED entries, zip64 sizes and offsets, data
// descriptors. Entries are views into the mapping, so tensors are never copied.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sinkscope/io/mmap_file.hpp"

namespace sinkscope::io {

struct ZipEntry {
    std::string name;          // as stored, '/'-separated ("archive/data/0")
    uint16_t method = 0;       // 0 = stored, 8 = deflate (not readable here)
    uint16_t flags = 0;        // general purpose bits; bit 0 = encrypted
    uint64_t data_offset = 0;  // first byte of the entry's (possibly compressed) data
    uint64_t compressed_size = 0;
    uint64_t size = 0;  // uncompressed size
};

class ZipArchive {
public:
    // Maps `path` and reads its central directory. Every offset and length (end of central
    // directory, zip64 records, central entries, local headers, entry data) is checked against
    // the file size; a malformed archive throws InputError naming the file.
    explicit ZipArchive(const std::filesystem::path& path);

    const std::filesystem::path& path() const { return map_.path(); }
    const std::vector<ZipEntry>& entries() const { return entries_; }
    // The entry with exactly this name, or nullptr.
    const ZipEntry* find(std::string_view name) const;
    // The bytes of a STORED entry (a view into the mapping, valid while this archive lives).
    // A compressed or encrypted entry throws UnsupportedError naming the file and entry.
    const uint8_t* data(const ZipEntry& e) const;

private:
    MappedFile map_;
    std::vector<ZipEntry> entries_;
    std::unordered_map<std::string, size_t> by_name_;  // name -> index in entries_
};

}  // namespace sinkscope::io
