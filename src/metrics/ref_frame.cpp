// The group of the reference-frame analyses over inputs (RefFrameAccumulator): validation, the
// shared pass over each layer's rows, the layers spread over threads, mergeable state. Each
// analysis is a member in its own file (ref_frame_member.hpp).
#include "sinkscope/metrics/ref_frame.hpp"

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "ref_frame_member.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/system.hpp"

namespace sinkscope::metrics {
namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();

// What pass 1 of a layer takes from one head's rows, read a block at a time and never stored
// as a matrix unless asked: principled rows are closed over their visible keys (10.a), compat
// keeps the raw values; entries outside the visible keys are 0.
struct HeadPass {
    Eigen::MatrixXd* avg = nullptr;     // [n, n]: the head's matrix is added to it
    Eigen::MatrixXd* matrix = nullptr;  // [n, n]: set to the head's matrix (--per-head)
    bool entropy = false;               // compute `entropy`
    bool top = false;                   // compute `top_key`
    // Principled: mean over rows of the row entropy (nats; mean_row_entropy's value and order of
    // operations). Compat: -sum_ij A log2(A + 1e-10) over the matrix in row-major order (B.7).
    double entropy_value = std::numeric_limits<double>::quiet_NaN();
    int64_t top_key = 0;  // first key of largest column mean (frame.hpp)
};

void stream_head(const AttentionInput& in, int64_t l, int64_t h, bool compat, HeadPass& p,
                 std::vector<double>& buffer, std::vector<double>& column_sum) {
    const int64_t n = in.length, per_block = in.rows_per_block(1);
    if (p.matrix) p.matrix->setZero(n, n);  // [query, key], column-major
    column_sum.assign(p.top ? static_cast<size_t>(n) : 0, 0.0);
    double entropy = 0;
    constexpr int64_t kTile = 64;  // rows whose cache lines stay in L1 while columns are swept
    double scale[kTile];
    for (int64_t i0 = 0; i0 < n; i0 += per_block) {
        const int64_t i1 = std::min(n, i0 + per_block);
        const double* rows = in.rows(l, h, i0, i1, buffer);
        auto row = [&](int64_t i) { return rows + (i - i0) * in.n_tokens; };
        for (int64_t t0 = i0; t0 < i1; t0 += kTile) {
            const int64_t t1 = std::min(i1, t0 + kTile);
            int64_t jb = n, je = 0;
            for (int64_t i = t0; i < t1; ++i) {
                const int64_t kb = in.key_begin(i), ke = std::min(in.key_end(i), n);
                double sum = 0;
                for (int64_t j = kb; j < ke; ++j) sum += row(i)[j];
                const double s = !compat && sum > 0 ? 1.0 / sum : 1.0;
                scale[i - t0] = s;
                jb = std::min(jb, kb);
                je = std::max(je, ke);
                if (!p.entropy) continue;
                // Row by row, keys in order; the zero entries of the matrix add nothing.
                if (compat) {
                    for (int64_t j = kb; j < ke; ++j)
                        entropy -= row(i)[j] * std::log2(row(i)[j] + 1e-10);
                    continue;
                }
                double mass = 0, plogp = 0;
                for (int64_t j = kb; j < ke; ++j) {
                    const double v = row(i)[j] * s;
                    if (v > 0) {
                        mass += v;
                        plogp += v * std::log(v);
                    }
                }
                if (mass > 0) entropy += std::log(mass) - plogp / mass;
            }
            // Column by column: the writes are contiguous, the reads stay in the tile's lines;
            // every entry's sum over heads (avg) and over rows (column_sum) runs in index order.
            for (int64_t j = jb; j < je; ++j)
                for (int64_t i = t0; i < t1; ++i) {
                    if (j < in.key_begin(i) || j >= in.key_end(i)) continue;
                    const double v = row(i)[j] * scale[i - t0];
                    if (p.avg) (*p.avg)(i, j) += v;
                    if (p.matrix) (*p.matrix)(i, j) = v;
                    if (p.top) column_sum[static_cast<size_t>(j)] += v;
                }
        }
    }
    if (p.entropy) p.entropy_value = compat ? entropy : entropy / static_cast<double>(n);
    if (p.top) p.top_key = top_key(column_sum, n);
}

// `rows`: also check every stored row (once per input, however many accumulators it feeds).
void validate(const AttentionInput& in, const RefFrameResults& state,
              const std::vector<std::string>* token_strings, const std::string& file, bool rows) {
    SS_CHECK_INPUT(in.n_layers > 0 && in.n_heads > 0 && in.n_tokens > 0, file,
                   "empty attention: shape [", in.n_layers, ", ", in.n_heads, ", ", in.n_tokens,
                   ", ", in.n_tokens, "]");
    SS_CHECK_INPUT(in.length > 0 && in.length <= in.n_tokens, file, "length ", in.length,
                   " outside [1, ", in.n_tokens, "]");
    const auto expect = static_cast<size_t>(in.n_layers * in.n_heads * in.n_tokens * in.n_tokens);
    SS_CHECK_INPUT(!in.stored() || in.pattern.size() == expect, file, "holds ", in.pattern.size(),
                   " values, shape needs ", expect);
    if (state.n_inputs > 0)
        SS_CHECK_INPUT(in.n_layers == state.n_layers && in.n_heads == state.n_heads, file,
                       "input has ", in.n_layers, " layers x ", in.n_heads,
                       " heads, earlier inputs had ", state.n_layers, " x ", state.n_heads);
    if (token_strings)
        SS_CHECK_INPUT(static_cast<int64_t>(token_strings->size()) >= in.length,
                       state.config.tokens_file.empty() ? "tokens" : state.config.tokens_file,
                       token_strings->size(), " token strings for an input of ", in.length,
                       " tokens");
    // Rows of a RowSource that recomputes them are checked where they are computed
    // (attention.hpp); reading them all again here would recompute a long input's attention once
    // more per analysis.
    if (!rows || !(in.stored() || in.source->holds_all_rows())) return;
    for (int64_t l = 0; l < in.n_layers; ++l)
        for (int64_t h = 0; h < in.n_heads; ++h)
            for (int64_t i = 0; i < in.length; ++i) {
                const double* r = in.row(l, h, i);
                double sum = 0;
                for (int64_t j = in.key_begin(i); j < std::min(in.key_end(i), in.length); ++j) {
                    SS_CHECK_INPUT(std::isfinite(r[j]) && r[j] >= 0, file, "value ", r[j],
                                   " at layer ", l, " head ", h, " row ", i, " key ", j,
                                   " is not a probability");
                    sum += r[j];
                }
                SS_CHECK_INPUT(sum > 0, file, "row ", i, " of layer ", l, " head ", h,
                               " has no mass on its visible keys");
            }
}

}  // namespace

