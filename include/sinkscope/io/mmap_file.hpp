// Read-only memory mapping of a whole file (RAII): weight files are mapped, not read, so that
// opening a multi-gigabyte checkpoint costs page-table entries rather than a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace sinkscope::io {

class MappedFile {
public:
    MappedFile() = default;
    // Maps `path` read-only; throws IoError naming the file when it cannot be opened or mapped.
    // An empty file maps to data() == nullptr, size() == 0.
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    const std::filesystem::path& path() const { return path_; }

private:
    void release() noexcept;

    std::filesystem::path path_;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace sinkscope::io
