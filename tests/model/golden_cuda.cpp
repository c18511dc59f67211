// The zoo on the GPU (--device cuda): every model of ../shared/zoo loaded on CUDA against its
// golden outputs, against the same model on the CPU, and against Hugging Face transformers run on
// the GPU. Every test skips where libtorch has no usable CUDA device (Debian's, CI);
// scripts/gpu-check.sh runs them on a GPU machine (ctest -R Cuda).
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "sinkscope/model/model.hpp"
#include "testing.hpp"
#include "zoo_golden.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
namespace fs = std::filesystem;

namespace {

// The bound. A CUDA forward evaluates the same float32 function as the CPU forward, the float32
// goldens and transformers, from the same float32 inputs (stored bf16 / f16 weights widen
// exactly; RoPE's inverse frequencies come from the CPU on every device), and differs from them
// only in:
// 1. the order and blocking of every sum (cuBLAS products, split-K, the tree reductions of the
//    softmax and norm kernels): gamma_K bounds a sum of K terms in any order (Higham 3.1), with K
//    counted as forward_bound.hpp counts it for the CPU;
// 2. multiply-adds contracted to one rounding: fewer roundings, never more;
// 3. the elementwise math functions. CUDA's expf, tanhf, erff, rsqrtf, sinf and cosf are within
//    2 ulps of the correctly rounded result (CUDA C++ Programming Guide, "Mathematical
//    Functions", single precision without -use_fast_math, as PyTorch is built; bounds from
//    extensive, not exhaustive, tests), so within 2.5 ulps <= 5u of the exact value; the CPU's
//    (SLEEF's u10 functions, glibc) are within that too. A block's path meets at most 6 of them
//    (two norms' rsqrt, RoPE's cos and sin, the softmax's exp, the activation's tanh, erf or exp):
//    6 x 5 = 30 rounded operations per block on each side, which forward_bound.hpp's
//    accumulation counts leave out (`math_terms`; the embedding norm, the final norm and the MLM
//    head fit in one block more).
// So each side is within gamma_(K + 30 n_blocks) * scale of the exact function and the two sides
// within twice that (sides = 2): zoo_tolerances, attention_tol and logit_tol with kCudaMathTerms.
// TF32 (a 10-bit significand) would be far outside it: build_model turns it off on CUDA.
constexpr double kCudaMathTerms = 6 * 5;

LoadOptions on_cuda() {
    LoadOptions o;
    o.runtime.device = DeviceKind::Cuda;
    return o;
}

// hook `p` of every layer of batch row 0, stacked: [n_layers, ...] on the result's device.
at::Tensor stack_layers(const ForwardResult& r, HookPoint p, int64_t n_layers) {
    std::vector<at::Tensor> per_layer;
    for (int64_t l = 0; l < n_layers; ++l) per_layer.push_back(r.captured.at(hook_name(p, l))[0]);
    return at::stack(per_layer);
}

class ZooCuda : public ::testing::TestWithParam<const char*> {
protected:
    void SetUp() override {
        if (!at::hasCUDA())
            GTEST_SKIP()
                << "no CUDA device in this libtorch (scripts/gpu-check.sh runs these tests "
                   "on a GPU machine)";
    }
};

// Loaded on CUDA, the model gives every golden output (logits, attention, scores, hidden states;
// the tokenizer's ids) within the bound above.
TEST_P(ZooCuda, MatchesGoldenOutputs) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path dir = shared / "zoo" / GetParam();
    const Model m = load_model(dir, on_cuda());
    const auto inputs = testutil::zoo_inputs(dir);
    ASSERT_FALSE(inputs.empty());
    for (const auto& in : inputs) testutil::check_zoo_input(m, in, true, kCudaMathTerms);
}

