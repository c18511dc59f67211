// SHA-256 (FIPS 180-4) through OpenSSL's EVP interface (libcrypto dispatches to the SHA
// extensions of x86-64 and Arm where the CPU has them).
#include "sinkscope/core/sha256.hpp"

#include <openssl/evp.h>

#include <fstream>
#include <vector>

#include "sinkscope/core/error.hpp"

namespace sinkscope {
namespace {
EVP_MD_CTX* ctx_of(void* p) {
    return static_cast<EVP_MD_CTX*>(p);
}
}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_of(ctx_), EVP_sha256(), nullptr) != 1) {
        EVP_MD_CTX_free(ctx_of(ctx_));
        throw InternalError("SHA-256: libcrypto could not set up a digest");
    }
}

Sha256::~Sha256() {
    EVP_MD_CTX_free(ctx_of(ctx_));
}

void Sha256::update(const void* data, size_t n) {
    if (n > 0 && EVP_DigestUpdate(ctx_of(ctx_), data, n) != 1)
        throw InternalError("SHA-256: libcrypto refused an update");
}

std::string Sha256::hex_digest() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_of(ctx_), md, &len) != 1 || len != 32)
        throw InternalError("SHA-256: libcrypto could not finalize the digest");
    static const char* hex = "0123456789abcdef";
    std::string out;
    out.reserve(64);
    for (unsigned int i = 0; i < len; ++i) {
        out += hex[md[i] >> 4];
        out += hex[md[i] & 15];
    }
    return out;
}

std::string sha256_hex(const std::string& data) {
    Sha256 h;
    h.update(data.data(), data.size());
    return h.hex_digest();
}

std::string sha256_file(const std::filesystem::path& path, const std::atomic<bool>* cancel) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(path.string(), "cannot open for hashing");
    Sha256 h;
    std::vector<char> buf(1 << 20);
    while (in) {
        if (cancel && cancel->load(std::memory_order_relaxed)) return "";
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        h.update(buf.data(), static_cast<size_t>(in.gcount()));
    }
    if (in.bad()) throw IoError(path.string(), "read error while hashing");
    return h.hex_digest();
}

}  // namespace sinkscope
