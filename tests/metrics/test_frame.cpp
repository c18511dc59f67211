// Token specialisation, reference counts and the reference-frame verdict (spec 8, 10.m, 10.n).
#include <cmath>
#include <cstring>
#include <functional>

#include <gtest/gtest.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/serialize.hpp"
#include "sinkscope/metrics/frame.hpp"
#include "sinkscope/metrics/ref_frame.hpp"

using namespace sinkscope::metrics;

namespace {
// Every head of layer l puts mass m on key k for each (k, m) of refs(l) (k = -1: the last
// position; rows that cannot see k spread it with the rest) and the rest uniformly.
using Refs = std::vector<std::pair<int64_t, double>>;
AttentionInput layered(int64_t n_layers, int64_t n_heads, int64_t n, Masking masking,
                       const std::function<Refs(int64_t)>& refs) {
    AttentionInput in;
    in.n_layers = n_layers;
    in.n_heads = n_heads;
    in.n_tokens = in.length = n;
    in.masking = masking;
    in.pattern.assign(static_cast<size_t>(n_layers * n_heads * n * n), 0.0);
    for (int64_t l = 0; l < n_layers; ++l)
        for (int64_t h = 0; h < n_heads; ++h)
            for (int64_t i = 0; i < n; ++i) {
                double* r = in.pattern.data() + in.offset(l, h, i);
                const int64_t kb = in.key_begin(i), ke = in.key_end(i);
                double rest = 1;
                for (auto [k, m] : refs(l))
                    if (const int64_t key = k < 0 ? n - 1 : k; key >= kb && key < ke) {
                        r[key] += m;
                        rest -= m;
                    }
                for (int64_t j = kb; j < ke; ++j) r[j] += rest / static_cast<double>(ke - kb);
            }
    return in;
}
// Every head of layer l puts `mass` on key anchor(l) and spreads the rest uniformly.
AttentionInput anchored(int64_t n_layers, int64_t n_heads, int64_t n, Masking masking,
                        const std::function<int64_t(int64_t)>& anchor, double mass = 0.8) {
    return layered(n_layers, n_heads, n, masking, [&](int64_t l) {
        return Refs{{anchor(l), mass}};
    });
}
RefFrameOptions frame_only() {
    RefFrameOptions o;
    o.analyses = "tokens,frame";
    return o;
}
// The rule of spec 10.n (--frame-verdict rule).
RefFrameOptions rule_only() {
    RefFrameOptions o = frame_only();
    o.constants.frame_verdict = "rule";
    return o;
}
FrameReading reading(const RefFrameResults& r) {
    return r.frame_reading;
}
}  // namespace

// Position classes: 0 is first, length-1 is last, anything else other.
TEST(Frame, PositionClasses) {
    EXPECT_EQ(classify_position(0, 5), PositionClass::First);
    EXPECT_EQ(classify_position(4, 5), PositionClass::Last);
    EXPECT_EQ(classify_position(2, 5), PositionClass::Other);
}

// Reference count: keys with column mean > 0.1; else the top 10% (at least 1); cap 30% of n.
TEST(Frame, ReferenceCountRules) {
    Eigen::MatrixXd star = Eigen::MatrixXd::Zero(20, 20);
    star.col(0).setOnes();
    EXPECT_EQ(reference_count(star), 1);
    EXPECT_EQ(reference_count(Eigen::MatrixXd::Constant(20, 20, 1.0 / 20)), 2);  // top 10%
    EXPECT_EQ(reference_count(Eigen::MatrixXd::Constant(5, 5, 0.2)), 1);  // all > 0.1, cap int(1.5)
    const Eigen::VectorXd sums = star.colwise().sum();
    EXPECT_EQ(top_key(std::vector<double>(sums.begin(), sums.end()), star.rows()), 0);
    EXPECT_EQ(top_key({0.5, 2.0, 2.0, 1.0}, 4), 1);  // tied columns: the first
}