// The GPU run's attention and logits equal the CPU run's within the bound above, and the GPU
// run's tensors are on the GPU (no silent fallback to the CPU).
TEST_P(ZooCuda, AttentionAndLogitsEqualTheCpuRun) {
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path dir = shared / "zoo" / GetParam();
    const Model cpu = load_model(dir);
    const Model gpu = load_model(dir, on_cuda());
    const ModelConfig& c = cpu.config();
    for (const auto& in : testutil::zoo_inputs(dir)) {
        SCOPED_TRACE(in.string());
        const ModelInput input = testutil::zoo_model_input(in);
        const ForwardResult a = cpu.forward(input, CaptureSpec::attention());
        const ForwardResult b = gpu.forward(input, CaptureSpec::attention());
        const at::Tensor pa = stack_layers(a, HookPoint::Pattern, c.n_layers);  // [L, H, T, T]
        const at::Tensor pb = stack_layers(b, HookPoint::Pattern, c.n_layers);
        ASSERT_TRUE(pb.is_cuda());
        ASSERT_TRUE(b.logits.is_cuda());
        const int64_t T = pa.size(-1);
        testutil::expect_close(
            "attention", pb, pa,
            testutil::attention_tol(c, T, testutil::max_abs_scores(a, c), 2, kCudaMathTerms));
        testutil::expect_close(
            "logits", b.logits, a.logits,
            testutil::logit_tol(c, T, testutil::max_abs(a.logits), 2, kCudaMathTerms));
    }
}

// transformers on the GPU (float32, eager attention, TF32 off: scripts/hf_zoo_attention.py, whose
// output folder SINKSCOPE_TRANSFORMERS_DUMPS names) gives the golden attention and logits, and
// sinkscope on the GPU gives transformers', each within the bound above.
TEST_P(ZooCuda, MatchesTransformersOnCuda) {
    const char* dumps = std::getenv("SINKSCOPE_TRANSFORMERS_DUMPS");
    if (dumps == nullptr || *dumps == '\0')
        GTEST_SKIP() << "SINKSCOPE_TRANSFORMERS_DUMPS not set (scripts/gpu-check.sh sets it to "
                        "the output of scripts/hf_zoo_attention.py)";
    SINKSCOPE_REQUIRE_SHARED(shared);
    const fs::path dir = shared / "zoo" / GetParam();
    const Model m = load_model(dir, on_cuda());
    const ModelConfig& c = m.config();
    const auto inputs = testutil::zoo_inputs(dir);
    ASSERT_FALSE(inputs.empty());
    for (const auto& in : inputs) {
        SCOPED_TRACE(in.string());
        const fs::path hf = fs::path(dumps) / GetParam() / in.filename();
        ASSERT_TRUE(fs::exists(hf / "attentions.npy")) << "no transformers output in " << hf;
        const testutil::ZooTolerances tol = testutil::zoo_tolerances(c, in, kCudaMathTerms);
        const at::Tensor hf_attention = testutil::zoo_tensor(hf / "attentions.npy");  // [L,H,T,T]
        const at::Tensor hf_logits = testutil::zoo_tensor(hf / "logits.npy");  // golden's shape
        testutil::expect_close("transformers attentions vs golden", hf_attention,
                               testutil::zoo_tensor(in / "attentions.npy"), tol.attention);
        testutil::expect_close("transformers logits vs golden", hf_logits,
                               testutil::zoo_tensor(in / "logits.npy"), tol.logits);
        const ForwardResult r = m.forward(testutil::zoo_model_input(in), CaptureSpec::attention());
        testutil::expect_close("attentions vs transformers",
                               stack_layers(r, HookPoint::Pattern, c.n_layers), hf_attention,
                               tol.attention);
        testutil::expect_close("logits vs transformers", r.logits.reshape(hf_logits.sizes()),
                               hf_logits, tol.logits);
    }
}

// Every HF directory of the zoo: the decoders, the RoPE scalings, the encoders and the ViT.
INSTANTIATE_TEST_SUITE_P(Zoo, ZooCuda,
                         ::testing::Values("gpt2", "pythia", "phi", "qwen2", "mistral", "gemma",
                                           "llama3_rope", "llama_linear_rope", "llama_dynamic_rope",
                                           "llama_yarn_rope", "bert", "roberta", "vit"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
