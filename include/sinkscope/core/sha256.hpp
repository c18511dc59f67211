// SHA-256 (FIPS 180-4) for recording the identity of weight files in run.json.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace sinkscope {

class Sha256 {
public:
    Sha256();
    void update(const void* data, size_t n);
    std::string hex_digest();  // finalizes; call once

private:
    void block(const uint8_t* p);
    uint32_t h_[8];
    uint8_t buf_[64];
    size_t buf_len_ = 0;
    uint64_t total_ = 0;
};

std::string sha256_hex(const std::string& data);
// Hash of a whole file, read in chunks (throws IoError naming the file).
std::string sha256_file(const std::filesystem::path& path);

}  // namespace sinkscope