// The rule (spec 10.n): every head of every layer anchored on position 0 with one reference
// token: centralized.
TEST(Frame, CentralizedVerdict) {
    RefFrameAccumulator acc(rule_only());
    acc.add(anchored(
        6, 4, 12, Masking::Causal, [](int64_t) { return 0; }, 0.95));
    const auto r = acc.finish();
    EXPECT_EQ(r.verdict, FrameType::Centralized);
    EXPECT_DOUBLE_EQ(r.frame.share_first_mid_late(), 1.0);
    EXPECT_DOUBLE_EQ(r.frame.mean_reference_count(), 1.0);
}

// Encoder anchored on the first token in early layers and on the last in late ones:
// bidirectional (modal first in some layer, last in another, share of first < 0.9).
TEST(Frame, BidirectionalVerdict) {
    const int64_t n = 12;
    RefFrameAccumulator acc(rule_only());
    acc.add(anchored(6, 4, n, Masking::Bidirectional,
                     [&](int64_t l) { return l < 3 ? int64_t{0} : n - 1; }));
    const auto r = acc.finish();
    EXPECT_EQ(r.verdict, FrameType::Bidirectional);
}

// Anchors in the middle of the sequence: distributed.
TEST(Frame, DistributedVerdict) {
    RefFrameAccumulator acc(rule_only());
    acc.add(anchored(6, 4, 12, Masking::Bidirectional, [](int64_t l) { return 3 + l % 2; }));
    EXPECT_EQ(acc.finish().verdict, FrameType::Distributed);
}

// Anchored on position 0 everywhere but with several reference tokens (each key's column mean
// above 0.1): not centralized, and with no "last" layer not bidirectional either.
TEST(Frame, ManyReferenceTokensAreNotCentralized) {
    RefFrameAccumulator acc(rule_only());
    acc.add(anchored(
        6, 2, 7, Masking::Bidirectional, [](int64_t) { return 0; }, 0.2));
    const auto r = acc.finish();
    EXPECT_GE(r.frame.mean_reference_count(), 1.2);
    EXPECT_EQ(r.verdict, FrameType::Distributed);
}

// Token specialisation: with token strings the top key is named by its string, counted once
// per input; consistency over inputs is 1 when every input agrees.
TEST(Frame, TokenSpecialisationUsesStrings) {
    const std::vector<std::string> tokens{"<s>", "a", "b", "c", "d", "e"};
    RefFrameAccumulator acc(frame_only());
    const auto in = anchored(2, 3, 6, Masking::Causal, [](int64_t) { return 0; });
    for (int k = 0; k < 5; ++k) acc.add(in, &tokens);
    const auto r = acc.finish();
    ASSERT_EQ(r.top_keys.count({1, 2}), 1u);
    EXPECT_EQ(r.top_keys.at({1, 2}).at("<s>"), 5);
    const auto it = r.stats.find(RefFrameKey{"tokens", 1, 2, "consistency", "<s>"});
    ASSERT_NE(it, r.stats.end());
    EXPECT_DOUBLE_EQ(it->second.mean(), 1.0);
    const auto share = r.stats.find(RefFrameKey{"tokens", 0, -1, "heads_modal_share", "<s>"});
    ASSERT_NE(share, r.stats.end());
    EXPECT_DOUBLE_EQ(share->second.mean(), 1.0);
}

