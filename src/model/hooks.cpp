// Hook names (the one table of them) and the capture spec's glob/regex matching.
#include "sinkscope/model/hooks.hpp"

#include <array>
#include <sstream>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/model/config.hpp"

namespace sinkscope::model {

namespace {

struct HookRow {
    HookPoint point;
    const char* scope;  // "" (model), "blocks.{L}." or "blocks.{L}.attn."
    const char* name;
};

// Forward order within a block; TransformerLens names.
constexpr std::array<HookRow, kNumHookPoints> kHooks{{
    {HookPoint::Embed, "", "hook_embed"},
    {HookPoint::ResidPre, "blocks.{L}.", "hook_resid_pre"},
    {HookPoint::Q, "blocks.{L}.attn.", "hook_q"},
    {HookPoint::K, "blocks.{L}.attn.", "hook_k"},
    {HookPoint::V, "blocks.{L}.attn.", "hook_v"},
    {HookPoint::RotQ, "blocks.{L}.attn.", "hook_rot_q"},
    {HookPoint::RotK, "blocks.{L}.attn.", "hook_rot_k"},
    {HookPoint::AttnScores, "blocks.{L}.attn.", "hook_attn_scores"},
    {HookPoint::Pattern, "blocks.{L}.attn.", "hook_pattern"},
    {HookPoint::Z, "blocks.{L}.attn.", "hook_z"},
    {HookPoint::ResidMid, "blocks.{L}.", "hook_resid_mid"},
    {HookPoint::ResidPost, "blocks.{L}.", "hook_resid_post"},
    {HookPoint::FinalNorm, "", "ln_final.hook_normalized"},
}};

const HookRow& row(HookPoint p) {
    for (const auto& r : kHooks)
        if (r.point == p) return r;
    throw InternalError("hook point missing from the hook table");
}

std::string glob_to_regex(const std::string& glob) {
    std::string re;
    for (char c : glob) {
        if (c == '*')
            re += ".*";
        else if (c == '?')
            re += '.';
        else if (std::string("\\^$.|+()[]{}").find(c) != std::string::npos)
            re += std::string("\\") + c;
        else
            re += c;
    }
    return re;
}

}  // namespace

bool is_layer_hook(HookPoint point) {
    return row(point).scope[0] != '\0';
}

std::string hook_name(HookPoint point, int64_t layer) {
    const HookRow& r = row(point);
    std::string scope = r.scope;
    auto at = scope.find("{L}");
    if (at != std::string::npos) {
        SS_CHECK(layer >= 0, "hook ", r.name, " needs a layer");
        scope.replace(at, 3, std::to_string(layer));
    }
    return scope + r.name;
}

std::string hook_glob(HookPoint point) {
    const std::string s = std::string(row(point).scope) + row(point).name;
    const auto at = s.find("{L}");
    return at == std::string::npos ? s : s.substr(0, at) + "*" + s.substr(at + 3);
}

std::vector<std::string> list_hooks(const ModelConfig& config) {
    std::vector<std::string> out{hook_name(HookPoint::Embed)};
    for (int64_t l = 0; l < config.n_layers; ++l)
        for (const auto& r : kHooks)
            if (is_layer_hook(r.point)) out.push_back(hook_name(r.point, l));
    // Post-LN encoders (BERT, RoBERTa) have no final norm.
    if (config.causal || config.is_vision()) out.push_back(hook_name(HookPoint::FinalNorm));
    return out;
}

namespace {

std::regex pattern_regex(const std::string& p) {
    std::string re = p.rfind("re:", 0) == 0 ? p.substr(3) : glob_to_regex(p);
    try {
        return std::regex(re, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& e) {
        throw UsageError("hook pattern '" + p + "' is not a valid regex: " + e.what());
    }
}

}  // namespace

CaptureSpec::CaptureSpec(const std::vector<std::string>& patterns) : patterns_(patterns) {
    for (const auto& p : patterns) matchers_.push_back(pattern_regex(p));
}

CaptureSpec CaptureSpec::parse(const std::string& comma_separated) {
    std::vector<std::string> parts;
    std::stringstream in(comma_separated);
    for (std::string item; std::getline(in, item, ',');)
        if (!item.empty()) parts.push_back(item);
    return CaptureSpec(parts);
}

CaptureSpec CaptureSpec::all() {
    return CaptureSpec({"*"});
}

CaptureSpec CaptureSpec::attention() {
    return CaptureSpec({hook_glob(HookPoint::AttnScores), hook_glob(HookPoint::Pattern)});
}

bool CaptureSpec::wants(const std::string& hook) const {
    for (const auto& m : matchers_)
        if (std::regex_match(hook, m)) return true;
    return false;
}

CaptureSpec& CaptureSpec::edit(const std::string& pattern, HookFn fn) {
    std::regex re = pattern_regex(pattern);
    return edit([re](const std::string& hook) { return std::regex_match(hook, re); },
                std::move(fn));
}

CaptureSpec& CaptureSpec::edit(std::function<bool(const std::string&)> filter, HookFn fn) {
    SS_CHECK(filter && fn, "an editing hook needs a filter and a function");
    edits_.push_back(Edit{std::move(filter), std::move(fn)});
    return *this;
}

CaptureSpec& CaptureSpec::add_edits(const CaptureSpec& other) {
    edits_.insert(edits_.end(), other.edits_.begin(), other.edits_.end());
    return *this;
}

bool CaptureSpec::edits(const std::string& hook) const {
    for (const auto& e : edits_)
        if (e.where(hook)) return true;
    return false;
}

at::Tensor CaptureSpec::apply_edits(const at::Tensor& activation, const HookSite& site) const {
    at::Tensor t = activation;
    for (const auto& e : edits_) {
        if (!e.where(site.name)) continue;
        at::Tensor out = e.fn(t, site);
        if (!out.defined()) continue;
        if (out.sizes() != t.sizes())
            throw UsageError("the hook at " + site.name + " returned shape " +
                             shape_text(out.sizes().vec()) + ", expected " +
                             shape_text(t.sizes().vec()));
        t = out.to(activation.device(), activation.scalar_type()).contiguous();
    }
    return t;
}

}  // namespace sinkscope::model
