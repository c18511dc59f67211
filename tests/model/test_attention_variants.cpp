// The attention functions other than softmax (model/config.hpp AttentionFunction, `train
// --attention`): each forward against a float64 recomputation by the definition (softmax_one:
// exp(s_j) / (1 + sum_k exp(s_k)) over the visible keys; sigmoid: 1 / (1 + exp(-s_j)) per visible
// key, masked keys 0), on the inference (query-blocked) path and the functional path gradients
// run, with and without captured squares; the key in config.json and the training config, and a
// trained checkpoint read back by load_model with its function; sequences packed without BOS;
// the learnable key/value slot (`train --kv-bias`) against the same definition with the slot as
// one more key, a zero slot as softmax_one bit for bit, and its checkpoint read back.
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/model/config.hpp"
#include "sinkscope/model/gradients.hpp"
#include "sinkscope/model/hooks.hpp"
#include "sinkscope/model/model.hpp"
#include "sinkscope/model/train.hpp"
#include "testing.hpp"
#include "tolerance.hpp"
#include "trained_checkpoint.hpp"

using namespace sinkscope;
using namespace sinkscope::model;
namespace fs = std::filesystem;

namespace {

using testutil::kU32;

// Longer than one query block of the attention core (256 rows): the inference path runs two
// blocks, the second against keys [0, 300) only up to each row's diagonal.
constexpr int64_t kT = 300;

// A tiny model of `arch` ("tiny": Llama, "tiny-gpt2") with seeded random weights and attention
// function `f`. init_std 0.5 gives scores of both signs and magnitudes up to ~10s, so
// softmax_one's shift m = max(0, max s) takes both branches (checked where it matters).
std::unique_ptr<Trainer> random_model(const std::string& preset, AttentionFunction f) {
    TrainConfig c = train_preset(preset);
    c.attention = f;
    c.seq_len = kT;  // GPT-2's learned positions: n_positions = seq_len
    c.init_std = 0.5;
    return std::make_unique<Trainer>(c, hf_config_json(c, 257, 256), 11);
}

at::Tensor random_ids(int64_t n, uint64_t seed) {
    at::manual_seed(seed);
    return at::randint(0, 257, {1, n}, at::TensorOptions().dtype(at::kLong));
}

// The function's weights by its definition, in float64, of scores s [.., key] (masked = -inf).
at::Tensor reference_weights(const at::Tensor& s, AttentionFunction f) {
    const at::Tensor e = at::exp(s);  // |s| stays far below float64's exp range here
    switch (f) {
        case AttentionFunction::Softmax:
            return e / e.sum(-1, true);
        case AttentionFunction::SoftmaxOne:
            return e / (1.0 + e.sum(-1, true));
        case AttentionFunction::Sigmoid:
            return 1.0 / (1.0 + at::exp(-s));
    }
    return {};
}

// Relative error bound of one float32 weight computed from the same float32 scores, per row
// [.., 1] of scores s (float64, masked = -inf; n visible keys). softmax / softmax_one:
// testutil::f32_softmax_rel_bound over the row's keys (and the zero logit: n + 1 terms, the range
// measured from the shift m = max(0, max s) down to min(0, min s)). sigmoid: exp within 1 ulp (2u;
// its error enters 1 / (1 + e) multiplied by e / (1 + e) <= 1), the add and the division u each,
// one u more for the second-order terms: 5u.
at::Tensor weight_rel_bound(const at::Tensor& s, AttentionFunction f) {
    const at::Tensor visible = s.isfinite();
    const at::Tensor n = visible.sum(-1, true).to(at::kDouble);
    const at::Tensor hi = at::amax(s, {-1}, true);
    const at::Tensor lo = at::amin(s.masked_fill(visible.logical_not(), INFINITY), {-1}, true);
    switch (f) {
        case AttentionFunction::Softmax:
            return (hi - lo + n + 4.0) * kU32;
        case AttentionFunction::SoftmaxOne:
            return (hi.clamp_min(0) - lo.clamp_max(0) + n + 1.0 + 4.0) * kU32;
        case AttentionFunction::Sigmoid:
            return at::full_like(hi, 5.0 * kU32);
    }
    return {};
}

// Below the smallest normal float32 a relative bound does not hold; the absolute error there is
// at most its spacing, 2^-149 per rounding, far below 2^-126.
constexpr double kSubnormalAbs = 0x1p-126;

// max over entries of |got - ref| / (rel * |ref| + kSubnormalAbs): <= 1 when every entry is within
// its bound; the worst index goes to the message.
std::pair<double, std::string> worst(const at::Tensor& got, const at::Tensor& ref,
                                     const at::Tensor& tol) {
    const at::Tensor ratio = ((got - ref).abs() / (tol + kSubnormalAbs)).flatten();
    const int64_t k = ratio.argmax().item<int64_t>();
    std::ostringstream s;
    s << "worst flat index " << k << ": got " << got.flatten()[k].item<double>() << ", reference "
      << ref.flatten()[k].item<double>() << ", bound "
      << (tol.flatten()[k].item<double>() + kSubnormalAbs);
    return {ratio[k].item<double>(), s.str()};
}

// [batch, H, pos, d] f64 of k or v [batch, pos, n_kv, d] (query head h reads kv head h / group).
at::Tensor by_query_head(const at::Tensor& t, int64_t n_heads) {
    const at::Tensor th = t.to(at::kDouble).transpose(1, 2);
    return n_heads == t.size(2) ? th : th.repeat_interleave(n_heads / t.size(2), 1);
}

std::vector<std::string> hooks_of(std::initializer_list<HookPoint> points) {
    std::vector<std::string> out;
    for (HookPoint p : points) out.push_back(hook_glob(p));
    return out;
}

// A forward of m on kT random ids (seed `seed`) capturing `hooks`: inference, or with gradients
// recorded (the functional path), the captures detached.
ForwardResult capture(const Model& m, const std::vector<std::string>& hooks, bool gradients,
                      uint64_t seed) {
    const at::Tensor ids = random_ids(kT, seed);
    const CaptureSpec spec = CaptureSpec(hooks).without_logits();
    if (!gradients) return m.forward(ids, spec);
    GradientScope scope(m);
    ForwardResult r = m.forward(ids, spec);
    for (auto& kv : r.captured) kv.second = kv.second.detach();
    return r;
}

class AttentionVariant
    : public ::testing::TestWithParam<std::tuple<std::string, AttentionFunction>> {
protected:
    void SetUp() override {
        trainer_ = random_model(std::get<0>(GetParam()), std::get<1>(GetParam()));
    }
    const Model& model() const { return trainer_->model(); }
    AttentionFunction function() const { return std::get<1>(GetParam()); }
    ForwardResult run(const std::vector<std::string>& hooks, bool gradients) const {
        return capture(model(), hooks, gradients, 21);
    }

    // hook_pattern against the function of the captured hook_attn_scores (the scores it was
    // computed from), entry by entry; masked keys exactly 0.
    void check_pattern(const ForwardResult& r) const {
        const ModelConfig& c = model().config();
        bool shifted = false, unshifted = false;  // softmax_one: both branches of m seen
        for (int64_t l = 0; l < c.n_layers; ++l) {
            const at::Tensor s = r.captured.at(hook_name(HookPoint::AttnScores, l)).to(at::kDouble);
            const at::Tensor p = r.captured.at(hook_name(HookPoint::Pattern, l)).to(at::kDouble);
            const at::Tensor ref = reference_weights(s, function());
            const auto [ratio, where] = worst(p, ref, weight_rel_bound(s, function()) * ref);
            EXPECT_ERROR_WITHIN(ratio, 1.0) << "layer " << l << ": " << where;
            const at::Tensor masked = s.isinf();
            EXPECT_EQ(p.masked_select(masked).abs().max().item<double>(), 0.0) << "layer " << l;
            const at::Tensor sums = p.sum(-1);                // [batch, H, pos]
            if (function() == AttentionFunction::SoftmaxOne)  // the zero logit takes weight
                EXPECT_LT(sums.min().item<double>(), 1.0 - 1e-3) << "layer " << l;
            if (function() == AttentionFunction::Sigmoid)  // no normalisation: far from 1
                EXPECT_GT((sums - 1.0).abs().max().item<double>(), 0.5) << "layer " << l;
            const at::Tensor hi = at::amax(s, {-1});
            shifted = shifted || (hi > 0).any().item<bool>();
            unshifted = unshifted || (hi < 0).any().item<bool>();
        }
        if (function() == AttentionFunction::SoftmaxOne) {
            EXPECT_TRUE(shifted);
            EXPECT_TRUE(unshifted);
        }
    }

    // hook_z against the function recomputed in float64 from hook_rot_q / hook_rot_k, times
    // hook_v. A float32 score is within gamma_{d_head} scale sum_k |q_k k_k| of exact, and a
    // score error ds moves a weight by at most 2 p_j max|ds| (softmax and softmax_one: p_j (ds_j -
    // sum_k p_k ds_k); sigmoid: p_j (1 - p_j) ds_j); the function's own rounding adds rel p_j and
    // pattern x V gamma_T sum_j p_j |v_j|: |dz| <= (2 max|ds| + rel + gamma_T) sum_j p_j |v_j|.
    void check_z(const ForwardResult& r) const {
        const ModelConfig& c = model().config();
        const double scale = c.score_scale();
        const at::Tensor hidden = at::ones({kT, kT}, at::kBool).triu(1);
        for (int64_t l = 0; l < c.n_layers; ++l) {
            // [1, H, T, d_head] each, float64
            const at::Tensor q =
                by_query_head(r.captured.at(hook_name(HookPoint::RotQ, l)), c.n_heads);
            const at::Tensor k =
                by_query_head(r.captured.at(hook_name(HookPoint::RotK, l)), c.n_heads);
            const at::Tensor v =
                by_query_head(r.captured.at(hook_name(HookPoint::V, l)), c.n_heads);
            const at::Tensor s =
                (at::matmul(q, k.transpose(-2, -1)) * scale).masked_fill(hidden, -INFINITY);
            const at::Tensor p = reference_weights(s, function());
            const at::Tensor z_ref = at::matmul(p, v).transpose(1, 2);  // [1, T, H, d]
            const at::Tensor ds = at::amax((at::matmul(q.abs(), k.abs().transpose(-2, -1)) * scale)
                                               .masked_fill(hidden, 0.0),
                                           {-1}, true) *
                                  testutil::gamma_k(double(c.d_head), kU32);  // [1, H, T, 1]
            const at::Tensor rel =
                2.0 * ds + weight_rel_bound(s, function()) + testutil::gamma_k(double(kT), kU32);
            const at::Tensor tol = (rel * at::matmul(p, v.abs())).transpose(1, 2);
            const at::Tensor z = r.captured.at(hook_name(HookPoint::Z, l)).to(at::kDouble);
            // tol is relative to |p| |v|, not |z|: worst() takes it as an absolute bound
            const auto [ratio, where] = worst(z, z_ref, tol);
            EXPECT_ERROR_WITHIN(ratio, 1.0) << "layer " << l << ": " << where;
        }
    }

private:
    std::unique_ptr<Trainer> trainer_;
};

}  // namespace