// B.10: a head whose top token is "zeta" in one input and "alpha" in another ties 1:1. Compat
// keeps the token seen first in input order (the notebook's insertion-ordered dictionary, also
// across merged shards: the other shard's inputs come after); principled keeps the
// lexicographically smallest.
TEST(Frame, ModalTokenTiesInCompatKeepTheFirstSeen) {
    const std::vector<std::string> zeta{"zeta", "a", "b", "c"}, alpha{"alpha", "a", "b", "c"};
    const auto in = anchored(1, 1, 4, Masking::Causal, [](int64_t) { return 0; });
    auto modal = [](const RefFrameAccumulator& acc) {
        std::string key;
        for (const auto& [k, s] : acc.finish().stats)
            if (k.table == "tokens" && k.layer == 0 && k.head == -1 &&
                k.metric == "heads_modal_share")
                key = k.param;
        return key;
    };
    RefFrameOptions compat = frame_only();
    compat.compat = "ruscio2025";
    for (const auto& [first, second] : {std::pair{&zeta, &alpha}, std::pair{&alpha, &zeta}}) {
        RefFrameAccumulator c(compat), p(frame_only()), shard1(compat), shard2(compat);
        for (auto* acc : {&c, &p}) {
            acc->add(in, first);
            acc->add(in, second);
        }
        EXPECT_EQ(modal(c), first->front());
        const auto r = c.finish();
        const auto it = r.stats.find(RefFrameKey{"tokens", 0, 0, "consistency", first->front()});
        ASSERT_NE(it, r.stats.end());
        EXPECT_DOUBLE_EQ(it->second.mean(), 0.5);
        EXPECT_EQ(modal(p), "alpha");
        shard1.add(in, first);
        shard2.add(in, second);
        shard1.merge(shard2);
        EXPECT_EQ(modal(shard1), first->front());
    }
}

// A state whose frame evidence claims another layer count than its vectors hold is refused as
// damaged, at once: the count used to drive a loop over the layers (a fuzzer's 2^62 layers ran
// for minutes) and index the analysed-layer list past its end. The count is found in the saved
// bytes as the 8-byte 6 directly followed by the first vector's length 6.
TEST(Frame, DamagedLayerCountInStateIsRefused) {
    RefFrameAccumulator acc(frame_only());
    acc.add(anchored(
        6, 4, 12, Masking::Causal, [](int64_t) { return 0; }, 0.95));
    sinkscope::BinaryWriter w;
    acc.save(w);
    const std::string bytes = w.bytes();
    const int64_t six[2] = {6, 6};
    const std::string needle(reinterpret_cast<const char*>(six), sizeof six);
    const size_t at = bytes.rfind(needle);
    ASSERT_NE(at, std::string::npos);
    auto load = [&](int64_t layers) {
        std::string edited = bytes;
        std::memcpy(edited.data() + at, &layers, sizeof layers);
        RefFrameAccumulator back(frame_only());
        sinkscope::BinaryReader r(edited, "state.bin");
        back.load(r);
        return back.finish().verdict;
    };
    EXPECT_EQ(load(6), FrameType::Centralized);  // the untouched count loads
    for (int64_t bad : {int64_t{5}, int64_t{1} << 62, int64_t{-3}}) try {
            load(bad);
            ADD_FAILURE() << bad << " layers loaded";
        } catch (const sinkscope::InputError& e) {
            EXPECT_NE(std::string(e.what()).find("frame evidence does not match its layer count"),
                      std::string::npos)
                << e.what();
        }
}

// The signature verdict on three models built so the answer is known (docs/metrics.md
// "Reference-frame type"). Scores: each measured signature gives 1/k to each of the k types it is
// consistent with (reference_count: split between the two prototypes it lies between); margin =
// (first - second) / signatures measured. Every case has 5 inputs, so heads can be specialised
// (10.m: one key in >= 0.3 of >= 5 inputs).

// A BOS sink: every head of every layer on "<s>" at position 0 with mass 0.95 (one reference
// key). Middle/late heads (layers 2..5 x 4): all specialised (-> C or B), all on "<s>" (-> C),
// all at the first place (-> C or D), reference count 1 (-> C), no switch (-> C or D):
// C 3.5, D 1, B 0.5 over 5 signatures, margin 0.5.
TEST(FrameSignatures, CentralizedWithABosSink) {
    const std::vector<std::string> tokens{"<s>", "a", "b", "c", "d", "e", "f", "g", "h", "i"};
    RefFrameAccumulator acc(frame_only());
    for (int k = 0; k < 5; ++k)
        acc.add(layered(6, 4, 10, Masking::Causal,
                        [](int64_t) {
                            return Refs{{0, 0.95}};
                        }),
                &tokens);
    const auto r = acc.finish();
    EXPECT_EQ(r.verdict, FrameType::Centralized);
    const FrameReading f = reading(r);
    EXPECT_EQ(f.n_measured, 5);
    EXPECT_EQ(f.scores, (std::array<double, 3>{3.5, 1.0, 0.5}));
    EXPECT_DOUBLE_EQ(f.margin, 0.5);
}

