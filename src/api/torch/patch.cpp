// Activation patching (api/patch.hpp).
#include "sinkscope/api/patch.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/model/hooks.hpp"

namespace sinkscope::api {

namespace {

using model::HookPoint;

struct HookKind {
    const char* name;
    HookPoint point;
    int head_dim;  // the dimension of heads (-1: none); kv: counts n_kv_heads
    bool kv;
};

constexpr HookKind kKinds[] = {
    {"embed", HookPoint::Embed, -1, false},
    {"resid_pre", HookPoint::ResidPre, -1, false},
    {"q", HookPoint::Q, 2, false},
    {"k", HookPoint::K, 2, true},
    {"v", HookPoint::V, 2, true},
    {"rot_q", HookPoint::RotQ, 2, false},
    {"rot_k", HookPoint::RotK, 2, true},
    {"attn_scores", HookPoint::AttnScores, 1, false},
    {"pattern", HookPoint::Pattern, 1, false},
    {"z", HookPoint::Z, 2, false},
    {"resid_mid", HookPoint::ResidMid, -1, false},
    {"resid_post", HookPoint::ResidPost, -1, false},
};

const HookKind& kind_of(const std::string& name) {
    for (const HookKind& k : kKinds)
        if (name == k.name) return k;
    std::string known;
    for (const HookKind& k : kKinds) known += std::string(known.empty() ? "" : ", ") + k.name;
    throw UsageError("--hook-kinds: unknown hook kind '" + name + "' (" + known + ")");
}

// One token of the metric: #ID, or text that the tokenizer makes one token.
int32_t metric_token(const model::Model& m, const std::string& what, const std::string& text) {
    int64_t id = -1;
    if (text.size() > 1 && text[0] == '#') {
        try {
            size_t used = 0;
            id = std::stoll(text.substr(1), &used);
            if (used != text.size() - 1) id = -1;
        } catch (const std::exception&) {
            id = -1;
        }
        if (id < 0) throw UsageError("--" + what + ": '" + text + "' is not #ID");
    } else {
        const std::vector<int32_t> ids = m.encode(text, tokenizer::BosPolicy::Never);
        if (ids.size() != 1)
            throw UsageError("--" + what + ": '" + text + "' is " + std::to_string(ids.size()) +
                             " tokens, not one (give #ID for a token id)");
        id = ids[0];
    }
    if (id >= m.config().d_vocab)
        throw UsageError("--" + what + ": token id " + std::to_string(id) +
                         " is outside the vocabulary");
    return static_cast<int32_t>(id);
}

// The metric of a run's logits [1, T, V].
struct Metric {
    std::string name;           // nll | nll_answer | logit_diff
    std::vector<int32_t> next;  // nll: the source's tokens 1..T-1
    int32_t answer = -1, wrong = -1;
    double operator()(const at::Tensor& logits_any) const {
        const at::Tensor logits = logits_any[0].to(at::kCPU, at::kDouble);  // [T, V]
        const int64_t T = logits.size(0);
        if (name == "logit_diff")
            return logits[T - 1][answer].item<double>() - logits[T - 1][wrong].item<double>();
        const at::Tensor lp = at::log_softmax(logits, -1);
        if (name == "nll_answer") return -lp[T - 1][answer].item<double>();
        double sum = 0;  // fixed order
        for (int64_t t = 0; t + 1 < T; ++t) sum -= lp[t][next[size_t(t) + 1]].item<double>();
        return sum / double(T - 1);
    }
};

Metric make_metric(const model::Model& m, const std::vector<int32_t>& source,
                   const PatchOptions& o) {
    Metric f;
    if (o.metric == "logit_diff") {
        if (o.answer.empty() || o.wrong.empty())
            throw UsageError("--metric logit_diff needs --answer and --wrong");
        f.name = "logit_diff";
        f.answer = metric_token(m, "answer", o.answer);
        f.wrong = metric_token(m, "wrong", o.wrong);
    } else if (o.metric == "nll") {
        if (!o.wrong.empty()) throw UsageError("--wrong goes with --metric logit_diff");
        if (!o.answer.empty()) {
            f.name = "nll_answer";
            f.answer = metric_token(m, "answer", o.answer);
        } else {
            if (source.size() < 2) throw UsageError("--metric nll needs at least 2 tokens");
            f.name = "nll";
            f.next = source;
        }
    } else {
        throw UsageError("--metric must be nll or logit_diff, got '" + o.metric + "'");
    }
    return f;
}

at::Tensor ids_tensor(const std::vector<int32_t>& ids) {
    return at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong).view({1, -1});
}

}  // namespace

