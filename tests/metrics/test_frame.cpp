// Token specialisation, reference counts and the reference-frame verdict (spec 8, 10.m, 10.n).
#include <cstring>
#include <functional>

#include <gtest/gtest.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/serialize.hpp"
#include "sinkscope/metrics/frame.hpp"
#include "sinkscope/metrics/ref_frame.hpp"

using namespace sinkscope::metrics;

namespace {
// Every head of layer l puts `mass` on key anchor(l) and spreads the rest uniformly.
AttentionInput anchored(int64_t n_layers, int64_t n_heads, int64_t n, Masking masking,
                        const std::function<int64_t(int64_t)>& anchor, double mass = 0.8) {
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
                const int64_t a = anchor(l);
                const bool sees = a >= kb && a < ke;
                const double rest = sees ? 1 - mass : 1.0;
                for (int64_t j = kb; j < ke; ++j) r[j] = rest / static_cast<double>(ke - kb);
                if (sees) r[a] += mass;
            }
    return in;
}
RefFrameOptions frame_only() {
    RefFrameOptions o;
    o.analyses = "tokens,frame";
    return o;
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

// Every head of every layer anchored on position 0 with one reference token: centralized.
TEST(Frame, CentralizedVerdict) {
    RefFrameAccumulator acc(frame_only());
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
    RefFrameAccumulator acc(frame_only());
    acc.add(anchored(6, 4, n, Masking::Bidirectional,
                     [&](int64_t l) { return l < 3 ? int64_t{0} : n - 1; }));
    const auto r = acc.finish();
    EXPECT_EQ(r.verdict, FrameType::Bidirectional);
}

// Anchors in the middle of the sequence: distributed.
TEST(Frame, DistributedVerdict) {
    RefFrameAccumulator acc(frame_only());
    acc.add(anchored(6, 4, 12, Masking::Bidirectional, [](int64_t l) { return 3 + l % 2; }));
    EXPECT_EQ(acc.finish().verdict, FrameType::Distributed);
}

// Anchored on position 0 everywhere but with several reference tokens (each key's column mean
// above 0.1): not centralized, and with no "last" layer not bidirectional either.
TEST(Frame, ManyReferenceTokensAreNotCentralized) {
    RefFrameAccumulator acc(frame_only());
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