// The pattern is the function of the captured scores, on the inference path (two query blocks).
TEST_P(AttentionVariant, InferencePatternIsTheFunctionOfTheScores) {
    check_pattern(run(hooks_of({HookPoint::AttnScores, HookPoint::Pattern}), false));
}

// The same on the functional path gradients run (one full square).
TEST_P(AttentionVariant, GradientPathPatternIsTheFunctionOfTheScores) {
    check_pattern(run(hooks_of({HookPoint::AttnScores, HookPoint::Pattern}), true));
}

// z = f(q k^T scale) v on each path, and on the functional path without captured squares (its
// query blocks, the form every training step runs).
TEST_P(AttentionVariant, ZIsTheFunctionTimesValuesOnEveryPath) {
    const auto qkvz = hooks_of({HookPoint::RotQ, HookPoint::RotK, HookPoint::V, HookPoint::Z});
    {
        SCOPED_TRACE("inference");
        check_z(run(qkvz, false));
    }
    {
        SCOPED_TRACE("gradients, no squares captured");
        check_z(run(qkvz, true));
    }
    auto with_pattern = qkvz;
    with_pattern.push_back(hook_glob(HookPoint::Pattern));
    {
        SCOPED_TRACE("gradients, pattern captured");
        check_z(run(with_pattern, true));
    }
}