PatchSweep patch_sweep(const model::Model& m, const std::vector<int32_t>& source,
                       const std::vector<int32_t>& target, const PatchOptions& o) {
    const model::ModelConfig& c = m.config();
    if (!c.causal || c.is_vision())
        throw UnsupportedError(m.path.string(), "patch runs causal language models only");
    if (source.size() != target.size())
        throw UsageError("source and target must have the same number of tokens: " +
                         std::to_string(source.size()) + " vs " + std::to_string(target.size()));
    std::vector<const HookKind*> kinds;
    for (const std::string& k : split_list(o.hook_kinds)) kinds.push_back(&kind_of(k));
    if (kinds.empty()) throw UsageError("--hook-kinds names no hook kind");
    const Metric metric = make_metric(m, source, o);
    const std::vector<std::string> names = model::list_hooks(c);
    const at::Tensor src_ids = ids_tensor(source), tgt_ids = ids_tensor(target);
    const model::ForwardResult src = m.forward(src_ids, model::CaptureSpec::all());
    PatchSweep out;
    out.source_value = metric(src.logits);
    out.target_value = metric(m.forward(tgt_ids).logits);
    out.table = io::Table(analysis::tables::kPatch.columns);
    const double span = out.source_value - out.target_value;
    const auto add = [&](const std::string& hook, int64_t layer, int64_t head, int64_t position,
                         const model::CaptureSpec& spec) {
        const double v = metric(m.forward(tgt_ids, spec).logits);
        const double recovered =
            span != 0 ? (v - out.target_value) / span : std::numeric_limits<double>::quiet_NaN();
        out.table.add_row({hook, layer, head, position, metric.name, v, out.target_value,
                           out.source_value, recovered});
    };
    // One part of a hook taken from the source: index `i` of dimension `dim`.
    const auto part = [](const at::Tensor& from, int dim, int64_t i) {
        return [from, dim, i](const at::Tensor& t, const model::HookSite&) {
            at::Tensor edited = t.clone();
            edited.select(dim, i).copy_(from.select(dim, i));
            return edited;
        };
    };
    for (const HookKind* k : kinds) {
        const bool layered = model::is_layer_hook(k->point);
        for (int64_t l = layered ? 0 : -1; l < (layered ? c.n_layers : 0); ++l) {
            const std::string name = model::hook_name(k->point, l);
            if (std::find(names.begin(), names.end(), name) == names.end()) continue;
            const at::Tensor from = src.captured.at(name);
            model::CaptureSpec whole;
            whole.edit(name, [from](const at::Tensor&, const model::HookSite&) { return from; });
            add(name, l, -1, -1, whole);
            if (o.per_head && k->head_dim >= 0)
                for (int64_t h = 0; h < from.size(k->head_dim); ++h) {
                    model::CaptureSpec one;
                    one.edit(name, part(from, k->head_dim, h));
                    add(name, l, h, -1, one);
                }
            // Positions: dimension 1, the query dimension (2) of the attention squares.
            const int pos_dim = k->head_dim == 1 ? 2 : 1;
            if (o.per_position)
                for (int64_t p = 0; p < from.size(pos_dim); ++p) {
                    model::CaptureSpec one;
                    one.edit(name, part(from, pos_dim, p));
                    add(name, l, -1, p, one);
                }
        }
    }
    model::CaptureSpec every;
    every.edit("*", [&src](const at::Tensor&, const model::HookSite& site) {
        return src.captured.at(site.name);
    });
    add("*", -1, -1, -1, every);
    return out;
}

std::string run_patch(const PatchOptions& o) {
    if (o.out.empty()) throw UsageError("--out is required");
    if (o.source.empty() || o.target.empty())
        throw UsageError("--source and --target are required");
    check_output_dir(o.out, o.overwrite);  // before the model runs
    const model::Model m = model::load_model(o.m.model, load_options(o.m));
    const auto bos = tokenizer::parse_bos_policy(o.m.bos);
    const std::vector<int32_t> source = m.encode(o.source, bos), target = m.encode(o.target, bos);
    const PatchSweep sweep = patch_sweep(m, source, target, o);
    OutputDir dir(o.out, o.overwrite);
    sweep.table.write(dir.staging(), analysis::tables::kPatch.name);
    io::RunRecord rec(o.command_line.empty() ? "patch" : o.command_line, compute_threads(o.m));
    rec.set_model_files(o.m.model, m.files);
    rec.set("architecture", m.config().architecture);
    rec.set("dtype", model::compute_dtype_name(m.runtime().dtype));
    rec.set("bos_policy", tokenizer::bos_policy_name(bos));
    rec.set("source", o.source);
    rec.set("target", o.target);
    rec.set("n_tokens", static_cast<int64_t>(source.size()));
    rec.set("hook_kinds", o.hook_kinds);
    rec.set("metric", o.metric);
    rec.set("answer", o.answer);
    rec.set("wrong", o.wrong);
    rec.set("per_head", o.per_head);
    rec.set("per_position", o.per_position);
    rec.set("target_value", sweep.target_value);
    rec.set("source_value", sweep.source_value);
    rec.set("rows",
            "one per hook (head -1, position -1), per head and per position of it patched from "
            "the source run into the target run; hook * patches every hook (the source run "
            "itself); recovered = (value - target_value) / (source_value - target_value)");
    rec.write(dir.staging());
    dir.commit();
    return dir.final_path().string();
}

}  // namespace sinkscope::api
