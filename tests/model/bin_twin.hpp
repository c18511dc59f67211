// A pytorch_model.bin twin of a safetensors model directory, written by libtorch's own pickler
// (torch::pickle_save: the zip + pickle format of Python's torch.save), so sinkscope's reader is
// checked against an independent writer.
#pragma once

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/serialize.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/io/weights.hpp"

namespace sinkscope::testutil {

// The tensor a safetensors view holds, in its stored dtype (no upcast), as an owning tensor.
inline at::Tensor tensor_of(const io::TensorView& v) {
    at::ScalarType t = at::kFloat;
    switch (v.dtype) {
        case io::WeightDType::F32:
            t = at::kFloat;
            break;
        case io::WeightDType::F16:
            t = at::kHalf;
            break;
        case io::WeightDType::BF16:
            t = at::kBFloat16;
            break;
        case io::WeightDType::F64:
            t = at::kDouble;
            break;
        case io::WeightDType::I32:
            t = at::kInt;
            break;
        case io::WeightDType::I64:
            t = at::kLong;
            break;
        default:  // GGML block-quantized types
            throw UnsupportedError(std::string(io::weight_dtype_name(v.dtype)) +
                                   " has no torch dtype");
    }
    at::Tensor out = at::empty(v.shape, at::TensorOptions().dtype(t));  // shape of the view
    std::memcpy(out.data_ptr(), v.data, v.n_bytes);
    return out;
}

// torch::pickle_save of {name: tensor} for `names` of `store`, written to `file`. With `perturb`
// > 0 every floating tensor w becomes w (1 + perturb sin(k)) (k: the element's flat index), a
// deterministic stand-in for another training step of the same model.
inline void pickle_save_tensors(const io::WeightStore& store, const std::vector<std::string>& names,
                                const std::filesystem::path& file, double perturb = 0) {
    c10::Dict<std::string, at::Tensor> dict;
    for (const std::string& n : names) {
        at::Tensor t = tensor_of(store.get(n));
        if (perturb > 0 && t.is_floating_point()) {
            const at::Tensor k = at::arange(t.numel(), at::TensorOptions().dtype(at::kDouble));
            t = (t.to(at::kDouble) * (1 + perturb * k.sin()).reshape(t.sizes()))
                    .to(t.scalar_type());
        }
        dict.insert(n, t);
    }
    const std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
    std::ofstream(file, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

// Copies every file of the HF directory `src` except model.safetensors and golden/ into `dst`
// and writes its weights as pytorch_model.bin, or, with `n_shards` > 1, as shards
// pytorch_model-0000i-of-0000n.bin plus pytorch_model.bin.index.json (tensors dealt round-robin).
inline void write_bin_twin(const std::filesystem::path& src, const std::filesystem::path& dst,
                           int n_shards = 1, double perturb = 0) {
    namespace fs = std::filesystem;
    fs::create_directories(dst);
    for (const auto& e : fs::directory_iterator(src))
        if (e.is_regular_file() && e.path().filename() != "model.safetensors")
            fs::copy_file(e.path(), dst / e.path().filename());
    const auto store = io::open_safetensors(src / "model.safetensors");
    const std::vector<std::string> names = store->names();
    if (n_shards <= 1)
        return pickle_save_tensors(*store, names, dst / "pytorch_model.bin", perturb);
    std::string index = "{\"metadata\": {}, \"weight_map\": {";
    for (int s = 0; s < n_shards; ++s) {
        const std::string file = "pytorch_model-0000" + std::to_string(s + 1) + "-of-0000" +
                                 std::to_string(n_shards) + ".bin";
        std::vector<std::string> mine;
        for (size_t i = size_t(s); i < names.size(); i += size_t(n_shards)) {
            mine.push_back(names[i]);
            index += (index.back() == '{' ? "\"" : ", \"") + names[i] + "\": \"" + file + "\"";
        }
        pickle_save_tensors(*store, mine, dst / file, perturb);
    }
    std::ofstream(dst / "pytorch_model.bin.index.json") << index << "}}";
}

}  // namespace sinkscope::testutil