void RefFrameStat::add(double v) {
    if (!std::isfinite(v)) {
        ++n_nonfinite;
        return;
    }
    sum += v;
    ++n;
    const double d = v - run_mean;
    run_mean += d / static_cast<double>(n);
    m2 += d * (v - run_mean);
}

void RefFrameStat::merge(const RefFrameStat& o) {
    if (o.n > 0) {
        const double na = static_cast<double>(n), nb = static_cast<double>(o.n);
        const double d = o.run_mean - run_mean;
        run_mean += d * nb / (na + nb);
        m2 += o.m2 + d * d * na * nb / (na + nb);
    }
    sum += o.sum;
    n += o.n;
    n_nonfinite += o.n_nonfinite;
    n_skipped += o.n_skipped;
}

double RefFrameStat::mean() const {
    return n > 0 ? sum / static_cast<double>(n) : k_nan;
}

double RefFrameStat::std() const {
    if (n == 0) return k_nan;
    return std::sqrt(std::max(0.0, m2 / static_cast<double>(n)));
}

RefFrameAccumulator::RefFrameAccumulator(const RefFrameOptions& options)
    : threads_(options.threads) {
    state_.config = resolve_ref_frame_options(options);
}

namespace {

// Per-thread scratch reused across layers: the layer average and, with --per-head, one head's
// matrix at a time, so a layer of a long input needs at most two [n, n] matrices whatever the
// number of heads.
struct LayerScratch {
    Eigen::MatrixXd head;            // [n, n], --per-head only
    Eigen::MatrixXd avg;             // [n, n]
    std::vector<double> rows;        // a block of recomputed rows (stream_head)
    std::vector<double> column_sum;  // [n] (stream_head)
};

// The selected members of `c`, in order.
std::vector<const ref_frame::Member*> selected(const RefFrameConfig& c) {
    std::vector<const ref_frame::Member*> out;
    for (const ref_frame::Member* m : ref_frame::members())
        if (c.runs(m->name())) out.push_back(m);
    return out;
}

// One layer: the shared pass over every head's rows, a block at a time (the head average, which
// most analyses use (B.2), and what each head contributes alone: its matrix with --per-head,
// its entropy, its top key), then each member on each head, on the average and on the layer.
// A head's [n, n] matrix is built only for --per-head; a member that reads the rows itself
// (kl) asks for nothing, and a run of it alone makes no pass. `layer_sinks` [n_layers]: the
// input's resolved sink of each layer (spec 0, 10.d).
void process_layer(const AttentionInput& in, int64_t l, const RefFrameConfig& c,
                   const std::vector<const ref_frame::Member*>& run, int64_t input_id,
                   const std::vector<std::string>* token_strings,
                   const std::vector<int64_t>& layer_sinks, LayerScratch& scratch,
                   RefFrameLayerOutput& out) {
    const int64_t n_heads = in.n_heads, n = in.length;
    const bool mid_late = l >= c.mid_late_begin(in.n_layers);
    ref_frame::LayerNeeds need;
    for (const ref_frame::Member* m : run) need |= m->needs(c, mid_late);
    need.head_matrix = need.head_matrix && c.per_head;
    auto& avg = scratch.avg;
    avg.setZero(need.avg ? n : 0, need.avg ? n : 0);
    std::vector<int64_t> top(static_cast<size_t>(n_heads));
    const ref_frame::LayerView view{.in = in,
                                    .l = l,
                                    .c = c,
                                    .input_id = input_id,
                                    .token_strings = token_strings,
                                    .layer_sinks = layer_sinks,
                                    .mid_late = mid_late,
                                    .avg = avg,
                                    .top = top,
                                    .out = out};
    const bool pass = need.avg || need.top || need.head_entropy || need.head_matrix;
    for (int64_t h = 0; h < (pass ? n_heads : 0); ++h) {
        HeadPass p;
        p.avg = need.avg ? &avg : nullptr;
        p.matrix = need.head_matrix ? &scratch.head : nullptr;
        p.entropy = need.head_entropy;
        p.top = need.top;
        stream_head(in, l, h, c.compat, p, scratch.rows, scratch.column_sum);  // thread-safe
        if (need.head_matrix)
            for (const ref_frame::Member* m : run) m->matrix(view, h, scratch.head);
        for (const ref_frame::Member* m : run) m->head(view, h, p.entropy_value);
        if (need.top) top[static_cast<size_t>(h)] = p.top_key;
    }
    avg /= static_cast<double>(n_heads);
    // The last head's matrix is not read again: its memory goes back before the analyses of the
    // average allocate their own [n, n] scratch (a long input's peak RSS).
    scratch.head.resize(0, 0);
    if (need.avg)
        for (const ref_frame::Member* m : run) m->matrix(view, -1, avg);
    for (auto& d : out.head_diagrams) out.diagrams.push_back(std::move(d));
    out.head_diagrams.clear();
    for (const ref_frame::Member* m : run) m->layer(view);
}

}  // namespace

