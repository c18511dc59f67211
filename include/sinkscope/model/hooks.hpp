// Hook points with TransformerLens names and the capture spec that selects which of them a
// forward pass keeps. Every hook name is built from the one table in src/model/hooks.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

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

// Where an editing hook is called: the hook's name ("blocks.3.attn.hook_pattern"), its point and
// layer (-1 outside the blocks).
struct HookSite {
    const std::string& name;
    HookPoint point;
    int64_t layer;
};

// An editing hook (issue 52), TransformerLens' forward hook: called with the activation at a hook
// point as the forward computed it (shapes in HookPoint's comments) and returns the tensor the
// forward goes on with: the same shape, any dtype or device (converted to the forward's), or an
// undefined tensor to go on with the activation as it is (after any in-place edit of it). Hooks
// run on the thread of the forward, in the order they were added; one matching a hook point
// that a forward does not reach (a stage, a model without a final norm) is not called.
using HookFn = std::function<at::Tensor(const at::Tensor& activation, const HookSite& site)>;

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

    // Adds an editing hook at every hook whose name matches `pattern` (a glob or "re:" regex as
    // above), or for which `filter` returns true. A kept hook holds the activation as edited.
    CaptureSpec& edit(const std::string& pattern, HookFn fn);
    CaptureSpec& edit(std::function<bool(const std::string&)> filter, HookFn fn);
    // Adds every editing hook of `other` after this one's.
    CaptureSpec& add_edits(const CaptureSpec& other);
    bool has_edits() const { return !edits_.empty(); }
    // Whether some editing hook matches `hook`.
    bool edits(const std::string& hook) const;
    // `activation` passed through every editing hook that matches site.name, in order: UsageError
    // naming the hook when one returns a tensor of another shape. Returns `activation` itself
    // when no hook replaced it.
    at::Tensor apply_edits(const at::Tensor& activation, const HookSite& site) const;
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
    struct Edit {
        std::function<bool(const std::string&)> where;
        HookFn fn;
    };
    std::vector<std::string> patterns_;
    std::vector<std::regex> matchers_;
    std::vector<Edit> edits_;
    bool logits_ = true;
};

}  // namespace sinkscope::model
