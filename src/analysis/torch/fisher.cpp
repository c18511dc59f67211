// The Fisher accumulator (analysis/fisher.hpp): per-sample gradients of the model's objective,
// squared and summed per parameter tensor and per attention-head block, then the tables.
#include "sinkscope/analysis/fisher.hpp"

#include <array>
#include <cmath>
#include <map>

#include <ATen/ATen.h>

#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/random.hpp"
#include "sinkscope/metrics/fisher_notebook.hpp"
#include "sinkscope/model/gradients.hpp"
#include "sinkscope/model/registry.hpp"

namespace sinkscope::analysis {

namespace {

using model::Component;
using model::TensorRole;

constexpr int kComponents = int(Component::Output) + 1;

// The checkpoint's name of a parameter: its role's tensor name in the format the model was read
// from, or for a part split from a fused tensor (GPT-2 c_attn, Phi-3 qkv_proj / gate_up_proj)
// the fused name with the part's role.
std::string parameter_name(const model::Model& m, const model::Parameter& p) {
    const model::ArchitectureInfo& arch = model::find_architecture(m.config().architecture);
    std::string name;
    try {
        name = model::tensor_name(arch, m.format, p.role, p.layer);
        if (!name.empty()) return name;
        const bool bias = p.role == TensorRole::AttnQBias || p.role == TensorRole::AttnKBias ||
                          p.role == TensorRole::AttnVBias;
        const TensorRole fused = p.role == TensorRole::FfnGate || p.role == TensorRole::FfnUp
                                     ? TensorRole::FfnGateUp
                                 : bias ? TensorRole::AttnQKVBias
                                        : TensorRole::AttnQKV;
        name = model::tensor_name(arch, m.format, fused, p.layer);
    } catch (const UnsupportedError&) {  // no layout for this format (models built in memory)
    }
    const std::string role = model::role_info(p.role).name;
    if (!name.empty()) return name + "[" + role + "]";
    return (p.layer >= 0 ? "layer " + std::to_string(p.layer) + " " : std::string()) + role;
}

}  // namespace

FisherKind parse_fisher_kind(const std::string& s) {
    if (s == "empirical") return FisherKind::Empirical;
    if (s == "true") return FisherKind::True;
    throw UsageError("--kind must be empirical or true, got '" + s + "'");
}

const char* fisher_kind_name(FisherKind k) {
    return k == FisherKind::True ? "true" : "empirical";
}

uint64_t fisher_label_seed(uint64_t seed, size_t sample_index, int64_t draw) {
    uint64_t s = seed ^ (0xd1b54a32d192ed03ull * (uint64_t(sample_index) + 1));
    s += uint64_t(draw) * 0x9e3779b97f4a7c15ull;
    return splitmix64(s);
}

FisherAccumulator::FisherAccumulator(const model::Model& m) {
    const model::ModelConfig& c = m.config();
    for (const model::Parameter& p : m.parameters()) {
        const model::RoleInfo& info = model::role_info(p.role);
        FisherTensor t;
        t.name = parameter_name(m, p);
        t.role = p.role;
        t.layer = p.layer;
        t.numel = p.tensor.numel();
        if (info.head_axis >= 0 && p.layer >= 0) {
            t.head_axis = info.head_axis;
            t.n_blocks = info.kv_heads ? c.n_kv_heads : c.n_heads;
            SS_CHECK(
                p.tensor.dim() > t.head_axis && p.tensor.size(t.head_axis) == t.n_blocks * c.d_head,
                "head blocks of ", t.name);
        }
        tensors_.push_back(std::move(t));
        heads_.emplace_back(size_t(tensors_.back().n_blocks), 0.0);
    }
    sum_.assign(tensors_.size(), 0.0);
}

bool FisherAccumulator::add(const model::Model& m, const model::PredictionTask& task,
                            size_t sample_index, const FisherOptions& o) {
    if (task.rows.empty()) return false;
    const bool drawn = o.kind == FisherKind::True;
    if (!drawn && task.targets.empty())
        throw UsageError(
            "--kind empirical needs the data's labels; images carry none (use "
            "--kind true: labels drawn from the model's own predictions)");
    SS_CHECK(o.draws >= 1, "at least one label draw");
    const int64_t n_sets = drawn ? o.draws : 1;
    std::vector<double> sample_sum(tensors_.size(), 0.0);
    std::vector<std::vector<double>> sample_heads = heads_;
    for (auto& h : sample_heads) std::fill(h.begin(), h.end(), 0.0);

    model::GradientScope scope(m);
    const at::Tensor log_probs = model::scored_log_probs(m, task);
    for (int64_t d = 0; d < n_sets; ++d) {
        const std::vector<int64_t> labels =
            drawn ? model::draw_labels(log_probs, fisher_label_seed(o.seed, sample_index, d))
                  : task.targets;
        const std::vector<at::Tensor> grads =
            scope.gradients(model::mean_nll(log_probs, labels), /*keep_graph=*/d + 1 < n_sets);
        for (size_t i = 0; i < tensors_.size(); ++i) {
            const FisherTensor& t = tensors_[i];
            const at::Tensor sq = grads[i].to(at::kCPU, at::kDouble).square();
            sample_sum[i] += sq.sum().item<double>();
            if (t.n_blocks == 0) continue;
            // Sum over everything but the head blocks: [n_blocks, d_head x rest] (rows) or
            // [rows, n_blocks, d_head] (output projection columns).
            const at::Tensor per_head =
                t.head_axis == 0
                    ? sq.reshape({t.n_blocks, -1}).sum(1)
                    : sq.reshape({sq.size(0), t.n_blocks, -1}).sum(at::IntArrayRef{0, 2});
            const at::Tensor ph = per_head.contiguous();
            for (int64_t b = 0; b < t.n_blocks; ++b)
                sample_heads[i][size_t(b)] += ph.data_ptr<double>()[b];
        }
    }
    // Mean over the draws, then one more sample in the running sums.
    const double w = 1.0 / double(n_sets);
    for (size_t i = 0; i < tensors_.size(); ++i) {
        sum_[i] += w * sample_sum[i];
        for (size_t b = 0; b < heads_[i].size(); ++b) heads_[i][b] += w * sample_heads[i][b];
    }
    ++n_;
    return true;
}

void FisherAccumulator::merge(const FisherAccumulator& other) {
    SS_CHECK(other.tensors_.size() == tensors_.size(), "merging Fisher sums of another model");
    for (size_t i = 0; i < tensors_.size(); ++i) {
        SS_CHECK(other.tensors_[i].name == tensors_[i].name,
                 "merging Fisher sums of another model");
        sum_[i] += other.sum_[i];
        for (size_t b = 0; b < heads_[i].size(); ++b) heads_[i][b] += other.heads_[i][b];
    }
    n_ += other.n_;
}

nlohmann::json FisherAccumulator::state() const {
    nlohmann::json names = nlohmann::json::array(), sums = nlohmann::json::array(),
                   heads = nlohmann::json::array();
    for (size_t i = 0; i < tensors_.size(); ++i) {
        names.push_back(tensors_[i].name);
        sums.push_back(sum_[i]);
        heads.push_back(heads_[i]);
    }
    return {{"n_samples", n_}, {"tensors", names}, {"sums", sums}, {"heads", heads}};
}

void FisherAccumulator::load_state(const nlohmann::json& j, const std::string& origin) {
    try {
        const auto& names = j.at("tensors");
        const auto& sums = j.at("sums");
        const auto& heads = j.at("heads");
        SS_CHECK_INPUT(names.is_array() && names.size() == tensors_.size() && sums.is_array() &&
                           sums.size() == tensors_.size() && heads.is_array() &&
                           heads.size() == tensors_.size(),
                       origin, "the saved Fisher sums are not those of this model");
        std::vector<double> s(tensors_.size());
        std::vector<std::vector<double>> h(tensors_.size());
        for (size_t i = 0; i < tensors_.size(); ++i) {
            SS_CHECK_INPUT(names[i].get<std::string>() == tensors_[i].name, origin,
                           "the saved Fisher sums are not those of this model");
            s[i] = sums[i].get<double>();
            h[i] = heads[i].get<std::vector<double>>();
            SS_CHECK_INPUT(h[i].size() == heads_[i].size() && std::isfinite(s[i]) && s[i] >= 0,
                           origin, "damaged Fisher sums");
        }
        const int64_t n = j.at("n_samples").get<int64_t>();
        SS_CHECK_INPUT(n >= 0, origin, "damaged Fisher sums");
        sum_ = std::move(s);
        heads_ = std::move(h);
        n_ = n;
    } catch (const nlohmann::json::exception&) {
        throw InputError(origin, "not a Fisher state (missing or mistyped fields)");
    }
}

// The released notebook's grouping (PAPERS.md B.8) by the tensors' checkpoint names: per layer
// k its "layers.<k>." tensors, the rest as layer -1 ("other"), and the model's attention, mlp and
// embedding groups and attention share; convention "ruscio2025".
void FisherAccumulator::notebook_rows(const model::ModelConfig& c, const std::string& model_name,
                                      FisherTables& out) const {
    namespace mt = tables::metric;
    std::vector<std::pair<std::string, double>> named;
    for (size_t i = 0; i < tensors_.size(); ++i)
        named.emplace_back(tensors_[i].name, sum_[i] / double(n_));
    const metrics::NotebookFisher nb = metrics::notebook_fisher(named, c.n_layers);
    const std::string conv = "ruscio2025";
    for (const auto& [k, f] : nb.layers)
        io::add_long_row(out.fisher, model_name, "", k, -1, mt::kFisherNotebookLayer, conv, f);
    io::add_long_row(out.fisher, model_name, "", -1, -1, mt::kFisherNotebookLayer, conv, nb.other);
    for (const auto& [metric, v] : {std::pair{mt::kFisherNotebookAttention, nb.attention},
                                    std::pair{mt::kFisherNotebookMlp, nb.mlp},
                                    std::pair{mt::kFisherNotebookEmbedding, nb.embedding},
                                    std::pair{mt::kAttentionShareNotebook, nb.attention_share()}})
        io::add_long_row(out.fisher, model_name, "", -1, -1, metric, conv, v);
}

FisherTables FisherAccumulator::finish(const model::ModelConfig& c, const std::string& model_name,
                                       FisherKind kind, bool notebook) const {
    SS_CHECK(n_ > 0, "Fisher tables of no sample");
    namespace t = tables;
    namespace mt = tables::metric;
    const std::string conv = fisher_kind_name(kind);
    const double inv_n = 1.0 / double(n_);
    FisherTables out{io::Table(t::kFisher.columns), io::Table(t::kFisherTensors.columns), 0, {}};

    // Per layer (index layer + 1; 0 = outside the blocks) and component: trace and size.
    const size_t n_rows = size_t(c.n_layers + 1);
    std::vector<std::array<double, kComponents>> by(n_rows), size(n_rows);
    for (auto& a : by) a.fill(0.0);
    for (auto& a : size) a.fill(0.0);
    // Per (layer, head): q, k, v, o. A key/value head's share is split evenly over the query
    // heads that read it (grouped-query attention), so the heads of a layer add up to its
    // attention weights (the output bias, shared by all heads, is in no head).
    const int64_t H = c.n_heads;
    std::vector<double> head(size_t(c.n_layers * H * 4), 0.0);
    for (size_t i = 0; i < tensors_.size(); ++i) {
        const FisherTensor& ft = tensors_[i];
        const model::RoleInfo& info = model::role_info(ft.role);
        const double f = sum_[i] * inv_n;
        out.total += f;
        by[size_t(ft.layer + 1)][size_t(info.component)] += f;
        size[size_t(ft.layer + 1)][size_t(info.component)] += double(ft.numel);
        out.tensors.add_row({model_name, std::string(), ft.layer, ft.name, std::string(info.name),
                             std::string(model::component_name(info.component)), ft.numel, f,
                             f / double(ft.numel), conv});
        if (ft.n_blocks == 0) continue;
        const int part = int(info.component) - int(Component::AttentionQ);  // q k v o = 0..3
        const int64_t group = H / ft.n_blocks;
        for (int64_t h = 0; h < H; ++h)
            head[size_t((ft.layer * H + h) * 4 + part)] +=
                heads_[i][size_t(h / group)] * inv_n / double(group);
    }
    for (int64_t l = -1; l < c.n_layers; ++l) {
        const auto& a = by[size_t(l + 1)];
        const auto& n = size[size_t(l + 1)];
        double layer_total = 0;
        for (int k = 0; k < kComponents; ++k) {
            layer_total += a[size_t(k)];
            if (n[size_t(k)] == 0) continue;
            io::add_long_row(out.fisher, model_name, "", l, -1,
                             std::string(mt::kFisherPrefix) + model::component_name(Component(k)),
                             conv, a[size_t(k)]);
        }
        io::add_long_row(out.fisher, model_name, "", l, -1, mt::kFisherLayerTotal, conv,
                         layer_total);
        if (l < 0) continue;
        double attn = 0;
        for (int k = 0; k < kComponents; ++k)
            if (model::is_attention(Component(k))) attn += a[size_t(k)];
        const double mlp = a[size_t(Component::Mlp)];
        const double share = attn + mlp > 0 ? attn / (attn + mlp) : std::nan("");
        io::add_long_row(out.fisher, model_name, "", l, -1, mt::kFisherAttention, conv, attn);
        io::add_long_row(out.fisher, model_name, "", l, -1, mt::kAttentionShare, conv, share);
        out.attention_share.push_back(share);
    }
    io::add_long_row(out.fisher, model_name, "", -1, -1, mt::kFisherModelTotal, conv, out.total);
    static const char* kParts[] = {"_q", "_k", "_v", "_o"};
    for (int64_t l = 0; l < c.n_layers; ++l)
        for (int64_t h = 0; h < H; ++h) {
            double sum = 0;
            for (int part = 0; part < 4; ++part) {
                const double v = head[size_t((l * H + h) * 4 + part)];
                sum += v;
                io::add_long_row(out.fisher, model_name, "", l, h,
                                 std::string(mt::kFisherHead) + kParts[part], conv, v);
            }
            io::add_long_row(out.fisher, model_name, "", l, h, mt::kFisherHead, conv, sum);
        }
    if (notebook) notebook_rows(c, model_name, out);
    return out;
}

}  // namespace sinkscope::analysis
