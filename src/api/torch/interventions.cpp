// Ready-made interventions as editing hooks (api/interventions.hpp).
#include "sinkscope/api/interventions.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "sinkscope/analysis/layers.hpp"
#include "sinkscope/api/model_commands.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"

namespace sinkscope::api {

namespace {

using model::HookPoint;

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::stringstream in(s);
    for (std::string item; std::getline(in, item, sep);) {
        const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
        if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
    }
    return out;
}

[[noreturn]] void bad(const std::string& part, const std::string& why) {
    throw UsageError("--intervene: '" + part + "': " + why);
}

double parse_scale(const std::string& part, const std::string& v) {
    try {
        size_t used = 0;
        const double x = std::stod(v, &used);
        if (used == v.size() && std::isfinite(x)) return x;
    } catch (const std::exception&) {
    }
    bad(part, "scale must be a finite number, got '" + v + "'");
}

// The sink's name in the canonical text: first, bos, argmax or the position.
std::string sink_name(const metrics::SinkPolicy& p) {
    switch (p.kind) {
        case metrics::SinkPolicy::Kind::Bos:
            return "bos";
        case metrics::SinkPolicy::Kind::Argmax:
            return "argmax";
        case metrics::SinkPolicy::Kind::Position:
            return std::to_string(p.position);
        default:
            return "first";
    }
}

Intervention parse_one(const std::string& part, const model::ModelConfig& c,
                       const std::string& default_sink) {
    const std::vector<std::string> fields = split(part, ':');
    Intervention iv;
    const std::string& name = fields.front();
    if (name == "sink_removal")
        iv.kind = Intervention::Kind::SinkRemoval;
    else if (name == "sink_key")
        iv.kind = Intervention::Kind::SinkKey;
    else if (name == "sink_value")
        iv.kind = Intervention::Kind::SinkValue;
    else if (name == "head_ablation")
        iv.kind = Intervention::Kind::HeadAblation;
    else
        bad(part, "unknown intervention '" + name +
                      "' (sink_removal, sink_key, sink_value, head_ablation)");
    const bool sink_kind = iv.kind != Intervention::Kind::HeadAblation;
    std::string sink = default_sink;
    bool have_scale = false, have_mode = false;
    for (size_t k = 1; k < fields.size(); ++k) {
        const auto eq = fields[k].find('=');
        if (eq == std::string::npos) bad(part, "expected key=value, got '" + fields[k] + "'");
        const std::string key = fields[k].substr(0, eq), v = fields[k].substr(eq + 1);
        if (key == "renormalize" && iv.kind == Intervention::Kind::SinkRemoval) {
            if (v != "yes" && v != "no") bad(part, "renormalize is yes or no");
            iv.renormalize = v == "yes";
        } else if (key == "scale" && (iv.kind == Intervention::Kind::SinkKey ||
                                      iv.kind == Intervention::Kind::SinkValue)) {
            iv.scale = parse_scale(part, v);
            have_scale = true;
        } else if (key == "layers" && sink_kind) {
            try {
                iv.layers = analysis::select_layers(v, c.n_layers).ids;
            } catch (const UsageError& e) {
                bad(part, e.what());
            }
        } else if (key == "sink" && sink_kind) {
            sink = v;
        } else if (key == "mode" && !sink_kind) {
            if (v == "zero")
                iv.ablation = Intervention::Ablation::Zero;
            else if (v == "mean")
                iv.ablation = Intervention::Ablation::Mean;
            else if (v == "resample")
                iv.ablation = Intervention::Ablation::Resample;
            else
                bad(part, "mode is zero, mean or resample");
            have_mode = true;
        } else if (key == "heads" && !sink_kind) {
            try {
                iv.heads = parse_head_list(v, c.n_layers, c.n_heads);
            } catch (const UsageError& e) {
                bad(part, e.what());
            }
        } else {
            bad(part, "no key '" + key + "' for " + name);
        }
    }
    try {  // the analyses' --sink rule (spec section 0), auto resolved for this model
        iv.sink = metrics::resolve_auto(
            metrics::parse_sink_policy(sink),
            c.causal ? metrics::Masking::Causal : metrics::Masking::Bidirectional);
    } catch (const UsageError& e) {
        bad(part, e.what());
    }
    if ((iv.kind == Intervention::Kind::SinkKey || iv.kind == Intervention::Kind::SinkValue)) {
        if (!have_scale) bad(part, "needs scale=X");
        if (iv.sink.kind == metrics::SinkPolicy::Kind::Argmax)
            bad(part,
                "sink=argmax is read from the pattern, after the keys and values: give "
                "first, bos or a position");
    }
    if (!sink_kind && (!have_mode || iv.heads.empty())) bad(part, "needs mode= and heads=");
    // Canonical text.
    std::string t = name;
    switch (iv.kind) {
        case Intervention::Kind::SinkRemoval:
            t += std::string(":renormalize=") + (iv.renormalize ? "yes" : "no");
            break;
        case Intervention::Kind::SinkKey:
        case Intervention::Kind::SinkValue:
            t += ":scale=" + format_number(iv.scale);
            break;
        case Intervention::Kind::HeadAblation: {
            static const char* kModes[] = {"zero", "mean", "resample"};
            t += std::string(":mode=") + kModes[static_cast<int>(iv.ablation)] + ":heads=";
            for (size_t k = 0; k < iv.heads.size(); ++k)
                t += (k ? "," : "") + std::to_string(iv.heads[k].first) + "." +
                     std::to_string(iv.heads[k].second);
            break;
        }
    }
    if (sink_kind) {
        if (!iv.layers.empty()) {
            analysis::LayerSelection sel{iv.layers, c.n_layers};
            t += ":layers=" + sel.spec();
        }
        t += ":sink=" + sink_name(iv.sink);
    }
    iv.text = t;
    return iv;
}

bool in_layers(const Intervention& iv, int64_t layer) {
    return iv.layers.empty() || std::binary_search(iv.layers.begin(), iv.layers.end(), layer);
}

// The fixed sink positions of an input (first, bos, N); empty for argmax.
std::vector<int64_t> sink_positions(const Intervention& iv, const InterventionInput& in,
                                    int64_t T) {
    using Kind = metrics::SinkPolicy::Kind;
    if (iv.sink.kind == Kind::Argmax) return {};
    if (iv.sink.kind == Kind::First) return {0};
    if (iv.sink.kind == Kind::Bos) {
        std::vector<int64_t> out;
        for (size_t i = 0; i < in.ids.size(); ++i)
            if (in.ids[i] == in.bos_id && in.bos_id >= 0) out.push_back(int64_t(i));
        if (out.empty())
            throw UsageError("--intervene: " + iv.text + ": the input has no BOS token" +
                             (in.bos_id < 0 ? " (the model's tokenizer has none)" : ""));
        return out;
    }
    const int64_t p = iv.sink.position;
    if (p >= T)
        throw UsageError("--intervene: " + iv.text + ": sink position " + std::to_string(p) +
                         " is past the input's " + std::to_string(T) + " tokens");
    return {p};
}

}  // namespace

