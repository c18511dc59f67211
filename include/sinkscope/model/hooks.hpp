// Hook points with TransformerLens names and the capture spec that selects which of them a
// forward pass keeps. Every hook name is built from the one table in src/model/hooks.cpp.
#pragma once

#include <cstdint>
#include <regex>
#include <string>
#include <vector>

namespace sinkscope::model {

struct ModelConfig;

enum class HookPoint {
    Embed,       // hook_embed                      [batch, pos, d_model]
    ResidPre,    // blocks.L.hook_resid_pre         [batch, pos, d_model]
    ResidMid,    // blocks.L.hook_resid_mid         [batch, pos, d_model]
    ResidPost,   // blocks.L.hook_resid_post        [batch, pos, d_model]
    Q,           // blocks.L.attn.hook_q            [batch, pos, n_heads, d_head]
    K,           // blocks.L.attn.hook_k            [batch, pos, n_kv_heads, d_head] (GQA kept)
    V,           // blocks.L.attn.hook_v            [batch, pos, n_kv_heads, d_head]
    RotQ,        // blocks.L.attn.hook_rot_q        [batch, pos, n_heads, d_head]
    RotK,        // blocks.L.attn.hook_rot_k        [batch, pos, n_kv_heads, d_head]
    AttnScores,  // blocks.L.attn.hook_attn_scores  [batch, n_heads, query, key], masked = -inf
    Pattern,     // blocks.L.attn.hook_pattern      [batch, n_heads, query, key], rows sum to 1
    Z,           // blocks.L.attn.hook_z            [batch, pos, n_heads, d_head] (after masks)
    FinalNorm,   // ln_final.hook_normalized        [batch, pos, d_model] (models with a final norm)
};
constexpr int kNumHookPoints = 13;

// "hook_embed", "blocks.3.hook_resid_pre", "blocks.3.attn.hook_pattern", ...
std::string hook_name(HookPoint point, int64_t layer = -1);
// Glob matching this hook in every layer: "blocks.*.attn.hook_pattern".
std::string hook_glob(HookPoint point);
// Every hook of a model, in forward order.
std::vector<std::string> list_hooks(const ModelConfig& config);
bool is_layer_hook(HookPoint point);

// Which hooks to keep. Each pattern is a glob ('*' any run of characters, '?' one character)
// matched against the whole name, or, with the prefix "re:", an ECMAScript regex (full match).
// Several patterns: a name is kept when any matches. No pattern: nothing is kept.
class CaptureSpec {
public:
    CaptureSpec() = default;
    explicit CaptureSpec(const std::vector<std::string>& patterns);
    // Comma-separated list of patterns (the CLI's --hooks).
    static CaptureSpec parse(const std::string& comma_separated);
    static CaptureSpec all();
    static CaptureSpec attention();  // every layer's hook_attn_scores and hook_pattern

    bool wants(const std::string& hook) const;
    bool empty() const { return matchers_.empty(); }
    const std::vector<std::string>& patterns() const { return patterns_; }
    // Whether the caller reads ForwardResult::logits (default). Without, the language-model head
    // (the largest matrix product of a long input, [T, d_vocab]) is not run and the logits stay
    // undefined.
    bool wants_logits() const { return logits_; }
    CaptureSpec& without_logits() {
        logits_ = false;
        return *this;
    }

private:
    std::vector<std::string> patterns_;
    std::vector<std::regex> matchers_;
    bool logits_ = true;
};

}  // namespace sinkscope::model