INSTANTIATE_TEST_SUITE_P(Functions, AttentionVariant,
                         ::testing::Combine(::testing::Values("tiny", "tiny-gpt2"),
                                            ::testing::Values(AttentionFunction::Softmax,
                                                              AttentionFunction::SoftmaxOne,
                                                              AttentionFunction::Sigmoid)),
                         [](const auto& info) {
                             std::string arch =
                                 std::get<0>(info.param) == "tiny" ? "llama" : "gpt2";
                             return arch + "_" + attention_function_name(std::get<1>(info.param));
                         });

// A checkpoint trained with each function reads back through load_model with that function (the
// config.json key) and gives the trained model's logits bit for bit.
TEST(AttentionVariantCheckpoint, TrainedCheckpointLoadsBackWithItsFunction) {
    for (const char* preset : {"tiny", "tiny-gpt2"})
        for (AttentionFunction f : {AttentionFunction::SoftmaxOne, AttentionFunction::Sigmoid}) {
            SCOPED_TRACE(std::string(preset) + " " + attention_function_name(f));
            TrainConfig c = train_preset(preset);
            c.attention = f;
            const nlohmann::json hf = hf_config_json(c, 257, 256);
            EXPECT_EQ(hf.at(kHfAttentionKey), attention_function_name(f));
            Trainer t(c, hf, 7);
            for (int s = 0; s < 3; ++s) {
                const double loss =
                    t.step(random_ids(c.batch * c.seq_len, 100 + s).view({c.batch, c.seq_len}));
                EXPECT_TRUE(std::isfinite(loss)) << s;
            }
            testutil::ScratchDir tmp;
            const Model loaded = testutil::save_and_load(t, hf, tmp.path());
            EXPECT_EQ(loaded.config().attention, f);
            const at::Tensor ids = random_ids(c.seq_len, 5);
            const at::Tensor a = t.model().forward(ids).logits, b = loaded.forward(ids).logits;
            EXPECT_TRUE(at::equal(a, b)) << (a - b).abs().max().item<double>();
            // The same weights read as softmax give other logits: the function is in effect.
            nlohmann::json soft = hf;
            soft.erase(kHfAttentionKey);
            write_file_atomic(tmp / "config.json", soft.dump());
            const Model as_softmax = testutil::load_weights_only(tmp.path());
            EXPECT_EQ(as_softmax.config().attention, AttentionFunction::Softmax);
            EXPECT_FALSE(at::equal(as_softmax.forward(ids).logits, b));
        }
}

