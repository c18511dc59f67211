// Weights kept as the file stores them and widened at each use (issue 47; detail::Weight in
// src/model/family_common.hpp) against the same checkpoints widened at load
// (RuntimeOptions::widen_at_load): every captured tensor, the logits and the parameters are
// equal bit for bit, for bf16 and f16 safetensors made from the zoo's models (and a Gemma-2 and
// a Phi-3 made by tiny_decoder_ref.py) and for every quantized GGUF of the zoo, at float32,
// float64 and bfloat16. The widening is the load's own conversion, so there is no tolerance:
// one differing bit fails.
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "narrow_copy.hpp"
#include "sinkscope/model/model.hpp"
#include "testing.hpp"
#include "tiny_reference.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
using sinkscope::testutil::write_narrow_copy;
namespace fs = std::filesystem;

namespace {

// Loads `path` twice at `dtype` (weights widened at use, then at load) and expects every output
// of one forward and every parameter to be equal bit for bit.
// `deferred`: the file's matrices are narrower than `dtype` (else they are used as they lie).
void expect_identical(const fs::path& path, ComputeDType dtype, bool deferred = true) {
    SCOPED_TRACE(path.string() + " at " + compute_dtype_name(dtype));
    LoadOptions use, load;
    use.runtime.dtype = load.runtime.dtype = dtype;
    load.runtime.widen_at_load = true;
    const Model at_use = load_model(path, use);
    const Model at_load = load_model(path, load);
    // the test compares what it means to
    EXPECT_EQ(at_use.footprint.numel_deferred > 0, deferred);
    if (!deferred) EXPECT_GT(at_use.footprint.numel_in_place, 0);
    EXPECT_EQ(at_load.footprint.numel_deferred, 0);
    EXPECT_LT(at_use.footprint.numel_copied, at_load.footprint.numel_copied);

    const int64_t T = std::min<int64_t>(24, at_use.config().n_ctx);
    const at::Tensor ids = at::arange(T, at::TensorOptions().dtype(at::kLong))
                               .mul(7)
                               .remainder(at_use.config().d_vocab)
                               .view({1, T});
    const ForwardResult a = at_use.forward(ids, CaptureSpec::all());
    const ForwardResult b = at_load.forward(ids, CaptureSpec::all());
    ASSERT_EQ(a.captured.size(), b.captured.size());
    EXPECT_GT(a.captured.size(), 10u);
    for (const auto& [name, t] : a.captured) {
        ASSERT_TRUE(b.captured.count(name)) << name;
        EXPECT_TRUE(at::equal(t, b.captured.at(name))) << name;
    }
    ASSERT_TRUE(a.logits.defined());
    EXPECT_TRUE(at::equal(a.logits, b.logits));
    {  // the stored weights widened a block of rows at a time on 3 threads: the same bits
        const ForwardWorkers three(3);
        EXPECT_TRUE(at::equal(at_use.forward(ids).logits, a.logits));
    }

    // parameters() widens the deferred weights once and keeps them: the tensors a gradient is
    // taken against are those of the model widened at load, and forwards after it agree too.
    const std::vector<Parameter> pa = at_use.parameters(), pb = at_load.parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
        EXPECT_EQ(pa[i].role, pb[i].role);
        EXPECT_TRUE(at::equal(pa[i].tensor, pb[i].tensor)) << i;
    }
    EXPECT_TRUE(at::equal(at_use.forward(ids).logits, b.logits));
}

}  // namespace

TEST(StoredWeights, Bf16AndF16SafetensorsEqualWideningAtLoad) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    for (const char* name :
         {"qwen2", "mistral", "gemma", "llama3_rope", "pythia", "phi", "gpt2", "bert", "roberta"}) {
        for (const at::ScalarType t : {at::kBFloat16, at::kHalf}) {
            const fs::path dir = tmp / (std::string(name) + (t == at::kHalf ? "_f16" : "_bf16"));
            write_narrow_copy(shared / "zoo" / name, dir, t);
            expect_identical(dir, ComputeDType::Float32);
        }
    }
    expect_identical(tmp / "qwen2_bf16", ComputeDType::Float64);
    // bf16 matrices under a bfloat16 model: the file's bytes as they lie
    expect_identical(tmp / "qwen2_bf16", ComputeDType::BFloat16, /*deferred=*/false);
    expect_identical(tmp / "mistral_bf16", ComputeDType::BFloat16, /*deferred=*/false);
}

TEST(StoredWeights, Gemma2AndPhi3Bf16EqualWideningAtLoad) {
    for (const char* variant : {"gemma2", "phi3"}) {
        testutil::ScratchDir tmp;
        SINKSCOPE_REFERENCE(variant, tmp.path());
        write_narrow_copy(tmp / "model", tmp / "bf16", at::kBFloat16);
        expect_identical(tmp / "bf16", ComputeDType::Float32);
    }
}

// Every quantization type of the zoo: dequantized at each use, the same values as at load.
TEST(StoredWeights, QuantizedGgufEqualsDequantizingAtLoad) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    int n = 0;
    for (const auto& e : fs::recursive_directory_iterator(shared / "zoo/gguf/quant")) {
        if (e.path().extension() != ".gguf") continue;
        expect_identical(e.path(), ComputeDType::Float32);
        ++n;
    }
    EXPECT_GE(n, 10);
    expect_identical(shared / "zoo/gguf/quant/Q4_K/llama_q-Q4_K.gguf", ComputeDType::BFloat16);
}

// The command line: analyze of a bf16 checkpoint writes the same tables, byte for byte, with
// the weights kept in the file (the default) and with --widen-weights.
TEST(StoredWeights, WidenWeightsFlagWritesTheSameTables) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    testutil::ScratchDir tmp;
    const fs::path model = tmp / "qwen2_bf16";
    write_narrow_copy(shared / "zoo/qwen2", model, at::kBFloat16);
    std::vector<std::string> args = {"analyze", "--model",     model.string(), "--samples",
                                     "2",       "--no-report", "--out"};
    std::vector<std::string> kept = args, widened = args;
    kept.push_back((tmp / "kept").string());
    widened.push_back((tmp / "widened").string());
    widened.push_back("--widen-weights");
    const auto a = testutil::run_cli(kept), b = testutil::run_cli(widened);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    const auto bytes = [](const fs::path& p) {
        std::ifstream in(p, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    int compared = 0;
    for (const auto& e : fs::directory_iterator(tmp / "kept")) {
        if (e.path().extension() != ".csv") continue;
        const fs::path other = tmp / "widened" / e.path().filename();
        ASSERT_TRUE(fs::exists(other)) << other;
        EXPECT_EQ(bytes(e.path()), bytes(other)) << e.path().filename();
        ++compared;
    }
    EXPECT_GE(compared, 5);
}
