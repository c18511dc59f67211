// pytorch_model.bin against its safetensors twin: a checkpoint written by libtorch's pickler
// (torch::pickle_save) from the same tensors as a zoo model loads to a model whose outputs are
// bit-identical to the safetensors model's, single-file and sharded (issue 6 acceptance).
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "bin_twin.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/io/model_files.hpp"
#include "sinkscope/model/model.hpp"
#include "testing.hpp"
#include "zoo_golden.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
namespace fs = std::filesystem;

namespace {

// Inputs of a golden directory: ids (+ token types) for text models, pixels for ViT.
ModelInput golden_input(const fs::path& dir) {
    ModelInput input;
    if (fs::exists(dir / "pixel_values.npy")) {
        input.pixel_values =
            testutil::zoo_tensor(dir / "pixel_values.npy").to(at::kFloat).unsqueeze(0);
        return input;
    }
    const std::vector<int32_t> ids = testutil::zoo_ids(dir);
    input.ids = at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong).view({1, -1});
    if (fs::exists(dir / "token_type_ids.npy"))
        input.token_type_ids =
            testutil::zoo_tensor(dir / "token_type_ids.npy").to(at::kLong).view({1, -1});
    return input;
}

// max |a - b| over two tensors of one shape (inf on a shape mismatch).
double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
    if (a.sizes() != b.sizes()) return INFINITY;
    const at::Tensor d = (a.to(at::kDouble) - b.to(at::kDouble)).abs();
    // -inf - -inf is nan: masked scores agree when both are -inf.
    const at::Tensor same = a.to(at::kDouble) == b.to(at::kDouble);
    return d.masked_fill(same, 0).nan_to_num(INFINITY).max().item<double>();
}

class PickleTwin : public ::testing::TestWithParam<const char*> {};

// Logits and every captured hook (attention pattern, scores, q/k/v, residuals) of the .bin twin
// equal the safetensors model's exactly (max |diff| == 0) on every golden input; the sharded
// twin (pytorch_model.bin.index.json over 3 shards) on the first.
TEST_P(PickleTwin, BinEqualsSafetensors) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path zoo = shared / "zoo" / GetParam();
    LoadOptions no_tokenizer;  // weights are what differs; the tokenizer is timed elsewhere
    no_tokenizer.load_tokenizer = false;
    std::optional<Model> ref;
    try {
        ref.emplace(load_model(zoo, no_tokenizer));
    } catch (const UnsupportedError& e) {
        GTEST_SKIP() << "architecture not in this build: " << e.what();
    }
    const Model& reference = *ref;
    testutil::ScratchDir tmp;
    for (int n_shards : {1, 3}) {
        SCOPED_TRACE(n_shards);
        const fs::path twin = tmp / ("twin" + std::to_string(n_shards));
        testutil::write_bin_twin(zoo, twin, n_shards);
        const io::ModelFiles located = io::locate_model(twin);
        ASSERT_EQ(located.weights_format, io::WeightsFormat::PytorchBin);
        const Model m = load_model(twin, no_tokenizer);
        ASSERT_EQ(m.files.size(), size_t(n_shards));
        EXPECT_EQ(m.n_params(), reference.n_params());
        const std::vector<fs::path> inputs = testutil::zoo_inputs(zoo);
        ASSERT_FALSE(inputs.empty());
        for (const fs::path& in : n_shards == 1 ? inputs : std::vector<fs::path>{inputs[0]}) {
            SCOPED_TRACE(in.filename().string());
            const ModelInput input = golden_input(in);
            const ForwardResult want = reference.forward(input, CaptureSpec::all());
            const ForwardResult got = m.forward(input, CaptureSpec::all());
            EXPECT_EQ(max_abs_diff(got.logits, want.logits), 0.0);
            ASSERT_EQ(got.captured.size(), want.captured.size());
            ASSERT_TRUE(got.captured.count(hook_name(HookPoint::Pattern, 0)));
            for (const auto& [hook, t] : want.captured)
                EXPECT_EQ(max_abs_diff(got.captured.at(hook), t), 0.0) << hook;
        }
    }
}

// Every zoo model: those whose family this build lacks skip with the reason.
INSTANTIATE_TEST_SUITE_P(Zoo, PickleTwin,
                         ::testing::Values("qwen2", "mistral", "gemma", "pythia", "gpt2", "phi",
                                           "bert", "roberta", "vit"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