namespace ref_frame {

const std::vector<const Member*>& members() {
    static const std::vector<const Member*> all = {
        &graphs_member,  &topology_member, &kl_member,    &spectra_member,
        &entropy_member, &tokens_member,   &frame_member, &attention_stats_member};
    return all;
}

bool LayerView::in_layers(const std::vector<int64_t>& model_layers) const {
    return std::find(model_layers.begin(), model_layers.end(), c.layer_id(l)) != model_layers.end();
}

std::string param_of(double v) {
    return format_number(v);
}

}  // namespace ref_frame

std::vector<std::string> ref_frame_members() {
    std::vector<std::string> out;
    for (const ref_frame::Member* m : ref_frame::members()) out.emplace_back(m->name());
    return out;
}

bool RefFrameConfig::runs(const std::string& analysis) const {
    return std::find(analyses.begin(), analyses.end(), analysis) != analyses.end();
}

void RefFrameAccumulator::add(const AttentionInput& in,
                              const std::vector<std::string>* token_strings,
                              const std::string& source, const SinkPositions* sinks,
                              std::vector<std::pair<RefFrameKey, double>>* per_input) {
    add_together({this}, in, token_strings, source, sinks, {per_input});
}

void RefFrameAccumulator::add_together(
    const std::vector<RefFrameAccumulator*>& group, const AttentionInput& in,
    const std::vector<std::string>* token_strings, const std::string& source,
    const SinkPositions* sinks,
    const std::vector<std::vector<std::pair<RefFrameKey, double>>*>& per_input) {
    SS_CHECK(!group.empty() && per_input.size() == group.size(), "add_together: ", group.size(),
             " accumulators, ", per_input.size(), " per-input lists");
    const RefFrameAccumulator& lead = *group.front();
    const int64_t input_id = lead.state_.n_inputs;
    for (const RefFrameAccumulator* a : group) {
        validate(in, a->state_, token_strings, source, a == &lead);
        SS_CHECK(a->state_.n_inputs == input_id, "add_together: accumulators of ",
                 a->state_.n_inputs, " and ", input_id, " inputs");
    }
    // One pass computes what any of them asks for; every other option is the same in all.
    RefFrameConfig c = lead.state_.config;
    c.analyses.clear();
    for (const std::string& name : ref_frame_members())
        for (const RefFrameAccumulator* a : group)
            if (a->state_.config.runs(name) && !c.runs(name)) c.analyses.push_back(name);
    const std::vector<const ref_frame::Member*> run = selected(c);
    const int64_t n_layers = in.n_layers;
    // Only the members that read the sink positions (the direct sink mass of kl) need them.
    std::vector<int64_t> layer_sinks(static_cast<size_t>(n_layers), 0);
    if (std::any_of(run.begin(), run.end(),
                    [](const ref_frame::Member* m) { return m->reads_sinks(); })) {
        if (sinks) {
            SS_CHECK(static_cast<int64_t>(sinks->per_layer.size()) == n_layers,
                     "sink positions of ", sinks->per_layer.size(), " layers for an input of ",
                     n_layers);
            layer_sinks = sinks->per_layer;
        } else {
            layer_sinks = resolve_sinks(in, c.sink).per_layer;
        }
    }

    // Layers are independent: spread them over the worker threads (strided for balance).
    std::vector<RefFrameLayerOutput> outputs(static_cast<size_t>(n_layers));
    const auto n_threads = std::max<int64_t>(1, std::min<int64_t>(lead.threads_, n_layers));
    std::vector<std::exception_ptr> errors(static_cast<size_t>(n_threads));
    // Counted and reported under one lock, so the reported counts rise 1, 2, ..., L whichever
    // thread finishes first (an atomic counter alone let a later count overtake an earlier one).
    int64_t layers_done = 0;
    std::mutex progress_mutex;
    const StageProgress& progress = lead.progress_;
    if (progress) progress("reference-frame analyses", 0, n_layers);
    auto work = [&](int64_t t) {
        try {
            // Recomputed rows (libtorch operators) run on this worker alone.
            std::optional<SingleThreadedOpenMp> one_team;
            if (n_threads > 1) one_team.emplace();
            LayerScratch scratch;
            for (int64_t l = t; l < n_layers; l += n_threads) {
                process_layer(in, l, c, run, input_id, token_strings, layer_sinks, scratch,
                              outputs[static_cast<size_t>(l)]);
                if (progress) {
                    std::lock_guard<std::mutex> lock(progress_mutex);
                    progress("reference-frame analyses", ++layers_done, n_layers);
                }
            }
        } catch (...) {
            errors[static_cast<size_t>(t)] = std::current_exception();
        }
    };
    if (n_threads == 1) {
        work(0);
    } else {
        std::vector<std::thread> pool;
        for (int64_t t = 0; t < n_threads; ++t) pool.emplace_back(work, t);
        for (auto& th : pool) th.join();
    }
    for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
    for (size_t k = 0; k < group.size(); ++k) group[k]->apply(in, outputs, per_input[k]);
}

