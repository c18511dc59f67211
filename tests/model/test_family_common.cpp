// The shared attention core (family_common.cpp): the blocked inference path against the
// functional full-square path, skipped logits, and the compute-thread option.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "decoder_invariants.hpp"
#include "forward_bound.hpp"
#include "random_weights.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/gradients.hpp"
#include "sinkscope/model/model.hpp"
#include "tensor_tolerance.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
using testutil::MemoryWeightStore;
using testutil::source_of;

namespace {

// 300 tokens: two query blocks of kQueryBlock = 256, the second one partial.
std::vector<int32_t> long_ids(int64_t T, int64_t d_vocab) {
    std::vector<int32_t> ids(static_cast<size_t>(T));
    for (int64_t i = 0; i < T; ++i) ids[static_cast<size_t>(i)] = int32_t((i * 7 + 3) % d_vocab);
    return ids;
}

// The tiny config of `arch` with room for 320 positions (learned position tables) and
// `overrides`.
ModelConfig config_with(const std::string& arch, const nlohmann::json& overrides = {}) {
    nlohmann::json j = testutil::tiny_config_json(find_architecture(arch));
    j["max_position_embeddings"] = 320;
    j["n_positions"] = 320;
    for (const auto& [k, v] : overrides.items()) j[k] = v;
    return config_from_hf_json(j, "tiny config.json (" + arch + ")");
}

// The inference forward (query blocks, keys a causal block cannot see skipped, scale inside the
// product, outputs written in place) gives the functional full-square forward's logits, scores
// and pattern within the float32 bounds of two forwards in different summation orders; the
// masked entries are exactly -inf / 0 on both sides.
void expect_blocked_equals_full_square(const ModelConfig& c, int64_t T) {
    const MemoryWeightStore s = testutil::random_weights(c);
    const Model m = build_model(c, source_of(s));
    const std::vector<int32_t> ids = long_ids(T, c.d_vocab);
    const ForwardResult fast = m.forward(ids, CaptureSpec::attention());
    ForwardResult full;
    {
        GradientScope scope(m);  // records autograd: the functional path of attend()
        full = m.forward(ids, CaptureSpec::attention());
    }
    const double tol_logits = testutil::logit_tol(c, T, testutil::max_abs(full.logits));
    testutil::expect_close(c.architecture + " logits", fast.logits, full.logits.detach(),
                           tol_logits);
    const double max_score = testutil::max_abs_scores(full, c);
    const double tol_pattern = testutil::attention_tol(c, T, max_score);
    // Scores of the last layer: within the float32 bound of the path up to them (both sides).
    const double tol_scores = 2.0 * testutil::f32_accumulation_bound(
                                        testutil::pattern_terms(c, T, c.n_layers - 1), max_score);
    for (int64_t l = 0; l < c.n_layers; ++l) {
        const std::string L = std::to_string(l);
        const at::Tensor pf = fast.captured.at(hook_name(HookPoint::Pattern, l));
        const at::Tensor pr = full.captured.at(hook_name(HookPoint::Pattern, l)).detach();
        testutil::expect_close(c.architecture + " pattern " + L, pf, pr, tol_pattern);
        const at::Tensor sf = fast.captured.at(hook_name(HookPoint::AttnScores, l));
        const at::Tensor sr = full.captured.at(hook_name(HookPoint::AttnScores, l)).detach();
        testutil::expect_close(c.architecture + " scores " + L, sf, sr, tol_scores);
        // exact identities: the same entries are masked, with -inf scores and 0 weights
        EXPECT_TRUE(at::equal(at::isinf(sf), at::isinf(sr))) << "layer " << l;
        EXPECT_TRUE(at::equal(pf.masked_select(at::isinf(sf)),
                              at::zeros({at::isinf(sf).sum().item<int64_t>()})))
            << "layer " << l;
    }
    // Without capture the blocks use scratch buffers instead of the captured squares.
    const ForwardResult bare = m.forward(ids);
    testutil::expect_close(c.architecture + " logits without capture", bare.logits,
                           full.logits.detach(), tol_logits);
}

// Products over more than kLinearBlockRows output features (an MLP of 1100, a vocabulary of
// 1300: blocks of 512, the last partial) split over 1, 2, 3 and 5 threads give the same bits:
// the blocks do not follow the thread count (issue 47). Float32 and float64.
TEST(ForwardWorkers, LinearBlocksGiveTheSameBitsForAnyThreadCount) {
    for (const ComputeDType dtype : {ComputeDType::Float32, ComputeDType::Float64}) {
        SCOPED_TRACE(compute_dtype_name(dtype));
        const ModelConfig c =
            config_with("llama", {{"intermediate_size", 1100}, {"vocab_size", 1300}});
        const MemoryWeightStore s = testutil::random_weights(c);
        RuntimeOptions rt;
        rt.dtype = dtype;
        const Model m = build_model(c, source_of(s), rt);
        const std::vector<int32_t> ids = long_ids(40, c.d_vocab);
        ForwardResult one;
        {
            const ForwardWorkers w(1);
            EXPECT_EQ(forward_workers(), 1);
            one = m.forward(ids, CaptureSpec::all());
        }
        ASSERT_TRUE(one.logits.defined());
        for (const int n : {2, 3, 5}) {
            SCOPED_TRACE(n);
            const ForwardWorkers w(n);
            EXPECT_EQ(forward_workers(), n);
            const ForwardResult r = m.forward(ids, CaptureSpec::all());
            EXPECT_TRUE(at::equal(r.logits, one.logits));
            ASSERT_EQ(r.captured.size(), one.captured.size());
            for (const auto& [name, t] : one.captured)
                EXPECT_TRUE(at::equal(r.captured.at(name), t)) << name;
        }
    }
}

// forward_workers(): compute_threads() unless a ForwardWorkers of this thread says otherwise
// (innermost wins, restored when it ends); forward_share splits the compute threads.
TEST(ForwardWorkers, ScopedCountAndShares) {
    set_compute_threads(4);
    EXPECT_EQ(forward_workers(), 4);
    {
        const ForwardWorkers a(3);
        EXPECT_EQ(forward_workers(), 3);
        {
            const ForwardWorkers b(0);  // at least 1
            EXPECT_EQ(forward_workers(), 1);
        }
        EXPECT_EQ(forward_workers(), 3);
        std::thread([] { EXPECT_EQ(forward_workers(), 4); }).join();  // this thread's only
    }
    EXPECT_EQ(forward_workers(), 4);
    EXPECT_EQ(forward_share(1), 4);
    EXPECT_EQ(forward_share(2), 2);
    EXPECT_EQ(forward_share(3), 1);
    EXPECT_EQ(forward_share(8), 1);
    set_compute_threads(1);
}

// Llama with GQA, d_head 6: scale 1/sqrt(6) (not a power of two: GEMM's alpha).
TEST(AttendBlocked, LlamaNonPowerOfTwoScale) {
    expect_blocked_equals_full_square(config_with("llama"), 300);
}

// d_head 4: scale 1/2, folded into q exactly.
TEST(AttendBlocked, LlamaPowerOfTwoScale) {
    expect_blocked_equals_full_square(config_with("llama", {{"head_dim", 4}}), 300);
}

// Mistral's sliding window: blocks also skip keys left of the window (window 100 < T).
TEST(AttendBlocked, MistralSlidingWindow) {
    expect_blocked_equals_full_square(config_with("mistral", {{"sliding_window", 100}}), 300);
}

// Gemma-2: soft-capped scores, local (window) and global layers.
TEST(AttendBlocked, Gemma2SoftcapAndWindowLayers) {
    expect_blocked_equals_full_square(config_with("gemma2", {{"sliding_window", 100}}), 300);
}

// GPT-2 (learned positions, self_attention()): the same blocked path through the LayerNorm
// families.
TEST(AttendBlocked, Gpt2) {
    expect_blocked_equals_full_square(config_with("gpt2"), 300);
}

// Without logits the head is not run: logits undefined, every captured hook bit-identical to a
// forward that computes them.
TEST(ForwardLogits, SkippedWhenNotWanted) {
    for (const char* arch : {"llama", "gemma2", "gpt2", "bert"}) {
        const ModelConfig c = testutil::tiny_config(arch);
        const MemoryWeightStore s = testutil::random_weights(c);
        const Model m = build_model(c, source_of(s));
        const std::vector<int32_t> ids = long_ids(9, c.d_vocab);
        const ForwardResult with = m.forward(ids, CaptureSpec::attention());
        const ForwardResult without = m.forward(ids, CaptureSpec::attention().without_logits());
        ASSERT_TRUE(with.logits.defined()) << arch;
        EXPECT_FALSE(without.logits.defined()) << arch;
        ASSERT_EQ(with.captured.size(), without.captured.size()) << arch;
        for (const auto& [name, t] : with.captured)
            EXPECT_TRUE(at::equal(t, without.captured.at(name))) << arch << " " << name;
    }
}

// Captured squares of 32 MiB or more come from the pool of release_capture_buffers (model.hpp):
// a buffer a live result still holds is never handed to another forward, a released one is
// (its old contents overwritten everywhere, masked keys included), and the captures equal those
// of a forward into fresh memory. 4 heads x 1600^2 float32 = 41 MB a square (1460^2: 34 MB).
TEST(CaptureBuffers, ReusedOnlyWhenFree) {
    const ModelConfig c = config_with("llama", {{"max_position_embeddings", 2048}});
    const MemoryWeightStore s = testutil::random_weights(c);
    const Model m = build_model(c, source_of(s));
    const std::vector<int32_t> ids = long_ids(1600, c.d_vocab);
    const std::string pattern = hook_name(HookPoint::Pattern, 0),
                      scores = hook_name(HookPoint::AttnScores, 1);
    release_capture_buffers();
    std::optional<ForwardResult> a = m.forward(ids, CaptureSpec::attention().without_logits());
    const at::Tensor a_pattern = a->captured.at(pattern).clone();
    const at::Tensor a_scores = a->captured.at(scores).clone();
    std::optional<ForwardResult> b = m.forward(ids, CaptureSpec::attention().without_logits());
    for (const auto& [name, t] : b->captured)  // a is alive: none of its buffers reused
        for (const auto& [other, u] : a->captured)
            ASSERT_NE(t.data_ptr(), u.data_ptr()) << name << " " << other;
    EXPECT_TRUE(at::equal(a->captured.at(pattern), a_pattern));
    std::vector<const void*> earlier;
    for (const auto* r : {&*a, &*b})
        for (const auto& [name, t] : r->captured) earlier.push_back(t.data_ptr());
    a.reset();
    b.reset();
    // A shorter input (0.83x the entries) written into released buffers.
    const std::vector<int32_t> shorter(ids.begin(), ids.begin() + 1460);
    const ForwardResult reused = m.forward(shorter, CaptureSpec::attention().without_logits());
    EXPECT_NE(std::find(earlier.begin(), earlier.end(), reused.captured.at(pattern).data_ptr()),
              earlier.end())
        << "a released buffer was not reused";
    const ForwardResult again = m.forward(ids, CaptureSpec::attention().without_logits());
    EXPECT_TRUE(at::equal(again.captured.at(pattern), a_pattern));
    EXPECT_TRUE(at::equal(again.captured.at(scores), a_scores));
    // The same shorter input into fresh memory (every pooled buffer is held): the same bits.
    const ForwardResult fresh = m.forward(shorter, CaptureSpec::attention().without_logits());
    EXPECT_TRUE(at::equal(reused.captured.at(pattern), fresh.captured.at(pattern)));
    EXPECT_TRUE(at::equal(reused.captured.at(scores), fresh.captured.at(scores)));
    release_capture_buffers();
}

// set_compute_threads: the count resolved (0 = every core, negative refused) for the threads
// that run inputs side by side, while libtorch and OpenBLAS (when present) stay at one thread,
// whose results do not follow a thread count (issue 46); set_intra_op_threads widens them.
TEST(ComputeThreads, ForwardsRunOnOneLibtorchAndOneBlasThread) {
    using GetThreads = int (*)();
    auto* openblas = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int n : {3, 0, 1}) {
        SCOPED_TRACE(n);
        EXPECT_EQ(set_compute_threads(n), n > 0 ? n : cores);
        EXPECT_EQ(compute_threads(), n > 0 ? n : cores);
        EXPECT_EQ(at::get_num_threads(), 1);
        if (openblas) {
            EXPECT_EQ(openblas(), 1);
        }
    }
    set_intra_op_threads(2);
    EXPECT_EQ(at::get_num_threads(), 2);
    if (openblas) {
        EXPECT_EQ(openblas(), 2);
    }
    EXPECT_THROW(set_compute_threads(-1), UsageError);
    set_compute_threads(1);
    EXPECT_EQ(at::get_num_threads(), 1);
}

}  // namespace
