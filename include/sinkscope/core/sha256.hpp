// SHA-256 (FIPS 180-4) for recording the identity of weight files in run.json. Computed by
// OpenSSL's libcrypto, which uses the CPU's SHA extensions where it has them (a weight file of
// 500 MB hashes in well under a second instead of ~4 s with a portable loop).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace sinkscope {

class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;
    void update(const void* data, size_t n);
    std::string hex_digest();  // finalizes; call once

private:
    void* ctx_;  // EVP_MD_CTX
};

std::string sha256_hex(const std::string& data);
// Hash of a whole file, read in chunks (throws IoError naming the file). When *cancel becomes
// true, stops early and returns an empty string.
std::string sha256_file(const std::filesystem::path& path,
                        const std::atomic<bool>* cancel = nullptr);

}  // namespace sinkscope