// Takes what this accumulator's analyses own from the layers' outputs, in layer order.
void RefFrameAccumulator::apply(const AttentionInput& in,
                                const std::vector<RefFrameLayerOutput>& outputs,
                                std::vector<std::pair<RefFrameKey, double>>* per_input) {
    const RefFrameConfig& c = state_.config;
    const int64_t n_layers = in.n_layers, input_id = state_.n_inputs;
    const std::vector<const ref_frame::Member*> run = selected(c);
    // Every table belongs to one member; an accumulator of all of them takes everything.
    std::map<std::string, bool> owned;  // table -> whether its member runs here
    for (const ref_frame::Member* m : ref_frame::members())
        for (const std::string& t : m->tables()) owned[t] = c.runs(m->name());
    auto owns = [&owned](const std::string& table) {
        const auto it = owned.find(table);
        if (it == owned.end())
            throw InternalError("reference-frame table " + table + " belongs to no analysis");
        return it->second;
    };
    if (state_.n_inputs == 0) {
        state_.n_layers = n_layers;
        state_.n_heads = in.n_heads;
        state_.frame.resize(n_layers, c.mid_late_begin(n_layers));
    }
    state_.any_causal = state_.any_causal || in.masking == Masking::Causal;
    // This input's first and last finite value of each head-average metric: (layer, value).
    std::map<RefFrameKey, std::pair<std::pair<int64_t, double>, std::pair<int64_t, double>>> ends;
    for (int64_t l = 0; l < n_layers; ++l) {
        const auto& out = outputs[static_cast<size_t>(l)];
        for (const auto& kv : out.values) {
            if (!owns(kv.first.table)) continue;
            state_.stats[kv.first].add(kv.second);
            if (per_input) per_input->push_back(kv);
            if (kv.first.head != -1 || kv.first.layer < 0 || !std::isfinite(kv.second)) continue;
            RefFrameKey k = kv.first;
            k.layer = -1;
            const auto [it, fresh] = ends.try_emplace(k);
            if (fresh) it->second.first = {kv.first.layer, kv.second};
            it->second.second = {kv.first.layer, kv.second};
        }
        for (const auto& key : out.skipped)
            if (owns(key.table)) state_.stats[key].skip();
        for (const ref_frame::Member* m : run) m->apply(out, l, input_id, state_);
    }
    for (const auto& [key, e] : ends) {
        if (e.first.first == e.second.first) continue;
        RefFrameKey k = key;
        k.layer = e.first.first;
        k.head = e.second.first;
        state_.first_last[k].add(e.second.second - e.first.second);
    }
    ++state_.n_inputs;
}

