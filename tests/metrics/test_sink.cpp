// Sink policies (spec 0, 10.d): parsing and resolution.
#include <gtest/gtest.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/sink.hpp"
#include "synthetic_attention.hpp"
#include "testing.hpp"

using namespace sinkscope;
using namespace sinkscope::metrics;

// Every policy spelling parses; anything else is a usage error.
TEST(Sink, Parse) {
    EXPECT_EQ(parse_sink_policy("first").kind, SinkPolicy::Kind::First);
    EXPECT_EQ(parse_sink_policy("auto").kind, SinkPolicy::Kind::Auto);
    EXPECT_EQ(parse_sink_policy("argmax").kind, SinkPolicy::Kind::Argmax);
    EXPECT_EQ(parse_sink_policy("bos").kind, SinkPolicy::Kind::Bos);
    EXPECT_EQ(parse_sink_policy("17").position, 17);
    for (const char* bad : {"", "-1", "last", "1.5"})
        EXPECT_THROW(parse_sink_policy(bad), UsageError);
}

// Auto is first for causal inputs and argmax for bidirectional ones (spec 0 defaults).
TEST(Sink, AutoFollowsMasking) {
    EXPECT_EQ(resolve_auto({}, Masking::Causal).kind, SinkPolicy::Kind::First);
    EXPECT_EQ(resolve_auto({}, Masking::Bidirectional).kind, SinkPolicy::Kind::Argmax);
}

// BOS: the first position holding the BOS id; an input without one is an input error.
TEST(Sink, BosFirstOccurrence) {
    auto x = testutil::random_input(1, 2, 1, 4, Masking::Causal, false);
    x.token_ids = {5, 1, 7, 1};
    SinkPolicy p = parse_sink_policy("bos");
    p.bos_id = 1;
    SinkPositions s = resolve_sinks(x, p);
    EXPECT_EQ(s.model, 1);
    EXPECT_EQ(s.per_layer, (std::vector<int64_t>{1, 1}));
    p.bos_id = 9;
    EXPECT_THROW(resolve_sinks(x, p), InputError);
    x.token_ids.clear();
    EXPECT_THROW(resolve_sinks(x, p), UsageError);
}

// Argmax column mean counts masked entries as 0 and divides by all T rows (10.d): in a causal
// uniform pattern key 0 receives the most.
TEST(Sink, ArgmaxCausalUniform) {
    AttentionInput x;
    x.n_layers = 1, x.n_heads = 1, x.n_tokens = 4, x.length = 4;
    x.pattern.assign(16, 0.0);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j <= i; ++j) x.pattern[i * 4 + j] = 1.0 / (i + 1);
    auto col = key_column_mean(x, 0);
    EXPECT_WITHIN(col[0], (1 + 0.5 + 1.0 / 3 + 0.25) / 4, testutil::kFewOps);
    EXPECT_WITHIN(col[3], 0.25 / 4, testutil::kFewOps);
    EXPECT_EQ(resolve_sinks(x, parse_sink_policy("argmax")).model, 0);
}
