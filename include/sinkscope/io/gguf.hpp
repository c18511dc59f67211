// GGUF files (versions 2 and 3): metadata key/values and tensor descriptions, memory-mapped.
// Every count, length and offset is checked against the file size before it is used.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "sinkscope/io/mmap_file.hpp"

namespace sinkscope::io {

// Some GGML tensor type ids (numbering from the GGUF specification); the full table with block
// sizes and which types sinkscope reads is in ggml_quant.hpp.
enum class GgmlType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ4_NL = 20,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    BF16 = 30,
};
const char* ggml_type_name(uint32_t type);

struct GgufValue;
using GgufArray = std::vector<GgufValue>;
struct GgufValue {
    // Integers are widened to int64/uint64, floats to double.
    std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<GgufArray>> v;
};

struct GgufTensorInfo {
    std::string name;
    std::vector<int64_t> dims;  // GGUF order: dims[0] is the fastest-varying (ne[0])
    uint32_t type = 0;
    uint64_t offset = 0;   // from the start of the data section
    uint64_t n_bytes = 0;  // computed from type and dims
    int64_t numel() const;
};

class GgufFile {
public:
    explicit GgufFile(const std::filesystem::path& path);  // throws InputError on corruption
    ~GgufFile();
    GgufFile(const GgufFile&) = delete;
    GgufFile& operator=(const GgufFile&) = delete;

    const std::filesystem::path& path() const { return path_; }
    uint32_t version() const { return version_; }
    const std::map<std::string, GgufValue>& metadata() const { return kv_; }
    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

    bool has(const std::string& key) const { return kv_.count(key) != 0; }
    // Typed accessors: throw InputError naming the file and key when missing or mistyped.
    std::string get_string(const std::string& key) const;
    int64_t get_int(const std::string& key) const;
    double get_float(const std::string& key) const;  // accepts integer values too
    std::vector<std::string> get_string_array(const std::string& key) const;
    std::vector<double> get_float_array(const std::string& key) const;
    std::vector<int64_t> get_int_array(const std::string& key) const;
    int64_t get_int_or(const std::string& key, int64_t fallback) const;
    double get_float_or(const std::string& key, double fallback) const;

    const GgufTensorInfo* find_tensor(const std::string& name) const;
    // Raw bytes of a tensor inside the mapping (valid while this object lives).
    const uint8_t* tensor_data(const GgufTensorInfo& t) const;

private:
    std::filesystem::path path_;
    MappedFile file_;
    const uint8_t* map_ = nullptr;  // file_.data()
    size_t size_ = 0;
    uint32_t version_ = 0;
    uint64_t data_offset_ = 0;
    std::map<std::string, GgufValue> kv_;
    std::vector<GgufTensorInfo> tensors_;
};

}  // namespace sinkscope::io