std::string InterventionPlan::text() const {
    std::string t;
    for (const auto& iv : list) t += (t.empty() ? "" : ";") + iv.text;
    return t;
}

nlohmann::json InterventionPlan::record() const {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& iv : list) j.push_back(iv.text);
    return j;
}

bool InterventionPlan::edits_pattern() const {
    for (const auto& iv : list)
        if (iv.kind == Intervention::Kind::SinkRemoval) return true;
    return false;
}

bool InterventionPlan::needs_mean_z() const {
    for (const auto& iv : list)
        if (iv.kind == Intervention::Kind::HeadAblation &&
            iv.ablation == Intervention::Ablation::Mean)
            return true;
    return false;
}

bool InterventionPlan::needs_resample() const {
    return !resample_layers().empty();
}

std::vector<int64_t> InterventionPlan::resample_layers() const {
    std::vector<int64_t> out;
    for (const auto& iv : list)
        if (iv.kind == Intervention::Kind::HeadAblation &&
            iv.ablation == Intervention::Ablation::Resample)
            for (const auto& [layer, head] : iv.heads) out.push_back(layer);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

InterventionPlan parse_interventions(const std::string& spec, const model::ModelConfig& c,
                                     const std::string& default_sink) {
    InterventionPlan plan;
    for (const std::string& part : split(spec, ';'))
        plan.list.push_back(parse_one(part, c, default_sink));
    return plan;
}

at::Tensor remove_sinks(const at::Tensor& pattern, const std::vector<int64_t>& sinks,
                        bool renormalize, bool causal, int64_t window, bool keep_total) {
    const int64_t T = pattern.size(-1);
    const auto dev = pattern.device();
    const at::Tensor cols = at::tensor(sinks, at::kLong).to(dev);
    at::Tensor p = pattern.clone();
    p.index_fill_(-1, cols, 0.0);
    if (!renormalize) return p;
    // Visible non-sink keys of each row [T, T] (spec section 0), for rows left with no mass.
    const at::Tensor q =
        at::arange(T, at::TensorOptions().dtype(at::kLong).device(dev)).unsqueeze(1);
    const at::Tensor k = q.transpose(0, 1);
    at::Tensor visible = at::ones({T, T}, at::TensorOptions().dtype(at::kBool).device(dev));
    if (causal) visible = k <= q;
    if (window > 0) visible = visible.logical_and(k > q - window);
    visible.index_fill_(-1, cols, false);
    const at::Tensor n_visible = visible.sum(-1, true);  // [T, 1]
    const at::Tensor uniform =
        visible.to(p.scalar_type()) / n_visible.clamp_min(1).to(p.scalar_type());
    const at::Tensor sums = p.sum(-1, true);  // [batch, H, T, 1]
    at::Tensor renormalised = p / sums.where(sums > 0, at::ones_like(sums));
    at::Tensor spread = uniform.expand_as(p);
    if (keep_total) {  // each row back to the total it had before the sinks were removed
        const at::Tensor totals = pattern.sum(-1, true);
        renormalised = renormalised * totals;
        spread = spread * totals;
    }
    return at::where(sums > 0, renormalised, at::where(n_visible > 0, spread, pattern));
}

void add_interventions(model::CaptureSpec& spec, const InterventionPlan& plan,
                       const model::ModelConfig& c, const InterventionInput& input) {
    const int64_t T = static_cast<int64_t>(input.ids.size());
    for (const Intervention& iv : plan.list) {
        switch (iv.kind) {
            case Intervention::Kind::SinkRemoval: {
                const std::vector<int64_t> fixed = sink_positions(iv, input, T);
                spec.edit(model::hook_glob(HookPoint::Pattern), [iv, fixed, c](
                                                                    const at::Tensor& p,
                                                                    const model::HookSite& site) {
                    if (!in_layers(iv, site.layer)) return at::Tensor();
                    std::vector<int64_t> sinks = fixed;
                    if (sinks.empty())  // argmax: the most attended key of the layer
                        sinks.push_back(p.to(at::kDouble).mean({0, 1, 2}).argmax().item<int64_t>());
                    return remove_sinks(p, sinks, iv.renormalize, c.causal,
                                        c.layer_window(site.layer), !c.rows_sum_to_one());
                });
                break;
            }
            case Intervention::Kind::SinkKey:
            case Intervention::Kind::SinkValue: {
                const std::vector<int64_t> sinks = sink_positions(iv, input, T);
                const HookPoint point =
                    iv.kind == Intervention::Kind::SinkKey ? HookPoint::K : HookPoint::V;
                spec.edit(model::hook_glob(point),
                          [iv, sinks](const at::Tensor& t, const model::HookSite& site) {
                              if (!in_layers(iv, site.layer)) return at::Tensor();
                              at::Tensor out = t.clone();  // [batch, pos, n_kv, d_head]
                              for (int64_t s : sinks) out.select(1, s).mul_(iv.scale);
                              return out;
                          });
                break;
            }
            case Intervention::Kind::HeadAblation: {
                if (iv.ablation == Intervention::Ablation::Mean)
                    SS_CHECK(input.z_mean.defined(), "mean ablation needs z_mean");
                const at::Tensor z_mean = input.z_mean;
                const std::map<int64_t, at::Tensor> source = input.source_z;
                spec.edit(model::hook_glob(HookPoint::Z),
                          [iv, z_mean, source](const at::Tensor& z, const model::HookSite& site) {
                              at::Tensor out;  // [batch, pos, n_heads, d_head]
                              for (const auto& lh : iv.heads) {
                                  if (lh.first != site.layer) continue;
                                  if (!out.defined()) out = z.clone();
                                  at::Tensor zh = out.select(2, lh.second);  // [batch, pos, d]
                                  if (iv.ablation == Intervention::Ablation::Zero) {
                                      zh.zero_();
                                  } else if (iv.ablation == Intervention::Ablation::Mean) {
                                      zh.copy_(z_mean[site.layer][lh.second]
                                                   .to(z.device(), z.scalar_type())
                                                   .view({1, 1, -1})
                                                   .expand_as(zh));
                                  } else {
                                      const at::Tensor& src = source.at(site.layer);
                                      const int64_t Ts = src.size(1), T = z.size(1);
                                      const at::Tensor pos =
                                          at::arange(T, at::kLong).clamp_max(Ts - 1).to(z.device());
                                      zh.copy_(src.select(2, lh.second)
                                                   .index_select(1, pos)
                                                   .to(z.device(), z.scalar_type())
                                                   .expand_as(zh));
                                  }
                              }
                              return out;
                          });
                break;
            }
        }
    }
}

RunInterventions::RunInterventions(const model::Model& m, const analysis::AnalysisInputs& inputs,
                                   InterventionPlan plan, int32_t bos_id)
    : m_(m), inputs_(inputs), plan_(std::move(plan)), bos_id_(bos_id) {
    if (plan_.empty()) return;
    if (m.config().is_vision())
        throw UsageError("--intervene: vision models are not supported yet (text models only)");
    if (!plan_.needs_mean_z()) return;
    // hook_z's mean over every position of every input, summed in float64 input by input.
    const model::ModelConfig& c = m.config();
    std::vector<std::string> hooks;
    for (int64_t l = 0; l < c.n_layers; ++l) hooks.push_back(model::hook_name(HookPoint::Z, l));
    at::Tensor sum = at::zeros({c.n_layers, c.n_heads, c.d_head}, at::kDouble);
    int64_t count = 0;
    for (size_t n = 0; n < inputs.size(); ++n) {
        const model::ForwardResult r =
            m.forward(inputs.model_input(m, n), model::CaptureSpec(hooks).without_logits());
        for (int64_t l = 0; l < c.n_layers; ++l)  // [1, T, H, dh] -> [H, dh]
            sum[l] += r.captured.at(hooks[size_t(l)])[0].to(at::kCPU, at::kDouble).sum(0);
        count += inputs.n_tokens(n);
    }
    z_mean_ = sum / double(count);
}

model::CaptureSpec RunInterventions::edits_for(size_t n) const {
    model::CaptureSpec spec;
    if (plan_.empty()) return spec;
    InterventionInput in;
    in.ids = inputs_.ids[n];
    in.bos_id = bos_id_;
    in.z_mean = z_mean_;
    if (plan_.needs_resample()) {  // the source: the next input of the run
        const size_t src = (n + 1) % inputs_.ids.size();
        std::vector<std::string> hooks;
        for (int64_t l : plan_.resample_layers())
            hooks.push_back(model::hook_name(HookPoint::Z, l));
        const model::ForwardResult r =
            m_.forward(inputs_.model_input(m_, src), model::CaptureSpec(hooks).without_logits());
        for (int64_t l : plan_.resample_layers())
            in.source_z[l] = r.captured.at(model::hook_name(HookPoint::Z, l));
    }
    add_interventions(spec, plan_, m_.config(), in);
    return spec;
}

}  // namespace sinkscope::api
