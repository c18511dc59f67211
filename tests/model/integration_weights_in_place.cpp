// Float32 weights used in place from the mapped file (WeightLoader, issue 19): which tensors are
// views of the mapping, and how long the mapping lives. Read from /proc/self/maps (Linux).
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include "mapped_ranges.hpp"
#include "sinkscope/model/model.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
using sinkscope::testutil::inside;
using sinkscope::testutil::mappings_of;
namespace fs = std::filesystem;

// A float32 safetensors Llama on the CPU in float32: every matrix (embeddings, projections) is
// a view of the file's mapping (HF stores Q/K rows as the model uses them; the small norm
// vectors are copied, as they are scaled on load), and the mapping lives as long as the model.
TEST(WeightsInPlace, Float32SafetensorsMatricesAreTheMappedFile) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path dir = shared / "models/tinystories656K";
    const fs::path file = dir / "model.safetensors";
    const size_t before = mappings_of(file).size();
    {
        const Model m = load_model(dir);
        const auto ranges = mappings_of(file);
        ASSERT_GT(ranges.size(), before) << file << " is not mapped while its model lives";
        int matrices = 0;
        for (const Parameter& p : m.parameters()) {
            if (p.tensor.dim() < 2) continue;
            ++matrices;
            EXPECT_TRUE(inside(p.tensor, ranges))
                << "parameter of role " << int(p.role) << ", layer " << p.layer
                << " is a copy, not a view of " << file;
        }
        EXPECT_GT(matrices, 0);
    }
    EXPECT_EQ(mappings_of(file).size(), before) << file << " stays mapped after its model is gone";

    // bfloat16 converts every tensor: nothing of the file stays mapped after the load.
    LoadOptions bf16;
    bf16.runtime.dtype = ComputeDType::BFloat16;
    const Model m16 = load_model(dir, bf16);
    EXPECT_EQ(mappings_of(file).size(), before) << "a bfloat16 model keeps " << file << " mapped";
    EXPECT_FALSE(m16.parameters().empty());
}

// llama2.c stores Q/K rows interleaved: those are permuted copies, every other matrix a view.
TEST(WeightsInPlace, Llama2cQkRowsAreCopiesTheRestViews) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path file = shared / "models/stories260K/stories260K.bin";
    LoadOptions o;
    o.tokenizer = shared / "models/stories260K/tok512.bin";
    const Model m = load_model(file, o);
    const auto ranges = mappings_of(file);
    ASSERT_FALSE(ranges.empty());
    int views = 0, copies = 0;
    for (const Parameter& p : m.parameters()) {
        if (p.tensor.dim() < 2) continue;
        const bool qk = p.role == TensorRole::AttnQ || p.role == TensorRole::AttnK;
        EXPECT_EQ(inside(p.tensor, ranges), !qk) << "role " << int(p.role) << ", layer " << p.layer;
        (qk ? copies : views) += 1;
    }
    EXPECT_GT(views, 0);
    EXPECT_GT(copies, 0);
}
