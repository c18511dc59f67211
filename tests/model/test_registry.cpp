// Every registered architecture on random weights generated from the registry (STYLE.md: a tiny
// random-weight test per architecture): every role it names is read with its shape checked, the
// model runs, and every hook it declares is captured with the shape of hooks.hpp.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "random_weights.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/registry.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
using testutil::MemoryWeightStore;

namespace {

WeightSource source_of(const MemoryWeightStore& s) {
    return WeightSource{&s, WeightFormat::HuggingFace, s.file};
}

std::vector<std::string> registered_names() {
    std::vector<std::string> out;
    for (const auto& a : architectures()) out.push_back(a.name);
    return out;
}

constexpr int64_t kBatch = 2;
const std::vector<int64_t> kIds{1, 5, 9, 2, 33, 17, 4, 8};  // < d_vocab 40 of the tiny config

// A seeded input of kBatch sequences: token ids (text) or pixel_values in [-1, 1] (vision).
ModelInput tiny_input(const ModelConfig& c) {
    ModelInput in;
    if (c.is_vision()) {
        at::manual_seed(3);
        in.pixel_values = at::rand({kBatch, c.n_channels, c.image_size, c.image_size}) * 2.0 - 1.0;
    } else {
        const at::Tensor row = at::tensor(kIds, at::TensorOptions().dtype(at::kLong));
        in.ids = at::stack({row, row.flip(0)});  // [batch, pos]
    }
    return in;
}

// Shape of every hook of hooks.hpp for a forward of kBatch inputs of n_tokens positions.
std::map<std::string, std::vector<int64_t>> expected_hook_shapes(const ModelConfig& c,
                                                                 int64_t n_tokens) {
    const int64_t B = kBatch, T = n_tokens, D = c.d_model, H = c.n_heads, Hkv = c.n_kv_heads,
                  dh = c.d_head;
    std::map<std::string, std::vector<int64_t>> out;
    for (int p = 0; p < kNumHookPoints; ++p) {
        const auto point = static_cast<HookPoint>(p);
        std::vector<int64_t> shape;
        switch (point) {
            case HookPoint::Embed:
            case HookPoint::ResidPre:
            case HookPoint::ResidMid:
            case HookPoint::ResidPost:
            case HookPoint::FinalNorm:
                shape = {B, T, D};
                break;
            case HookPoint::Q:
            case HookPoint::RotQ:
            case HookPoint::Z:
                shape = {B, T, H, dh};
                break;
            case HookPoint::K:
            case HookPoint::V:
            case HookPoint::RotK:
                shape = {B, T, Hkv, dh};
                break;
            case HookPoint::AttnScores:
            case HookPoint::Pattern:
                shape = {B, H, T, T};
                break;
        }
        if (!is_layer_hook(point))
            out[hook_name(point)] = shape;
        else
            for (int64_t l = 0; l < c.n_layers; ++l) out[hook_name(point, l)] = shape;
    }
    return out;
}

int64_t n_stored(const MemoryWeightStore& s) {
    int64_t n = 0;
    for (const auto& [name, e] : s.tensors) n += static_cast<int64_t>(e.values.size());
    return n;
}

class EveryRegisteredArchitecture : public ::testing::TestWithParam<std::string> {};

}  // namespace

// The generator covers the registry: each role the architecture names in HF layout has a tensor
// (unless the config does not store it: tied output, disabled q/k/v bias), and the model reads
// every one of them exactly once (the parameter count is their sum).
TEST_P(EveryRegisteredArchitecture, ReadsEveryNamedRoleOnce) {
    const ModelConfig c = testutil::tiny_config(GetParam());
    const ArchitectureInfo& a = find_architecture(c.architecture);
    const MemoryWeightStore s = testutil::random_weights(c);
    int n_roles = 0;
    for (int ri = 0; ri < kNumTensorRoles; ++ri) {
        const auto role = static_cast<TensorRole>(ri);
        const std::string n0 = tensor_name(a, WeightFormat::HuggingFace, role, 0);
        if (n0.empty() || !testutil::role_stored(c, role)) continue;
        ++n_roles;
        EXPECT_TRUE(s.has(n0)) << n0;
    }
    EXPECT_GT(n_roles, 0);
    EXPECT_EQ(build_model(c, source_of(s)).n_params(), n_stored(s));
}

// The model builds, runs a batch, and captures exactly the hooks it declares (list_hooks), each
// with the shape of hooks.hpp and finite values (scores: finite or -inf where masked).
TEST_P(EveryRegisteredArchitecture, ForwardCapturesEveryDeclaredHook) {
    const ModelConfig c = testutil::tiny_config(GetParam());
    const MemoryWeightStore s = testutil::random_weights(c, 13);
    const Model m = build_model(c, source_of(s));
    const ForwardResult r = m.forward(tiny_input(c), CaptureSpec::all());
    const int64_t T = c.is_vision() ? c.n_ctx : static_cast<int64_t>(kIds.size());
    const std::vector<int64_t> logits_shape = c.is_vision()
                                                  ? std::vector<int64_t>{kBatch, c.d_vocab}
                                                  : std::vector<int64_t>{kBatch, T, c.d_vocab};
    EXPECT_EQ(r.logits.sizes().vec(), logits_shape);
    EXPECT_TRUE(at::isfinite(r.logits).all().item<bool>());
    const auto shapes = expected_hook_shapes(c, T);
    std::set<std::string> declared, got;
    for (const auto& n : list_hooks(c)) declared.insert(n);
    for (const auto& [n, t] : r.captured) got.insert(n);
    EXPECT_EQ(got, declared);
    for (const auto& [n, t] : r.captured) {
        ASSERT_TRUE(shapes.count(n)) << n;
        EXPECT_EQ(t.sizes().vec(), shapes.at(n)) << n;
        const at::Tensor ok = n.find("hook_attn_scores") != std::string::npos
                                  ? at::isfinite(t).logical_or(at::isneginf(t))
                                  : at::isfinite(t);
        EXPECT_TRUE(ok.all().item<bool>()) << n;
    }
}

// Every stored tensor is required: without any one of them the build is an InputError (so a role
// the model silently skipped, or read under another name, would fail here).
TEST_P(EveryRegisteredArchitecture, EveryTensorIsRequired) {
    const ModelConfig c = testutil::tiny_config(GetParam());
    const MemoryWeightStore s = testutil::random_weights(c);
    ASSERT_NO_THROW(build_model(c, source_of(s)));
    for (const auto& [name, e] : s.tensors) {
        MemoryWeightStore cut = s;
        cut.tensors.erase(name);
        EXPECT_THROW(build_model(c, source_of(cut)), InputError) << "without " << name;
    }
}

// Every stored tensor's shape is checked: one more row in any of them is an InputError.
TEST_P(EveryRegisteredArchitecture, EveryShapeIsChecked) {
    const ModelConfig c = testutil::tiny_config(GetParam());
    const MemoryWeightStore s = testutil::random_weights(c);
    for (const auto& [name, e] : s.tensors) {
        MemoryWeightStore bad = s;
        auto& entry = bad.tensors.at(name);
        const size_t row = entry.values.size() / static_cast<size_t>(entry.shape[0]);
        entry.shape[0] += 1;
        entry.values.resize(entry.values.size() + row, 0.5f);
        EXPECT_THROW(build_model(c, source_of(bad)), InputError) << "shape of " << name;
    }
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryRegisteredArchitecture,
                         ::testing::ValuesIn(registered_names()));