// No BOS (a decoder whose position 0 holds each input's first word, as Qwen): the anchors sit at
// position 0 in every layer, but the token there differs between the 5 inputs, and one of the 6
// middle/late layers (3..8 of 9) has a second reference key, so the mean reference count is
// 7/6. The rule alone calls this centralized (share 1 >= 0.9, 7/6 < 1.2). The signatures: no
// head specialised on a token (each token 1 of 5 inputs; -> D), anchor_token not measured, all
// heads at the first place (-> C or D), the count 7/6 between the prototypes 1.0006 and 1.23
// (-> C 1 - w, D w), no switch (-> C or D).
TEST(FrameSignatures, DistributedWithoutBos) {
    RefFrameAccumulator acc(frame_only()), rule(rule_only());
    for (const char* first : {"The", "In", ",", "the", "A"}) {
        const std::vector<std::string> tokens{first, "x", "y", "z", "u", "v",
                                              "w",   "q", "r", "s", "t", "p"};
        const auto in = layered(9, 4, 12, Masking::Causal, [](int64_t l) {
            return l == 4 ? Refs{{0, 0.6}, {1, 0.3}} : Refs{{0, 0.9}};
        });
        acc.add(in, &tokens);
        rule.add(in, &tokens);
    }
    const auto r = acc.finish();
    EXPECT_NEAR(r.frame.mean_reference_count(), 7.0 / 6.0, 1e-15);
    EXPECT_EQ(rule.finish().verdict, FrameType::Centralized);  // what the rule alone says
    EXPECT_EQ(r.verdict, FrameType::Distributed);
    EXPECT_EQ(r.rule_verdict, FrameType::Centralized);
    const FrameReading f = reading(r);
    EXPECT_EQ(f.n_measured, 4);
    const double w = (7.0 / 6.0 - 1.0006) / (1.23 - 1.0006);
    EXPECT_NEAR(f.scores[0], 0.5 + (1 - w) + 0.5, 1e-15);
    EXPECT_NEAR(f.scores[1], 1 + 0.5 + w + 0.5, 1e-15);
    EXPECT_EQ(f.scores[2], 0.0);
    EXPECT_NEAR(f.margin, (f.scores[1] - f.scores[0]) / 4, 1e-15);
}

// An encoder with a dual anchor: layers 0-2 on "<s>" (position 0), layers 3-5 on "</s>" (the
// last position), and layers 3 and 4 with a second reference key (".", position 5). Middle and
// late heads (layers 2..5 x 4): all specialised (-> C or B), 12 of 16 on "</s>" (-> D or B),
// 12 of 16 at the last place (-> D or B), reference count (1 + 2 + 2 + 1) / 4 = 1.5 between the
// prototypes 1.23 and 1.58 (-> D 1 - w, B w), a switch (-> B).
TEST(FrameSignatures, BidirectionalEncoder) {
    const std::vector<std::string> tokens{"<s>", "a", "b", "c", "d", ".", "e", "f", "</s>"};
    RefFrameAccumulator acc(frame_only());
    for (int k = 0; k < 5; ++k)
        acc.add(layered(6, 4, 9, Masking::Bidirectional,
                        [](int64_t l) {
                            if (l < 3) return Refs{{0, 0.8}};
                            if (l < 5) return Refs{{-1, 0.6}, {5, 0.3}};
                            return Refs{{-1, 0.8}};
                        }),
                &tokens);
    const auto r = acc.finish();
    EXPECT_DOUBLE_EQ(r.frame.mean_reference_count(), 1.5);
    EXPECT_EQ(r.verdict, FrameType::Bidirectional);
    const FrameReading f = reading(r);
    const double w = (1.5 - 1.23) / (1.58 - 1.23);
    EXPECT_NEAR(f.scores[0], 0.5, 1e-15);
    EXPECT_NEAR(f.scores[1], 0.5 + 0.5 + (1 - w), 1e-15);
    EXPECT_NEAR(f.scores[2], 0.5 + 0.5 + 0.5 + w + 1, 1e-15);
    EXPECT_NEAR(f.margin, (f.scores[2] - f.scores[1]) / 5, 1e-15);
}