// Softmax writes no key (a default run's config.json is what it was before the switch existed);
// an unknown value is one InputError naming the file; encoders refuse another function.
TEST(AttentionVariantConfig, KeyIsReadCheckedAndWrittenOnlyWhenNotSoftmax) {
    const TrainConfig soft = train_preset("tiny");
    EXPECT_FALSE(hf_config_json(soft, 257, 256).contains(kHfAttentionKey));
    EXPECT_FALSE(train_config_json(soft).contains("attention"));
    EXPECT_FALSE(train_config_json(soft).contains("bos"));

    testutil::ScratchDir tmp;
    nlohmann::json hf = hf_config_json(soft, 257, 256);
    hf[kHfAttentionKey] = "relu";
    write_file_atomic(tmp / "config.json", hf.dump());
    try {
        config_from_hf_dir(tmp.path());
        ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
        const std::string what = e.what();
        EXPECT_EQ(e.file(), (tmp / "config.json").string());
        EXPECT_NE(what.find("sinkscope_attention"), std::string::npos) << what;
        EXPECT_NE(what.find("'relu'"), std::string::npos) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
    hf[kHfAttentionKey] = 3;
    EXPECT_THROW(config_from_hf_json(hf, "c.json"), InputError);
    hf[kHfAttentionKey] = "sigmoid";
    EXPECT_EQ(config_from_hf_json(hf, "c.json").attention, AttentionFunction::Sigmoid);

    const nlohmann::json bert = {{"model_type", "bert"},      {"hidden_size", 8},
                                 {"num_hidden_layers", 1},    {"num_attention_heads", 2},
                                 {"intermediate_size", 16},   {"vocab_size", 10},
                                 {kHfAttentionKey, "sigmoid"}};
    nlohmann::json plain = bert;
    plain.erase(kHfAttentionKey);
    EXPECT_EQ(config_from_hf_json(plain, "bert.json").attention, AttentionFunction::Softmax);
    try {
        config_from_hf_json(bert, "bert.json");
        ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("only causal decoders"), std::string::npos)
            << e.what();
    }
}

