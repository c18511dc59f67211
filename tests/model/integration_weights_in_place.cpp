// Float32 weights used in place from the mapped file (WeightLoader, issue 19): which tensors are
// views of the mapping, and how long the mapping lives. Read from /proc/self/maps (Linux).
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include "sinkscope/model/model.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
namespace fs = std::filesystem;

namespace {

// Address ranges at which `file` is mapped into this process now.
std::vector<std::pair<uintptr_t, uintptr_t>> mappings_of(const fs::path& file) {
    const std::string target = fs::canonical(file).string();
    std::vector<std::pair<uintptr_t, uintptr_t>> out;
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        const auto slash = line.find('/');
        if (slash == std::string::npos || line.substr(slash) != target) continue;
        std::istringstream in(line);
        std::string range;
        in >> range;
        const auto dash = range.find('-');
        out.emplace_back(std::stoull(range.substr(0, dash), nullptr, 16),
                         std::stoull(range.substr(dash + 1), nullptr, 16));
    }
    return out;
}

bool inside(const at::Tensor& t, const std::vector<std::pair<uintptr_t, uintptr_t>>& ranges) {
    const auto begin = reinterpret_cast<uintptr_t>(t.data_ptr());
    const uintptr_t end = begin + t.nbytes();
    for (const auto& [lo, hi] : ranges)
        if (begin >= lo && end <= hi) return true;
    return false;
}

}  // namespace

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