void RefFrameAccumulator::merge(const RefFrameAccumulator& other) {
    const RefFrameResults& o = other.state_;
    if (o.n_inputs == 0) return;
    SS_CHECK(std::string(o.config.mode()) == state_.config.mode(),
             "merging reference-frame results of different modes");
    if (state_.n_inputs > 0)
        SS_CHECK(o.n_layers == state_.n_layers && o.n_heads == state_.n_heads,
                 "merging reference-frame results of different shapes");
    for (const auto& [k, s] : o.stats) state_.stats[k].merge(s);
    for (const auto& [k, s] : o.first_last) state_.first_last[k].merge(s);
    for (const ref_frame::Member* m : ref_frame::members()) m->merge(o, state_.n_inputs, state_);
    state_.n_layers = o.n_layers;
    state_.n_heads = o.n_heads;
    state_.any_causal = state_.any_causal || o.any_causal;
    state_.n_inputs += o.n_inputs;
}

void fields(FieldIo& io, RefFrameKey& k) {
    io(k.table), io(k.layer), io(k.head), io(k.metric), io(k.param);
}

void fields(FieldIo& io, RefFrameStat& s) {
    io(s.sum), io(s.run_mean), io(s.m2), io(s.n), io(s.n_nonfinite), io(s.n_skipped);
}

