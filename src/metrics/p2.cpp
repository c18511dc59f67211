// The P2 analyses of spec section 8 over inputs: per-input passes, mergeable state, tables.
#include "sinkscope/metrics/p2.hpp"

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/system.hpp"
#include "sinkscope/metrics/graph.hpp"
#include "sinkscope/metrics/sink_kl.hpp"
#include "sinkscope/metrics/spectra.hpp"

namespace sinkscope::metrics {
namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
constexpr const char* k_causal_compat_warning =
    "compat ruscio2025 on causal attention: the topology Betti numbers only count tokens "
    "(upper triangle of 1 - A is 1; PAPERS.md B.3)";

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

std::string param_of(double v) {
    return format_number(v);
}

// `rows`: also check every stored row (once per input, however many accumulators it feeds).
void validate(const AttentionInput& in, const P2Results& state,
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

void P2Stat::add(double v) {
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

void P2Stat::merge(const P2Stat& o) {
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

double P2Stat::mean() const {
    return n > 0 ? sum / static_cast<double>(n) : k_nan;
}

double P2Stat::std() const {
    if (n == 0) return k_nan;
    return std::sqrt(std::max(0.0, m2 / static_cast<double>(n)));
}

P2Accumulator::P2Accumulator(const P2Options& options) : threads_(options.threads) {
    state_.config = resolve_p2_options(options);
}

// What one layer of one input contributes; layers run on worker threads and their outputs are
// applied in layer order, so results do not depend on the thread count.
struct P2LayerOutput {
    std::vector<std::pair<P2Key, double>> values;
    std::vector<P2Key> skipped;  // metrics this input does not have (compat graphs, 10.r)
    std::vector<P2Diagram> diagrams;
    std::vector<std::pair<int64_t, std::string>> top_keys;  // (head, key)
    std::array<int64_t, 3> classes{};                       // anchors per PositionClass
    int64_t reference_count = -1;                           // -1: not computed
};

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

// The direct sink mass's param: the fixed key of first / --sink N, else the policy whose
// position is resolved per input (and per layer for argmax); the positions are in sinks.csv.
std::string direct_sink_param(const SinkPolicy& p) {
    switch (p.kind) {
        case SinkPolicy::Kind::First:
            return param_of(0.0);
        case SinkPolicy::Kind::Position:
            return param_of(static_cast<double>(p.position));
        case SinkPolicy::Kind::Bos:
            return "bos";
        case SinkPolicy::Kind::Argmax:
            return "argmax";
        case SinkPolicy::Kind::Auto:
            break;
    }
    return "auto";
}

// `layer_sinks` [n_layers]: the input's resolved sink of each layer (spec 0, 10.d).
void process_layer(const AttentionInput& in, int64_t l, const P2Config& c, int64_t input_id,
                   const std::vector<std::string>* token_strings,
                   const std::vector<int64_t>& layer_sinks, LayerScratch& scratch,
                   P2LayerOutput& out) {
    const bool compat = c.compat;
    const int64_t n_layers = in.n_layers, n_heads = in.n_heads, n = in.length;
    const bool causal = in.masking == Masking::Causal;
    auto put = [&](const char* table, int64_t layer, int64_t h, const std::string& metric,
                   const std::string& param, double v) {
        out.values.emplace_back(P2Key{table, layer, h, metric, param}, v);
    };
    // The layer rules (10.n, 10.o) on the model's layer indices (P2Options::layer_ids).
    const int64_t model_layers = c.model_layer_count(n_layers);
    const auto topo_layers = topology_layers(model_layers, compat);
    const auto token_layers = compat ? topo_layers : topology_layers(model_layers, false);
    const auto kl_set = kl_layers(model_layers, compat);
    const bool mid_late = l >= c.mid_late_begin(n_layers);
    auto in_set = [&c](const std::vector<int64_t>& s, int64_t layer) {
        return std::find(s.begin(), s.end(), c.layer_id(layer)) != s.end();
    };
    auto& avg = scratch.avg;
    std::vector<P2Diagram> head_diagrams;  // per-head diagrams, saved after the average's

    // Graphs, persistent homology and spectra of one matrix (the average, h = -1, or a head).
    auto matrix_analyses = [&](int64_t h, const Eigen::MatrixXd& m) {
        // Thresholded graphs (spec 8, 10.i), all layers in both modes (10.o).
        if (c.graphs) {
            const std::vector<double>& taus = c.constants.graph_thresholds;
            const auto all = graph_stats_all(m, taus, compat);
            for (size_t k = 0; k < taus.size(); ++k) {
                const auto& g = all[k];
                const auto p = param_of(taus[k]);
                put("graphs", l, h, "density", p, g.density);
                // 10.r (B.4): laplacian.ipynb returns the density alone where this input's
                // threshold is not effective and layer % 4 != 0; its graph metrics are missing.
                const bool effective = g.density >= c.constants.effective_density_lo &&
                                       g.density <= c.constants.effective_density_hi;
                if (compat && !effective && c.layer_id(l) % 4 != 0) {
                    for (const char* metric :
                         {"lambda2", "laplacian_gap", "star_basic", "star_combined", "gini",
                          "centralization", "degree_variance", "n_nodes"})
                        out.skipped.push_back(P2Key{"graphs", l, h, metric, p});
                    continue;
                }
                put("graphs", l, h, "lambda2", p, g.lambda2);
                put("graphs", l, h, "laplacian_gap", p, g.laplacian_gap);
                put("graphs", l, h, "star_basic", p, g.star_basic);
                put("graphs", l, h, "star_combined", p, g.star_combined);
                put("graphs", l, h, "gini", p, g.gini);
                put("graphs", l, h, "centralization", p, g.centralization);
                put("graphs", l, h, "degree_variance", p, g.degree_variance);
                put("graphs", l, h, "n_nodes", p, static_cast<double>(g.n_nodes));
            }
        }
        // Persistent homology (spec 8, 10.j; compat B.3).
        if (c.topology && in_set(topo_layers, l)) {
            std::vector<PersistenceBar> bars;
            if (compat) {
                // fp32 1 - A on the linspace-downsampled tokens, not symmetrised.
                const auto idx = linspace_indices(n, k_compat_max_tokens);
                const auto k = static_cast<Eigen::Index>(idx.size());
                Eigen::MatrixXd d(k, k);  // [k, k]
                for (Eigen::Index i = 0; i < k; ++i)
                    for (Eigen::Index j = 0; j < k; ++j) {
                        const float a = static_cast<float>(m(idx[i], idx[j]));
                        d(i, j) = static_cast<double>(1.0f - a);
                    }
                bars = ripser_sparse_persistence(d);
            } else if (c.topology_max_tokens > 0 && n > c.topology_max_tokens) {
                // Long input: the distances among evenly picked tokens (--topology-max-tokens).
                // Picking before symmetrising gives the same entries (d_ij depends on a_ij and
                // a_ji only) without two [n, n] temporaries.
                const auto idx = linspace_indices(n, c.topology_max_tokens);
                const auto k = static_cast<Eigen::Index>(idx.size());
                Eigen::MatrixXd picked(k, k);  // [k, k]
                for (Eigen::Index i = 0; i < k; ++i)
                    for (Eigen::Index j = 0; j < k; ++j) picked(i, j) = m(idx[i], idx[j]);
                bars = rips_persistence(symmetric_distance(picked, c.symmetrize));
            } else {
                bars = rips_persistence(symmetric_distance(m, c.symmetrize));
            }
            const auto s = summarize_diagram(bars, c.constants.long_bar);
            for (int d = 0; d < 2; ++d) {
                const auto k = static_cast<size_t>(d);
                const std::string sfx = "_dim" + std::to_string(d);
                put("topology", l, h, "n_bars" + sfx, "", static_cast<double>(s.n_bars[k]));
                put("topology", l, h, "n_essential" + sfx, "",
                    static_cast<double>(s.n_essential[k]));
                put("topology", l, h, "total_persistence" + sfx, "", s.total_persistence[k]);
                put("topology", l, h, "n_long" + sfx, "", static_cast<double>(s.n_long[k]));
                put("topology", l, h, "mean_persistence" + sfx, "", s.mean_persistence[k]);
                put("topology", l, h, "max_persistence" + sfx, "", s.max_persistence[k]);
                for (int g = 0; g < k_betti_grid_points; ++g)
                    put("betti", l, h, "betti" + std::to_string(d), param_of(g / 100.0),
                        s.betti[k][static_cast<size_t>(g)]);
            }
            if (input_id < k_saved_diagram_inputs)
                (h < 0 ? out.diagrams : head_diagrams)
                    .push_back(P2Diagram{input_id, l, h, std::move(bars)});
        }
        // Random-matrix spectra (spec 8, 10.l; compat B.9), per head with per_head.
        if (c.spectra) {
            const auto sv = singular_spectrum(m);
            put("spectra", l, h, "stable_rank", "", sv.stable_rank);
            if (compat) {
                const auto ev = eigen_spectrum_compat(m, causal);
                put("spectra", l, h, "spectral_gap", "", ev.spectral_gap);
                put("spectra", l, h, "eig_participation_ratio", "", ev.participation_ratio);
                put("spectra", l, h, "mp_kl", "", ev.mp_kl);
            } else {
                put("spectra", l, h, "participation_ratio", "", sv.participation_ratio);
                put("spectra", l, h, "mp_ks", "", sv.mp_ks);
                put("spectra", l, h, "sigma1_sq", "", sv.sigma2.empty() ? k_nan : sv.sigma2[0]);
            }
        }
    };

    // Pass 1: every head's rows once, a block at a time: their average (B.2: most analyses use
    // it) and what each head contributes alone: per-head matrix analyses (--per-head), attention
    // entropy (10.m; compat B.7, B.3), top key for token specialisation and frame (10.m, 10.n).
    // A head's [n, n] matrix is built only for --per-head. Sink-removal KL (pass 4) reads the
    // rows itself: a run of it alone makes no pass here.
    const bool need_avg = c.graphs || c.topology || c.spectra || c.entropy || (c.frame && mid_late);
    const bool need_top = c.tokens || c.frame;
    const bool pass1 = need_avg || need_top || c.per_head;
    avg.setZero(need_avg ? n : 0, need_avg ? n : 0);
    std::vector<int64_t> top(static_cast<size_t>(n_heads));
    for (int64_t h = 0; h < (pass1 ? n_heads : 0); ++h) {
        HeadPass p;
        p.avg = need_avg ? &avg : nullptr;
        p.matrix = c.per_head ? &scratch.head : nullptr;
        p.entropy = c.entropy;
        p.top = need_top;
        stream_head(in, l, h, compat, p, scratch.rows, scratch.column_sum);  // thread-safe
        if (c.per_head) matrix_analyses(h, scratch.head);
        if (c.entropy)
            put("entropy", l, h, compat ? "matrix_entropy_bits" : "entropy_all_rows", "",
                p.entropy_value);
        if (need_top) top[static_cast<size_t>(h)] = p.top_key;
    }
    avg /= static_cast<double>(n_heads);
    // The last head's matrix is not read again: its memory goes back before the analyses of the
    // average allocate their own [n, n] scratch (a long input's peak RSS).
    scratch.head.resize(0, 0);

    // Passes 2-3, 5: graphs, persistent homology and spectra of the average.
    matrix_analyses(-1, avg);
    for (auto& d : head_diagrams) out.diagrams.push_back(std::move(d));

    // Pass 4: sink removal KL, concentration, direct sink mass (spec 8, 10.k; B.5).
    if (c.kl && in_set(kl_set, l)) {
        const std::vector<double>& ts = c.constants.sink_percentiles;
        const auto all = sink_kl_all(in, l, ts, compat, c.kl_all_rows);
        for (size_t k = 0; k < ts.size(); ++k) {
            const auto& r = all[k];
            const auto p = param_of(ts[k]);
            put("kl", l, -1, "kl_before", p, r.kl_before);
            put("kl", l, -1, "kl_after", p, r.kl_after);
            put("kl", l, -1, "kl_reduction", p, r.kl_reduction);
            put("kl", l, -1, compat ? "sink_concentration_percent" : "sink_concentration", p,
                r.concentration);
            put("kl", l, -1, "n_sinks", p, static_cast<double>(r.n_sinks));
            put("kl", l, -1, "rows_excluded", p, static_cast<double>(r.rows_excluded));
        }
        // 10.k: mass on s, the layer's resolved sink (10.d: per-layer outputs, per-layer sink).
        const int64_t s = layer_sinks[static_cast<size_t>(l)];
        put("kl", l, -1, "sink_mass_all_rows", direct_sink_param(resolve_auto(c.sink, in.masking)),
            s < n ? direct_sink_mass(in, l, s) : k_nan);
    }

    // Pass 6: entropy of the head average (10.m).
    if (c.entropy) put("entropy", l, -1, "entropy_all_rows", "", mean_row_entropy(avg, compat));

    // Pass 7: token specialisation (10.m; compat layers of B.10) and frame evidence (10.n).
    if (c.tokens || c.frame) {
        for (int64_t h = 0; h < n_heads; ++h) {
            const int64_t j = top[static_cast<size_t>(h)];
            const auto cls = classify_position(j, n);
            if (c.tokens && in_set(token_layers, l)) {
                const std::string key = token_strings ? (*token_strings)[static_cast<size_t>(j)]
                                                      : "#" + std::to_string(j);
                out.top_keys.emplace_back(h, key);
                for (auto k : {PositionClass::First, PositionClass::Last, PositionClass::Other})
                    put("tokens", l, h, std::string("share_") + position_class_name(k), "",
                        cls == k ? 1.0 : 0.0);
            }
            if (c.frame) ++out.classes[static_cast<size_t>(cls)];
        }
        if (c.frame && mid_late) {  // middle and late layers (10.n)
            // Reference count of the value-space analysis on the renormalised average (B.6).
            Eigen::MatrixXd closed = avg;
            for (Eigen::Index i = 0; i < closed.rows(); ++i) {
                const double s = closed.row(i).sum();
                if (s > 0) closed.row(i) /= s;
            }
            out.reference_count = reference_count(closed);
        }
    }
}

}  // namespace

void P2Accumulator::add(const AttentionInput& in, const std::vector<std::string>* token_strings,
                        const std::string& source, const SinkPositions* sinks,
                        std::vector<std::pair<P2Key, double>>* per_input) {
    add_together({this}, in, token_strings, source, sinks, {per_input});
}

void P2Accumulator::add_together(
    const std::vector<P2Accumulator*>& group, const AttentionInput& in,
    const std::vector<std::string>* token_strings, const std::string& source,
    const SinkPositions* sinks,
    const std::vector<std::vector<std::pair<P2Key, double>>*>& per_input) {
    SS_CHECK(!group.empty() && per_input.size() == group.size(), "add_together: ", group.size(),
             " accumulators, ", per_input.size(), " per-input lists");
    const P2Accumulator& lead = *group.front();
    const int64_t input_id = lead.state_.n_inputs;
    for (const P2Accumulator* a : group) {
        validate(in, a->state_, token_strings, source, a == &lead);
        SS_CHECK(a->state_.n_inputs == input_id, "add_together: accumulators of ",
                 a->state_.n_inputs, " and ", input_id, " inputs");
    }
    // One pass computes what any of them asks for; every other option is the same in all.
    P2Config c = lead.state_.config;
    for (const P2Accumulator* a : group) {
        const P2Config& o = a->state_.config;
        c.graphs = c.graphs || o.graphs;
        c.topology = c.topology || o.topology;
        c.kl = c.kl || o.kl;
        c.spectra = c.spectra || o.spectra;
        c.entropy = c.entropy || o.entropy;
        c.tokens = c.tokens || o.tokens;
        c.frame = c.frame || o.frame;
    }
    const int64_t n_layers = in.n_layers;
    // Only the direct sink mass (kl) uses the sink position.
    std::vector<int64_t> layer_sinks(static_cast<size_t>(n_layers), 0);
    if (c.kl) {
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
    std::vector<P2LayerOutput> outputs(static_cast<size_t>(n_layers));
    const auto n_threads = std::max<int64_t>(1, std::min<int64_t>(lead.threads_, n_layers));
    std::vector<std::exception_ptr> errors(static_cast<size_t>(n_threads));
    // Counted and reported under one lock, so the reported counts rise 1, 2, ..., L whichever
    // thread finishes first (an atomic counter alone let a later count overtake an earlier one).
    int64_t layers_done = 0;
    std::mutex progress_mutex;
    const StageProgress& progress = lead.progress_;
    if (progress) progress("section 8", 0, n_layers);
    auto work = [&](int64_t t) {
        try {
            // Recomputed rows (libtorch operators) run on this worker alone.
            std::optional<SingleThreadedOpenMp> one_team;
            if (n_threads > 1) one_team.emplace();
            LayerScratch scratch;
            for (int64_t l = t; l < n_layers; l += n_threads) {
                process_layer(in, l, c, input_id, token_strings, layer_sinks, scratch,
                              outputs[static_cast<size_t>(l)]);
                if (progress) {
                    std::lock_guard<std::mutex> lock(progress_mutex);
                    progress("section 8", ++layers_done, n_layers);
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
void P2Accumulator::apply(const AttentionInput& in, const std::vector<P2LayerOutput>& outputs,
                          std::vector<std::pair<P2Key, double>>* per_input) {
    const P2Config& c = state_.config;
    const int64_t n_layers = in.n_layers, input_id = state_.n_inputs;
    // Every table belongs to one analysis; an accumulator of all of them takes everything.
    auto owns = [&c](const std::string& table) {
        if (table == "graphs") return c.graphs;
        if (table == "topology" || table == "betti") return c.topology;
        if (table == "kl") return c.kl;
        if (table == "spectra") return c.spectra;
        if (table == "entropy") return c.entropy;
        if (table == "tokens") return c.tokens;
        throw InternalError("section 8 table " + table + " belongs to no analysis");
    };
    if (state_.n_inputs == 0) {
        state_.n_layers = n_layers;
        state_.n_heads = in.n_heads;
        state_.frame.resize(n_layers, c.mid_late_begin(n_layers));
    }
    state_.any_causal = state_.any_causal || in.masking == Masking::Causal;
    for (int64_t l = 0; l < n_layers; ++l) {
        const auto& out = outputs[static_cast<size_t>(l)];
        for (const auto& kv : out.values) {
            if (!owns(kv.first.table)) continue;
            state_.stats[kv.first].add(kv.second);
            if (per_input) per_input->push_back(kv);
        }
        for (const auto& key : out.skipped)
            if (owns(key.table)) state_.stats[key].skip();
        if (c.topology)
            for (const auto& d : out.diagrams) state_.diagrams.push_back(d);
        if (c.tokens)
            for (const auto& [h, key] : out.top_keys) {
                ++state_.top_keys[{l, h}][key];
                state_.top_key_first_input[{l, h}].emplace(key, input_id);  // kept if seen
            }
        if (!c.frame) continue;
        const auto li = static_cast<size_t>(l);
        state_.frame.first[li] += out.classes[static_cast<size_t>(PositionClass::First)];
        state_.frame.last[li] += out.classes[static_cast<size_t>(PositionClass::Last)];
        state_.frame.other[li] += out.classes[static_cast<size_t>(PositionClass::Other)];
        if (out.reference_count >= 0) {
            state_.frame.reference_count_sum += static_cast<double>(out.reference_count);
            ++state_.frame.reference_count_n;
        }
    }
    ++state_.n_inputs;
}

void P2Accumulator::merge(const P2Accumulator& other) {
    const P2Results& o = other.state_;
    if (o.n_inputs == 0) return;
    SS_CHECK(std::string(o.config.mode()) == state_.config.mode(),
             "merging P2 results of different modes");
    if (state_.n_inputs > 0)
        SS_CHECK(o.n_layers == state_.n_layers && o.n_heads == state_.n_heads,
                 "merging P2 results of different shapes");
    for (const auto& [k, s] : o.stats) state_.stats[k].merge(s);
    for (const auto& [lh, counts] : o.top_keys)
        for (const auto& [key, cnt] : counts) state_.top_keys[lh][key] += cnt;
    // The other shard's inputs come after this one's.
    for (const auto& [lh, firsts] : o.top_key_first_input)
        for (const auto& [key, first] : firsts)
            state_.top_key_first_input[lh].emplace(key, first + state_.n_inputs);
    for (const auto& d : o.diagrams) {
        const int64_t id = d.input + state_.n_inputs;
        if (id >= k_saved_diagram_inputs) continue;
        P2Diagram copy = d;
        copy.input = id;
        state_.diagrams.push_back(std::move(copy));
    }
    state_.frame.merge(o.frame);
    state_.n_layers = o.n_layers;
    state_.n_heads = o.n_heads;
    state_.any_causal = state_.any_causal || o.any_causal;
    state_.n_inputs += o.n_inputs;
}

P2Results P2Accumulator::finish() const {
    P2Results r = state_;
    const P2Config& c = r.config;
    // Effectiveness on the density averaged over inputs (10.i), and the share of layers.
    if (c.graphs) {
        std::map<std::string, std::pair<int64_t, int64_t>> per_tau;  // effective, layers
        for (const auto& [k, s] : state_.stats) {
            if (k.table != "graphs" || k.metric != "density" || k.head != -1) continue;
            const double m = s.mean();
            const bool eff =
                m >= c.constants.effective_density_lo && m <= c.constants.effective_density_hi;
            r.stats[P2Key{"graphs", k.layer, -1, "effective", k.param}].add(eff ? 1.0 : 0.0);
            per_tau[k.param].first += eff ? 1 : 0;
            per_tau[k.param].second += 1;
        }
        for (const auto& [tau, cnt] : per_tau)
            r.stats[P2Key{"graphs", -1, -1, "effectiveness_score", tau}].add(
                static_cast<double>(cnt.first) / static_cast<double>(cnt.second));
    }
    // Consistency of each head's top key over inputs, and per layer the share of heads whose
    // modal key is each key (B.10). Ties: compat keeps the key seen first in input order (the
    // notebook's dictionary); principled the lexicographically smallest.
    std::map<int64_t, std::map<std::string, int64_t>> modal_per_layer;
    for (const auto& [lh, counts] : state_.top_keys) {
        int64_t total = 0, best = -1, best_first = 0;
        std::string modal;
        const auto firsts = state_.top_key_first_input.find(lh);
        for (const auto& [key, cnt] : counts) {
            total += cnt;
            int64_t first = 0;
            if (c.compat) {
                SS_CHECK(firsts != state_.top_key_first_input.end() && firsts->second.count(key),
                         "token specialisation: no first input recorded for key ", key);
                first = firsts->second.at(key);
            }
            if (cnt > best || (cnt == best && first < best_first))
                best = cnt, best_first = first, modal = key;
        }
        const double consistency = static_cast<double>(best) / static_cast<double>(total);
        r.stats[P2Key{"tokens", lh.first, lh.second, "consistency", modal}].add(consistency);
        r.stats[P2Key{"tokens", lh.first, lh.second, "specialised", ""}].add(
            consistency >= c.constants.specialised_share &&
                    total >= c.constants.specialised_min_inputs
                ? 1.0
                : 0.0);
        ++modal_per_layer[lh.first][modal];
    }
    for (const auto& [l, counts] : modal_per_layer) {
        int64_t n_heads = 0;
        for (const auto& kv : counts) n_heads += kv.second;
        for (const auto& [key, cnt] : counts)
            r.stats[P2Key{"tokens", l, -1, "heads_modal_share", key}].add(
                static_cast<double>(cnt) / static_cast<double>(n_heads));
    }
    r.verdict = frame_verdict(r.frame, c.constants.centralized_share_first,
                              c.constants.centralized_max_reference_count);
    if (c.compat && r.any_causal && c.topology) r.warnings.emplace_back(k_causal_compat_warning);
    if (c.frame && r.frame.n_layers > 0 && r.frame.mid_late_begin() >= r.frame.n_layers)
        r.warnings.push_back(
            "the reference-frame verdict reads the middle and late layers (model layers >= " +
            std::to_string(c.model_layer_count(r.frame.n_layers) / 3) +
            ") and none was analysed (--layers): its first-position share is 0 and its mean "
            "reference count undefined");
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
