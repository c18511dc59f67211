// safetensors_file (io/safetensors_writer.hpp).
#include "sinkscope/io/safetensors_writer.hpp"

#include <set>

#include <nlohmann/json.hpp>

#include "sinkscope/core/error.hpp"

namespace sinkscope::io {

namespace {
// The format's dtype strings (safetensors README, "Format": F64, F32, F16, BF16, I64, I32, ...).
const char* safetensors_dtype(WeightDType t) {
    switch (t) {
        case WeightDType::F32:
        case WeightDType::F16:
        case WeightDType::BF16:
        case WeightDType::F64:
        case WeightDType::I32:
        case WeightDType::I64:
            return weight_dtype_name(t);  // the format's own names
        default:
            break;
    }
    throw InternalError(std::string("safetensors cannot hold ") + weight_dtype_name(t));
}
}  // namespace

std::string safetensors_file(const std::vector<TensorBytes>& tensors,
                             const std::map<std::string, std::string>& metadata) {
    // ordered_json keeps the tensors in the caller's order, so equal inputs give equal bytes.
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::set<std::string> seen;
    uint64_t offset = 0;
    for (const TensorBytes& t : tensors) {
        SS_CHECK(seen.insert(t.name).second, "safetensors: duplicate tensor ", t.name);
        int64_t numel = 1;
        for (int64_t d : t.shape) numel *= d;
        const int64_t expected = weight_dtype_n_bytes(t.dtype, numel);
        SS_CHECK(expected == static_cast<int64_t>(t.bytes.size()), "safetensors: tensor ", t.name,
                 " has ", t.bytes.size(), " bytes for ", expected);
        header[t.name] = {{"dtype", safetensors_dtype(t.dtype)},
                          {"shape", t.shape},
                          {"data_offsets", {offset, offset + t.bytes.size()}}};
        offset += t.bytes.size();
    }
    std::string json = header.dump();
    json.append((8 - json.size() % 8) % 8, ' ');
    std::string out;
    out.reserve(8 + json.size() + offset);
    const uint64_t n = json.size();
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
    out += json;
    for (const TensorBytes& t : tensors) out += t.bytes;
    return out;
}

}  // namespace sinkscope::io
