// Hook names and capture-spec matching.
#include <gtest/gtest.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/model/config.hpp"
#include "sinkscope/model/hooks.hpp"

using namespace sinkscope;
using namespace sinkscope::model;

// Hook names are TransformerLens's (STYLE.md), so users of TransformerLens know them at once.
TEST(Hooks, TransformerLensNames) {
    EXPECT_EQ(hook_name(HookPoint::Embed), "hook_embed");
    EXPECT_EQ(hook_name(HookPoint::ResidPre, 3), "blocks.3.hook_resid_pre");
    EXPECT_EQ(hook_name(HookPoint::ResidMid, 0), "blocks.0.hook_resid_mid");
    EXPECT_EQ(hook_name(HookPoint::ResidPost, 11), "blocks.11.hook_resid_post");
    EXPECT_EQ(hook_name(HookPoint::AttnScores, 2), "blocks.2.attn.hook_attn_scores");
    EXPECT_EQ(hook_name(HookPoint::Pattern, 2), "blocks.2.attn.hook_pattern");
    EXPECT_EQ(hook_name(HookPoint::RotK, 1), "blocks.1.attn.hook_rot_k");
    EXPECT_EQ(hook_name(HookPoint::Z, 1), "blocks.1.attn.hook_z");
    EXPECT_EQ(hook_glob(HookPoint::Pattern), "blocks.*.attn.hook_pattern");
}

// list_hooks has hook_embed, 11 hooks per layer and the final norm (decoders), all distinct;
// post-LN encoders have no final norm.
TEST(Hooks, ListCoversEveryLayer) {
    ModelConfig c;
    c.n_layers = 3;
    const auto hooks = list_hooks(c);
    EXPECT_EQ(hooks.size(), 1u + 3u * 11u + 1u);
    EXPECT_EQ(std::set<std::string>(hooks.begin(), hooks.end()).size(), hooks.size());
    EXPECT_EQ(hooks.front(), "hook_embed");
    EXPECT_EQ(hooks.back(), "ln_final.hook_normalized");
    c.causal = false;
    EXPECT_EQ(list_hooks(c).back(), "blocks.2.hook_resid_post");
}

// Globs match whole names ('*' any run, '?' one char, '.' literal); "re:" switches to regex.
TEST(Hooks, CaptureSpecMatching) {
    const CaptureSpec glob = CaptureSpec::parse("blocks.*.attn.hook_pattern,hook_embed");
    EXPECT_TRUE(glob.wants("blocks.10.attn.hook_pattern"));
    EXPECT_TRUE(glob.wants("hook_embed"));
    EXPECT_FALSE(glob.wants("blocks.1.attn.hook_attn_scores"));
    EXPECT_FALSE(glob.wants("blocks.1.attn.hook_pattern_x"));  // whole-name match
    EXPECT_FALSE(CaptureSpec::parse("blocks?1.hook_z").wants("blocks.1.attn.hook_z"));
    EXPECT_FALSE(CaptureSpec::parse("blocks.1.hook_resid_pre").wants("blocksX1Xhook_resid_pre"));
    const CaptureSpec re = CaptureSpec::parse("re:blocks\\.(0|2)\\.attn\\.hook_(q|k)");
    EXPECT_TRUE(re.wants("blocks.2.attn.hook_k"));
    EXPECT_FALSE(re.wants("blocks.1.attn.hook_k"));
    EXPECT_FALSE(re.wants("blocks.2.attn.hook_rot_k"));
    EXPECT_FALSE(CaptureSpec().wants("hook_embed"));
    EXPECT_TRUE(CaptureSpec::all().wants("blocks.0.hook_resid_post"));
    EXPECT_TRUE(CaptureSpec::attention().wants("blocks.4.attn.hook_attn_scores"));
    EXPECT_FALSE(CaptureSpec::attention().wants("blocks.4.attn.hook_z"));
}

// A malformed regex is a usage error, not a crash.
TEST(Hooks, BadRegexIsUsageError) {
    EXPECT_THROW(CaptureSpec::parse("re:blocks.(("), UsageError);
}
