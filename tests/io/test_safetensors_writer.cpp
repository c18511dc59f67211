// io/safetensors_writer.hpp: files read back by the project's safetensors reader with the same
// names, dtypes, shapes and bytes; the header is padded to 8 bytes; equal inputs, equal bytes.
#include <gtest/gtest.h>

#include <cstring>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/safetensors_writer.hpp"
#include "sinkscope/io/weights.hpp"
#include "testing.hpp"

using namespace sinkscope;

namespace {
std::string floats(std::initializer_list<float> v) {
    std::string s(v.size() * sizeof(float), '\0');
    std::memcpy(s.data(), std::data(v), s.size());
    return s;
}
}  // namespace

TEST(SafetensorsWriter, RoundTripsThroughTheReader) {
    const std::vector<io::TensorBytes> tensors = {
        {"b.weight", io::WeightDType::F32, {2, 3}, floats({1, 2, 3, 4, 5, 6.5f})},
        {"a.bias", io::WeightDType::F32, {1}, floats({-0.25f})}};
    const std::string bytes = io::safetensors_file(tensors, {{"format", "pt"}});
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);  // little-endian header length (safetensors format)
    EXPECT_EQ(n % 8, 0u);
    EXPECT_EQ(bytes.size(), 8 + n + 7 * sizeof(float));
    testutil::ScratchDir tmp;
    write_file_atomic(tmp / "m.safetensors", bytes);
    const auto store = io::open_safetensors(tmp / "m.safetensors");
    EXPECT_EQ(store->names().size(), 2u);
    for (const auto& t : tensors) {
        const io::TensorView v = store->get(t.name);
        EXPECT_EQ(v.dtype, t.dtype);
        EXPECT_EQ(v.shape, t.shape);
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(v.data), v.n_bytes), t.bytes);
    }
    EXPECT_EQ(io::safetensors_file(tensors, {{"format", "pt"}}), bytes);
}

TEST(SafetensorsWriter, RefusesInconsistentTensors) {
    EXPECT_THROW(io::safetensors_file({{"x", io::WeightDType::F32, {3}, floats({1, 2})}}),
                 InternalError);
    EXPECT_THROW(io::safetensors_file({{"x", io::WeightDType::F32, {1}, floats({1})},
                                       {"x", io::WeightDType::F32, {1}, floats({1})}}),
                 InternalError);
}