// Signatures that disagree give "inconclusive": evidence where two specialised heads anchor on
// two places (-> D or B), both are specialised (-> C or B), the reference count sits between
// the centralized and distributed prototypes, and no layer switches (-> C or D): C and D nearly
// tie. With --frame-min-margin 0 the leader is named.
TEST(FrameSignatures, DisagreementIsInconclusive) {
    FrameEvidence e;
    e.resize(3, 1);
    e.other = {5, 5, 5};
    e.reference_count_sum = 1.115 * 10;
    e.reference_count_n = 10;
    e.head_places[{1, 0}]["#3"] = 5;
    e.head_places[{1, 1}]["#4"] = 5;
    e.n_inputs = 5;
    const auto f = read_frame_signatures(e, {}, {});
    EXPECT_EQ(f.n_measured, 4);
    EXPECT_EQ(f.verdict, FrameType::Inconclusive);
    const double w = (1.115 - 1.0006) / (1.23 - 1.0006);
    EXPECT_NEAR(f.scores[0], 0.5 + (1 - w) + 0.5, 1e-15);
    EXPECT_NEAR(f.scores[1], 0.5 + w + 0.5, 1e-15);
    EXPECT_NEAR(f.scores[2], 0.5 + 0.5, 1e-15);
    EXPECT_LT(f.margin, 0.01);
    FrameSignatureRule loose;
    loose.min_margin = 0;
    EXPECT_EQ(read_frame_signatures(e, loose, {}).verdict, FrameType::Centralized);
    // Fewer than 5 inputs: no head can be specialised, and those signatures are not measured.
    e.n_inputs = 4;
    EXPECT_EQ(read_frame_signatures(e, {}, {}).n_measured, 2);
}

// A mean reference count scores the prototype it reaches, or the two it lies between, linearly.
TEST(FrameSignatures, ReferenceCountWeights) {
    const std::array<double, 3> p{1.0, 1.5, 2.0};
    EXPECT_EQ(reference_count_weights(0.9, p), (std::array<double, 3>{1, 0, 0}));
    EXPECT_EQ(reference_count_weights(1.0, p), (std::array<double, 3>{1, 0, 0}));
    EXPECT_EQ(reference_count_weights(1.125, p), (std::array<double, 3>{0.75, 0.25, 0}));
    EXPECT_EQ(reference_count_weights(1.5, p), (std::array<double, 3>{0, 1, 0}));
    EXPECT_EQ(reference_count_weights(1.875, p), (std::array<double, 3>{0, 0.25, 0.75}));
    EXPECT_EQ(reference_count_weights(3.0, p), (std::array<double, 3>{0, 0, 1}));
}

// The KL reduction's profile over depth, on thirds [0, L/3), [L/3, 2L/3), [2L/3, L).
TEST(FrameSignatures, DepthProfiles) {
    const double nan = std::nan("");
    EXPECT_EQ(depth_profile({-1, -2, -0.5, -3, -1, -2}), "consistently negative");
    EXPECT_EQ(depth_profile({1, 2, -1, -1, 3, 2}), "U-shaped");
    EXPECT_EQ(depth_profile({0.5, 0.4, 0.1, 0.1, 0.3, 0.2}), "U-shaped");  // a dip, one sign
    EXPECT_EQ(depth_profile({-1, -1, 1, 2, 3, 4}), "three-phase");         // a sign change
    EXPECT_EQ(depth_profile({1, 2, 3, 4, 5, 6}), "none");                  // rising, one sign
    EXPECT_EQ(depth_profile({-1, nan, nan, nan, nan, -2}), "none");        // 2 finite values
    EXPECT_EQ(depth_profile({-1, nan, -2, nan, nan, -2}), "consistently negative");
    EXPECT_EQ(depth_profile({1, nan, nan, nan, 2, 3}), "none");  // an empty third
}