void fields(FieldIo& io, RefFrameDiagram& d) {
    io(d.input), io(d.layer), io(d.head), io(d.bars);
}

// The group's fields, then each member's in member order, then the warnings.
void RefFrameAccumulator::visit_state(FieldIo& io, RefFrameResults& s) const {
    // "+members": each member's state in its own file since then, in member order;
    // "+first_last": RefFrameResults::first_last after the stats; "+anchors": the frame member's
    // anchors per head by place and token (its signatures).
    io.tag("p2_accumulator+members+first_last+anchors");
    // The accumulator is rebuilt from the same options before load(); these guard against a
    // state written under other section 8 semantics.
    bool compat = s.config.compat, per_head = s.config.per_head, kl_all_rows = s.config.kl_all_rows;
    Symmetrize symmetrize = s.config.symmetrize;
    io(compat), io(per_head), io(symmetrize), io(kl_all_rows);
    if (io.loading() && (compat != s.config.compat || per_head != s.config.per_head ||
                         symmetrize != s.config.symmetrize || kl_all_rows != s.config.kl_all_rows))
        io.reader().fail("reference-frame state was written with other options");
    io(s.n_inputs), io(s.n_layers), io(s.n_heads), io(s.any_causal);
    io(s.stats);
    io(s.first_last);
    for (const ref_frame::Member* m : ref_frame::members()) m->visit_state(io, s);
    io(s.warnings);
}

void RefFrameAccumulator::save(BinaryWriter& w) const {
    FieldIo io(w);
    // A writer only reads the fields.
    visit_state(io, const_cast<RefFrameResults&>(state_));
}

void RefFrameAccumulator::load(BinaryReader& r) {
    RefFrameResults s;
    s.config = state_.config;
    FieldIo io(r);
    visit_state(io, s);
    state_ = std::move(s);
}

RefFrameResults RefFrameAccumulator::finish() const {
    RefFrameResults r = state_;
    for (const ref_frame::Member* m : selected(r.config)) m->finish(state_, r);
    return r;
}

double mean_row_entropy(const Eigen::MatrixXd& a, bool compat) {
    const Eigen::Index n = a.rows();
    if (n == 0) return k_nan;
    const double floor = compat ? 100.0 * static_cast<double>(FLT_EPSILON) : 0.0;
    // H(p / s) = ln s - (sum p ln p) / s per row, accumulated column by column (column-major).
    Eigen::VectorXd sum = Eigen::VectorXd::Zero(n), plogp = Eigen::VectorXd::Zero(n);  // [n]
    for (Eigen::Index j = 0; j < a.cols(); ++j)
        for (Eigen::Index i = 0; i < n; ++i) {
            const double p = a(i, j);
            if (p > floor) {
                sum[i] += p;
                plogp[i] += p * std::log(p);
            }
        }
    double acc = 0;
    for (Eigen::Index i = 0; i < n; ++i)
        if (sum[i] > 0) acc += std::log(sum[i]) - plogp[i] / sum[i];
    return acc / static_cast<double>(n);
}

}  // namespace sinkscope::metrics
