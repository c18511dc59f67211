// Dequantization of the ten quantized GGUF files of ../shared/zoo/gguf/quant against the sha256 of
// gguf-py's float32 dequantization (golden/manifest.json, see ../shared/zoo/gguf/README.md): every
// tensor of every file must match bit for bit (only hashes are stored, so the first differing
// tensor is reported by name).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "sinkscope/core/sha256.hpp"
#include "sinkscope/io/gguf.hpp"
#include "sinkscope/io/weights.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::io;
namespace fs = std::filesystem;

namespace {
constexpr const char* k_quant_types[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
                                         "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"};
}

class GgufQuantGolden : public ::testing::TestWithParam<const char*> {};

// Each tensor's dequantized float32 values (row-major, little-endian) hash to the manifest's
// dequant_f32_sha256, its dtype is the manifest's ggml_type and its shape the numpy shape.
TEST_P(GgufQuantGolden, DequantizedTensorsMatchGgufPySha256) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const std::string type = GetParam();
    const fs::path dir = shared / "zoo" / "gguf" / "quant" / type;
    const nlohmann::json manifest =
        nlohmann::json::parse(std::ifstream(dir / "golden" / "manifest.json"));
    const auto& listed = manifest.at("weights").at("tensors");
    auto store = open_gguf_weights(dir / ("llama_q-" + type + ".gguf"));
    ASSERT_EQ(store->names().size(), listed.size());
    int n_quant = 0;
    for (const auto& t : listed) {
        const std::string name = t.at("name");
        const TensorView v = store->get(name);
        ASSERT_STREQ(weight_dtype_name(v.dtype), t.at("ggml_type").get<std::string>().c_str())
            << name;
        ASSERT_EQ(v.shape, t.at("numpy_shape").get<std::vector<int64_t>>()) << name;
        const std::vector<float> x = to_f32(v);
        Sha256 h;
        h.update(x.data(), x.size() * sizeof(float));
        // Stop at the first mismatch: later tensors say nothing more about the decoder.
        ASSERT_EQ(h.hex_digest(), t.at("dequant_f32_sha256").get<std::string>())
            << "first differing tensor: " << name << " (" << t.at("ggml_type") << ")";
        n_quant += t.at("ggml_type") == type;
    }
    EXPECT_EQ(n_quant, 9);  // README: all nine 2-D tensors are stored in TYPE
}

INSTANTIATE_TEST_SUITE_P(Quant, GgufQuantGolden, ::testing::ValuesIn(k_quant_types),
                         [](const auto& info) { return std::string(info.param); });