// The profile is read from kl.csv's values when the KL analysis runs, and not otherwise.
TEST(FrameSignatures, KlProfileIsASignatureWhenKlRuns) {
    const std::vector<std::string> tokens{"<s>", "a", "b", "c", "d", "e", "f", "g", "h", "i"};
    RefFrameOptions o = frame_only();
    o.analyses = "kl,tokens,frame";
    RefFrameAccumulator acc(o), without(frame_only());
    const auto in = layered(6, 4, 10, Masking::Causal, [](int64_t) { return Refs{{0, 0.95}}; });
    acc.add(in, &tokens);
    without.add(in, &tokens);
    const auto r = acc.finish();
    const auto& kl = r.frame_reading.signatures.back();
    ASSERT_EQ(kl.name, "kl_profile");
    EXPECT_EQ(without.finish().frame_reading.signatures.back().reading, "none");
    // Identical heads: KL before and after are 0 in every layer, so the profile is "none".
    EXPECT_EQ(kl.reading, "none");
    EXPECT_FALSE(kl.measured);
    EXPECT_EQ(r.frame_reading.n_measured, 2);  // 1 input: reference count and layer switch
}

// The KL profile alone: one signature measured is never enough for a verdict, but it scores the
// type the paper pairs with its profile.
TEST(FrameSignatures, KlProfileScoresItsType) {
    const FrameEvidence none;  // no layers: the anchor signatures are not measured
    const auto negative = read_frame_signatures(none, {}, {-1, -2, -1, -3, -1, -2});
    EXPECT_EQ(negative.n_measured, 1);
    EXPECT_EQ(negative.scores, (std::array<double, 3>{1.0, 0.0, 0.0}));
    EXPECT_EQ(negative.verdict, FrameType::Inconclusive);
    EXPECT_EQ(read_frame_signatures(none, {}, {1, 2, -1, -1, 3, 2}).scores,
              (std::array<double, 3>{0.0, 0.0, 1.0}));
    EXPECT_EQ(read_frame_signatures(none, {}, {-1, -1, 1, 2, 3, 4}).scores,
              (std::array<double, 3>{0.0, 1.0, 0.0}));
    EXPECT_EQ(read_frame_signatures(none, {}, {}).n_measured, 0);
}

// The anchors' evidence merges by addition and survives a save and load.
TEST(FrameSignatures, AnchorsMergeAndResume) {
    const std::vector<std::string> a{"The", "x", "y", "z", "u", "v"},
        b{"In", "x", "y", "z", "u", "v"};
    const auto in = layered(6, 2, 6, Masking::Causal, [](int64_t) { return Refs{{0, 0.9}}; });
    RefFrameAccumulator whole(frame_only()), s1(frame_only()), s2(frame_only());
    whole.add(in, &a);
    whole.add(in, &b);
    s1.add(in, &a);
    s2.add(in, &b);
    s1.merge(s2);
    sinkscope::BinaryWriter w;
    s1.save(w);
    RefFrameAccumulator back(frame_only());
    sinkscope::BinaryReader rd(w.bytes(), "state.bin");
    back.load(rd);
    const auto want = whole.finish().frame;
    for (const auto* acc : {&s1, &back}) {
        const auto r = acc->finish();
        EXPECT_EQ(r.frame.head_tokens, want.head_tokens);
        EXPECT_EQ(r.frame.head_places, want.head_places);
        EXPECT_EQ(r.frame.n_inputs, 2);
    }
    // Middle/late layers 2..5 x 2 heads, each at the first place in both inputs.
    EXPECT_EQ(want.head_places.size(), 8u);
    EXPECT_EQ(want.head_places.at({2, 1}).at("first"), 2);
    EXPECT_EQ(want.head_tokens.at({5, 0}).at("The"), 1);
    EXPECT_EQ(want.head_tokens.at({5, 0}).at("In"), 1);
}