// The training config carries both switches, round-trips them, and checks their values.
TEST(AttentionVariantConfig, TrainConfigRoundTripsTheSwitches) {
    TrainConfig c = train_preset("tiny");
    c.attention = AttentionFunction::SoftmaxOne;
    c.bos = false;
    const nlohmann::json j = train_config_json(c);
    EXPECT_EQ(j.at("attention"), "softmax_one");
    EXPECT_EQ(j.at("bos"), false);
    const TrainConfig back = train_config_from_json(j, "x");
    EXPECT_EQ(back.attention, AttentionFunction::SoftmaxOne);
    EXPECT_FALSE(back.bos);
    EXPECT_EQ(train_config_json(back), j);
    EXPECT_THROW(train_config_from_json({{"attention", "relu"}}, "c.json"), InputError);
    EXPECT_THROW(train_config_from_json({{"attention", 1}}, "c.json"), InputError);
    EXPECT_THROW(train_config_from_json({{"bos", 0}}, "c.json"), InputError);
}

// With BOS each sequence is BOS and the next seq_len - 1 corpus ids; without, seq_len corpus ids
// and no BOS anywhere (the corpus here holds none).
TEST(PackSequences, WithAndWithoutBos) {
    std::vector<int32_t> ids(103);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i % 250);
    const at::Tensor with = pack_sequences(ids, 10, 256);
    ASSERT_EQ(with.size(0), 103 / 9);
    const at::Tensor without = pack_sequences(ids, 10, -1);
    ASSERT_EQ(without.size(0), 103 / 10);
    ASSERT_EQ(without.size(1), 10);
    EXPECT_TRUE(with.select(1, 0).eq(256).all().item<bool>());
    EXPECT_FALSE(without.eq(256).any().item<bool>());
    for (int64_t s = 0; s < without.size(0); ++s)
        for (int64_t t = 0; t < 10; ++t) {
            EXPECT_EQ(without[s][t].item<int64_t>(), ids[size_t(s * 10 + t)]);
            if (t < 9) EXPECT_EQ(with[s][t + 1].item<int64_t>(), ids[size_t(s * 9 + t)]);
        }
    EXPECT_EQ(pack_sequences(std::vector<int32_t>(5, 1), 10, -1).size(0), 0);
}

// ---- The key/value slot (ModelConfig::kv_slot, `train --kv-bias`) ----

namespace {

// k* and v* of every layer of a model with a kv slot, [n_kv_heads * d_head] each, by layer.
std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> slot_tensors(const Model& m) {
    std::vector<at::Tensor> k(size_t(m.config().n_layers)), v(k.size());
    for (const Parameter& p : m.parameters()) {
        if (p.role == TensorRole::AttnSlotK) k[size_t(p.layer)] = p.tensor;
        if (p.role == TensorRole::AttnSlotV) v[size_t(p.layer)] = p.tensor;
    }
    return {k, v};
}

// A tiny model of `preset` with a kv slot, seeded random weights (init_std 0.5, as
// random_model) and a random slot (training starts it at 0): k*, v* ~ N(0, 0.5^2). The Llama one
// has one key/value head for its two query heads (both read the same k*, v*).
std::unique_ptr<Trainer> slot_model(const std::string& preset) {
    TrainConfig c = train_preset(preset);
    c.kv_bias = true;
    c.seq_len = kT;
    c.init_std = 0.5;
    nlohmann::json hf = hf_config_json(c, 257, 256);
    EXPECT_EQ(hf.at(kHfKvSlotKey), true);
    if (preset == "tiny") hf["num_key_value_heads"] = 1;
    auto t = std::make_unique<Trainer>(c, hf, 13);
    at::manual_seed(17);
    at::NoGradGuard no_grad;
    const auto [k, v] = slot_tensors(t->model());
    for (size_t l = 0; l < k.size(); ++l) {
        k[l].copy_(at::randn_like(k[l]) * 0.5);
        v[l].copy_(at::randn_like(v[l]) * 0.5);
    }
    return t;
}

class KvSlot : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override { trainer_ = slot_model(GetParam()); }
    const Model& model() const { return trainer_->model(); }
    ForwardResult run(bool gradients) const {
        return capture(model(),
                       hooks_of({HookPoint::AttnScores, HookPoint::Pattern, HookPoint::RotQ,
                                 HookPoint::RotK, HookPoint::V, HookPoint::Z}),
                       gradients, 23);
    }

