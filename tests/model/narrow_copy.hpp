// Test helper: a bf16 or f16 copy of a float32 Hugging Face checkpoint (issue 47 tests).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sinkscope/io/weights.hpp"

namespace sinkscope::testutil {

// A copy of the HF folder `src` whose model.safetensors stores every matrix (two or more
// dimensions) as `dtype` (BF16 or F16, rounded to nearest even by libtorch) and the rest as F32.
inline void write_narrow_copy(const std::filesystem::path& src, const std::filesystem::path& dst,
                              at::ScalarType dtype) {
    std::filesystem::create_directories(dst);
    for (const auto& e : std::filesystem::directory_iterator(src))
        if (e.is_regular_file() && e.path().filename() != "model.safetensors")
            std::filesystem::copy_file(e.path(), dst / e.path().filename());
    const auto store = io::open_safetensors(src / "model.safetensors");
    nlohmann::json header = nlohmann::json::object();
    std::string data;
    for (const std::string& name : store->names()) {
        const io::TensorView v = store->get(name);
        at::Tensor t = at::empty(v.shape, at::TensorOptions().dtype(at::kFloat));
        io::convert_to_f32(v, t.data_ptr<float>());
        const bool narrow = v.shape.size() >= 2;
        if (narrow) t = t.to(dtype).contiguous();
        const size_t begin = data.size();
        data.append(static_cast<const char*>(t.data_ptr()), t.nbytes());
        header[name] = {{"dtype", narrow ? (dtype == at::kBFloat16 ? "BF16" : "F16") : "F32"},
                        {"shape", v.shape},
                        {"data_offsets", {begin, data.size()}}};
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    const uint64_t n = text.size();
    std::ofstream out(dst / "model.safetensors", std::ios::binary);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << text << data;
    ASSERT_TRUE(out.good()) << dst;
}

}  // namespace sinkscope::testutil
