// The attention functions other than softmax (model/config.hpp AttentionFunction, `train
// --attention`): each forward against a float64 recomputation by the definition (softmax_one:
// exp(s_j) / (1 + sum_k exp(s_k)) over the visible keys; sigmoid: 1 / (1 + exp(-s_j)) per visible
// key, masked keys 0), on the inference (query-blocked) path and the functional path gradients
// run, with and without captured squares; the key in config.json and the training config, and a
// trained checkpoint read back by load_model with its function; sequences packed without BOS.
#include <cmath>
#include <filesystem>
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

class AttentionVariant
    : public ::testing::TestWithParam<std::tuple<std::string, AttentionFunction>> {
protected:
    void SetUp() override {
        trainer_ = random_model(std::get<0>(GetParam()), std::get<1>(GetParam()));
    }
    const Model& model() const { return trainer_->model(); }
    AttentionFunction function() const { return std::get<1>(GetParam()); }
    // A forward capturing `hooks`: inference, or with gradients recorded (the functional path).
    ForwardResult run(const std::vector<std::string>& hooks, bool gradients) const {
        const at::Tensor ids = random_ids(kT, 21);
        const CaptureSpec spec = CaptureSpec(hooks).without_logits();
        if (!gradients) return model().forward(ids, spec);
        GradientScope scope(model());
        ForwardResult r = model().forward(ids, spec);
        for (auto& kv : r.captured) kv.second = kv.second.detach();
        return r;
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
            write_file_atomic(tmp / "config.json", hf.dump());
            write_file_atomic(tmp / "model.safetensors", t.checkpoint_safetensors());
            LoadOptions lo;
            lo.load_tokenizer = false;
            const Model loaded = load_model(tmp.path(), lo);
            EXPECT_EQ(loaded.config().attention, f);
            const at::Tensor ids = random_ids(c.seq_len, 5);
            const at::Tensor a = t.model().forward(ids).logits, b = loaded.forward(ids).logits;
            EXPECT_TRUE(at::equal(a, b)) << (a - b).abs().max().item<double>();
            // The same weights read as softmax give other logits: the function is in effect.
            nlohmann::json soft = hf;
            soft.erase(kHfAttentionKey);
            write_file_atomic(tmp / "config.json", soft.dump());
            const Model as_softmax = load_model(tmp.path(), lo);
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