    // Each layer against a float64 recomputation by the definition, with the slot as one more key
    // every query sees: c = (q . k*) scale, p_j = exp(s_j) / (exp(c) + sum_k exp(s_k)), slot
    // weight exp(c) / (the same), z = sum_j p_j v_j + p_slot v*.
    // Pattern: from the captured float32 scores, the bound of weight_rel_bound with the slot's
    // logit as one more term (range max(hi, c) - min(lo, c), n + 1 terms), plus 2 |dc| for the
    // float32 slot logit (|dc| <= gamma_{d_head} scale sum_k |q_k k*_k|; a logit error dc moves
    // p_j by p_j p_slot dc). z: as check_z, the score error max(ds, dc), and gamma_{T+2} for
    // pattern x V, the product p_slot v* and its addition, relative to sum_j p_j |v_j| + p_slot
    // |v*|.
    void check(const ForwardResult& r) const {
        const ModelConfig& c = model().config();
        const double scale = c.score_scale();
        const int64_t H = c.n_heads, dh = c.d_head, group = H / c.n_kv_heads;
        const at::Tensor hidden = at::ones({kT, kT}, at::kBool).triu(1);
        const auto [ks, vs] = slot_tensors(model());
        bool slot_took_weight = false;
        for (int64_t l = 0; l < c.n_layers; ++l) {
            SCOPED_TRACE("layer " + std::to_string(l));
            const at::Tensor q = by_query_head(r.captured.at(hook_name(HookPoint::RotQ, l)), H);
            const at::Tensor k = by_query_head(r.captured.at(hook_name(HookPoint::RotK, l)), H);
            const at::Tensor v = by_query_head(r.captured.at(hook_name(HookPoint::V, l)), H);
            // [1, H, 1, d_head]: the slot of each query head's kv head
            const at::Tensor k_star = ks[size_t(l)]
                                          .detach()
                                          .to(at::kDouble)
                                          .view({c.n_kv_heads, dh})
                                          .repeat_interleave(group, 0)
                                          .view({1, H, 1, dh});
            const at::Tensor v_star = vs[size_t(l)]
                                          .detach()
                                          .to(at::kDouble)
                                          .view({c.n_kv_heads, dh})
                                          .repeat_interleave(group, 0)
                                          .view({1, H, 1, dh});
            const at::Tensor slot = (q * k_star).sum(-1, true) * scale;  // [1, H, T, 1]
            const at::Tensor dc = (q.abs() * k_star.abs()).sum(-1, true) * scale *
                                  testutil::gamma_k(double(dh), kU32);
            const auto weights = [&](const at::Tensor& s) {
                const at::Tensor m = at::maximum(at::amax(s, {-1}, true), slot);
                const at::Tensor e = at::exp(s - m), es = at::exp(slot - m);
                const at::Tensor d = es + e.sum(-1, true);
                return std::make_pair(e / d, es / d);
            };
            // The pattern from the captured scores.
            const at::Tensor s_cap =
                r.captured.at(hook_name(HookPoint::AttnScores, l)).to(at::kDouble);
            const at::Tensor p = r.captured.at(hook_name(HookPoint::Pattern, l)).to(at::kDouble);
            const at::Tensor visible = s_cap.isfinite();
            const at::Tensor n = visible.sum(-1, true).to(at::kDouble);
            const at::Tensor hi = at::maximum(at::amax(s_cap, {-1}, true), slot);
            const at::Tensor lo = at::minimum(
                at::amin(s_cap.masked_fill(visible.logical_not(), INFINITY), {-1}, true), slot);
            const at::Tensor rel = (hi - lo + n + 1.0 + 4.0) * kU32 + 2.0 * dc;
            const at::Tensor p_ref = weights(s_cap).first;
            const auto [ratio, where] = worst(p, p_ref, rel * p_ref);
            EXPECT_ERROR_WITHIN(ratio, 1.0) << "pattern: " << where;
            EXPECT_EQ(p.masked_select(s_cap.isinf()).abs().max().item<double>(), 0.0);
            slot_took_weight = slot_took_weight || p.sum(-1).min().item<double>() < 0.5;
            // z from the recomputed scores.
            const at::Tensor s =
                (at::matmul(q, k.transpose(-2, -1)) * scale).masked_fill(hidden, -INFINITY);
            const auto [pz, p_slot] = weights(s);
            const at::Tensor z_ref = (at::matmul(pz, v) + p_slot * v_star).transpose(1, 2);
            const at::Tensor ds =
                at::maximum(at::amax((at::matmul(q.abs(), k.abs().transpose(-2, -1)) * scale)
                                         .masked_fill(hidden, 0.0),
                                     {-1}, true) *
                                testutil::gamma_k(double(dh), kU32),
                            dc);
            const at::Tensor rel_z = 2.0 * ds + rel + testutil::gamma_k(double(kT + 2), kU32);
            const at::Tensor tol =
                (rel_z * (at::matmul(pz, v.abs()) + p_slot * v_star.abs())).transpose(1, 2);
            const at::Tensor z = r.captured.at(hook_name(HookPoint::Z, l)).to(at::kDouble);
            const auto [ratio_z, where_z] = worst(z, z_ref, tol);
            EXPECT_ERROR_WITHIN(ratio_z, 1.0) << "z: " << where_z;
        }
        EXPECT_TRUE(slot_took_weight) << "no row gave the slot half its weight";
    }

private:
    std::unique_ptr<Trainer> trainer_;
};

}  // namespace

// The inference path (two query blocks) and the functional path gradients run.
TEST_P(KvSlot, PatternAndZAreTheDefinitionWithTheSlotAsOneMoreKey) {
    {
        SCOPED_TRACE("inference");
        check(run(false));
    }
    {
        SCOPED_TRACE("gradients");
        check(run(true));
    }
}

INSTANTIATE_TEST_SUITE_P(Families, KvSlot, ::testing::Values("tiny", "tiny-gpt2"),
                         [](const auto& info) {
                             return std::string(info.param == "tiny" ? "llama_gqa" : "gpt2");
                         });

// A slot of zeros is softmax with one more zero logit: the same logits as the softmax_one model
// with the same other weights, bit for bit (the slot's logit is 0, its value adds exact zeros).
TEST(KvSlotIdentity, ZeroSlotIsSoftmaxOneBitForBit) {
    for (const char* preset : {"tiny", "tiny-gpt2"}) {
        SCOPED_TRACE(preset);
        TrainConfig c = train_preset(preset);
        c.seq_len = kT;
        c.init_std = 0.5;
        c.attention = AttentionFunction::SoftmaxOne;
        const Trainer one(c, hf_config_json(c, 257, 256), 5);
        c.attention = AttentionFunction::Softmax;
        c.kv_bias = true;
        const Trainer slot(c, hf_config_json(c, 257, 256), 5);
        // The other weights of the softmax_one model (the slot's zeros stay).
        std::map<std::pair<int, int64_t>, at::Tensor> by_role;
        for (const Parameter& p : one.model().parameters())
            by_role[{int(p.role), p.layer}] = p.tensor;
        {
            at::NoGradGuard no_grad;
            for (const Parameter& p : slot.model().parameters()) {
                if (p.role == TensorRole::AttnSlotK || p.role == TensorRole::AttnSlotV) {
                    EXPECT_EQ(p.tensor.abs().max().item<double>(), 0.0);
                    continue;
                }
                p.tensor.copy_(by_role.at({int(p.role), p.layer}));
            }
        }
        const at::Tensor ids = random_ids(kT, 31);
        const at::Tensor a = one.model().forward(ids).logits, b = slot.model().forward(ids).logits;
        EXPECT_TRUE(at::equal(a, b)) << (a - b).abs().max().item<double>();
    }
}

// Training moves the slot (gradients reach k* and v*, which start at 0), a checkpoint reads back
// through load_model with its slot and gives the trained logits bit for bit, and the same file
// read without the config key gives other logits (the slot is in effect).
TEST(KvSlotCheckpoint, TrainedSlotLoadsBack) {
    for (const char* preset : {"tiny", "tiny-gpt2"}) {
        SCOPED_TRACE(preset);
        TrainConfig c = train_preset(preset);
        c.kv_bias = true;
        const nlohmann::json hf = hf_config_json(c, 257, 256);
        Trainer t(c, hf, 7);
        for (int s = 0; s < 3; ++s)
            EXPECT_TRUE(std::isfinite(
                t.step(random_ids(c.batch * c.seq_len, 200 + s).view({c.batch, c.seq_len}))));
        const auto [ks, vs] = slot_tensors(t.model());
        for (size_t l = 0; l < ks.size(); ++l) {
            EXPECT_GT(ks[l].abs().max().item<double>(), 0.0) << "k* of layer " << l;
            EXPECT_GT(vs[l].abs().max().item<double>(), 0.0) << "v* of layer " << l;
        }
        testutil::ScratchDir tmp;
        const Model loaded = testutil::save_and_load(t, hf, tmp.path());
        EXPECT_TRUE(loaded.config().kv_slot);
        EXPECT_FALSE(loaded.config().rows_sum_to_one());
        EXPECT_EQ(loaded.n_params(), t.model().n_params());
        const at::Tensor ids = random_ids(c.seq_len, 9);
        const at::Tensor a = t.model().forward(ids).logits, b = loaded.forward(ids).logits;
        EXPECT_TRUE(at::equal(a, b)) << (a - b).abs().max().item<double>();
        nlohmann::json plain = hf;
        plain.erase(kHfKvSlotKey);
        write_file_atomic(tmp / "config.json", plain.dump());
        const Model without = testutil::load_weights_only(tmp.path());
        EXPECT_FALSE(without.config().kv_slot);
        EXPECT_FALSE(at::equal(without.forward(ids).logits, b));
    }
}

// The key is read and checked: a boolean, softmax only, the llama and gpt2 families only; the
// training config round-trips kv_bias and refuses it with another function.
TEST(KvSlotConfig, KeyIsCheckedAndRoundTrips) {
    TrainConfig c = train_preset("tiny");
    EXPECT_FALSE(hf_config_json(c, 257, 256).contains(kHfKvSlotKey));
    EXPECT_FALSE(train_config_json(c).contains("kv_bias"));
    c.kv_bias = true;
    const nlohmann::json j = train_config_json(c);
    EXPECT_EQ(j.at("kv_bias"), true);
    EXPECT_TRUE(train_config_from_json(j, "x").kv_bias);
    EXPECT_THROW(train_config_from_json({{"kv_bias", 1}}, "c.json"), InputError);
    try {
        train_config_from_json({{"kv_bias", true}, {"attention", "sigmoid"}}, "c.json");
        ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("needs softmax"), std::string::npos) << e.what();
    }

    nlohmann::json hf = hf_config_json(c, 257, 256);
    EXPECT_TRUE(config_from_hf_json(hf, "c.json").kv_slot);
    hf[kHfKvSlotKey] = "yes";
    EXPECT_THROW(config_from_hf_json(hf, "c.json"), InputError);
    hf[kHfKvSlotKey] = true;
    hf[kHfAttentionKey] = "softmax_one";
    try {
        config_from_hf_json(hf, "c.json");
        ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
        EXPECT_EQ(e.file(), "c.json");
        EXPECT_NE(std::string(e.what()).find("sinkscope_kv_bias"), std::string::npos) << e.what();
    }
    const nlohmann::json bert = {{"model_type", "bert"},    {"hidden_size", 8},
                                 {"num_hidden_layers", 1},  {"num_attention_heads", 2},
                                 {"intermediate_size", 16}, {"vocab_size", 10},
                                 {kHfKvSlotKey, true}};
    try {
        config_from_hf_json(bert, "bert.json");
        ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("llama and gpt2 families only"), std::string::npos)
            << e.what();
    }
}
