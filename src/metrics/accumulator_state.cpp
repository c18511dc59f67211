// Exact save/load of the streaming accumulators, so an interrupted long run resumes with the
// same numbers it would have produced uninterrupted. The accumulator must be constructed with the
// same options before load(); the analyze driver checks that through its run fingerprint.
#include "sinkscope/core/serialize.hpp"
#include "sinkscope/metrics/head.hpp"
#include "sinkscope/metrics/p2.hpp"

namespace sinkscope::metrics {

namespace {
void put_matrix(BinaryWriter& w, const Eigen::MatrixXd& m) {
    w.put<int64_t>(m.rows());
    w.put<int64_t>(m.cols());
    w.put_doubles(m.data(), static_cast<size_t>(m.size()));
}
void get_matrix(BinaryReader& r, Eigen::MatrixXd& m) {
    auto rows = r.get<int64_t>(), cols = r.get<int64_t>();
    if (rows != m.rows() || cols != m.cols())
        r.fail("matrix of " + std::to_string(rows) + "x" + std::to_string(cols) + ", expected " +
               std::to_string(m.rows()) + "x" + std::to_string(m.cols()));
    r.get_doubles(m.data(), static_cast<size_t>(m.size()));
}
void put_stat(BinaryWriter& w, const P2Stat& s) {
    w.put(s.sum), w.put(s.run_mean), w.put(s.m2), w.put(s.n), w.put(s.n_nonfinite),
        w.put(s.n_skipped);
}
P2Stat get_stat(BinaryReader& r) {
    P2Stat s;
    s.sum = r.get<double>(), s.run_mean = r.get<double>(), s.m2 = r.get<double>(),
    s.n = r.get<int64_t>(), s.n_nonfinite = r.get<int64_t>(), s.n_skipped = r.get<int64_t>();
    return s;
}
}  // namespace

void HeadAccumulator::save(BinaryWriter& w) const {
    // Pair sums of squared distances since the Gram sums of earlier versions, the weighted
    // content entropy in the head sums and the sums per query position since then: another tag, so
    // such a state is refused rather than misread.
    w.tag("head_accumulator/pair-sums+weighted-entropy+positions");
    w.put(n_layers_), w.put(n_heads_);
    w.put(counts_);
    w.put_vector(head_sums_);
    w.put_vector(layer_disp_);
    w.put(model_disp_);
    for (const auto& ps : position_sums_) w.put_vector(ps);
    auto put_groups = [&w](const std::vector<PairGroup>& groups) {
        w.put<uint64_t>(groups.size());
        for (const auto& g : groups) {
            w.put(g.first_head), w.put(g.n), w.put(g.n_rows);
            put_matrix(w, g.sq_content);
            put_matrix(w, g.sq_balance);
            for (const auto& c : g.classical) put_matrix(w, c);
        }
    };
    put_groups(groups_);
    put_groups(layer_groups_);
}

void HeadAccumulator::load(BinaryReader& r) {
    r.expect_tag("head_accumulator/pair-sums+weighted-entropy+positions");
    if (r.get<int64_t>() != n_layers_ || r.get<int64_t>() != n_heads_)
        r.fail("head accumulator of another model shape");
    counts_ = r.get<RowCounts>();
    auto sums = r.get_vector<HeadSums>();
    auto disp = r.get_vector<DispersionSums>();
    if (sums.size() != head_sums_.size() || disp.size() != layer_disp_.size())
        r.fail("head accumulator sizes differ");
    head_sums_ = std::move(sums);
    layer_disp_ = std::move(disp);
    model_disp_ = r.get<DispersionSums>();
    for (auto& ps : position_sums_) ps = r.get_vector<PositionSums>();
    auto get_groups = [&r](std::vector<PairGroup>& groups) {
        for (auto& g : groups) {
            if (r.get<int64_t>() != g.first_head || r.get<int64_t>() != g.n)
                r.fail("head accumulator group layout differs");
            g.n_rows = r.get<int64_t>();
            get_matrix(r, g.sq_content);
            get_matrix(r, g.sq_balance);
            for (auto& c : g.classical) get_matrix(r, c);
        }
    };
    if (r.get<uint64_t>() != groups_.size()) r.fail("head accumulator groups differ (scope?)");
    get_groups(groups_);
    // Per-layer-sink groups of model scope: none, or one per layer.
    const auto n_layer_groups = r.get<uint64_t>();
    if (n_layer_groups != 0 &&
        (options_.scope != Scope::Model || n_layer_groups != static_cast<uint64_t>(n_layers_)))
        r.fail("head accumulator per-layer-sink groups differ");
    layer_groups_.clear();
    for (int64_t l = 0; l < static_cast<int64_t>(n_layer_groups); ++l)
        layer_groups_.push_back(PairGroup::zeros(l * n_heads_, n_heads_));
    get_groups(layer_groups_);
}

void P2Accumulator::save(BinaryWriter& w) const {
    const P2Results& s = state_;
    // "+welford": the per-key std state is (running mean, squared deviations) since then;
    // "+kl_rows": the kl row set is one of the guarded options.
    w.tag("p2_accumulator+welford+kl_rows");
    // The accumulator is rebuilt from the same options before load(); these guard against a
    // state written under other section 8 semantics.
    w.put(s.config.compat), w.put(s.config.per_head), w.put(s.config.symmetrize);
    w.put(s.config.kl_all_rows);
    w.put(s.n_inputs), w.put(s.n_layers), w.put(s.n_heads), w.put(s.any_causal);
    w.put<uint64_t>(s.stats.size());
    for (const auto& [k, v] : s.stats) {
        w.put_string(k.table), w.put(k.layer), w.put(k.head), w.put_string(k.metric),
            w.put_string(k.param);
        put_stat(w, v);
    }
    w.put<uint64_t>(s.top_keys.size());
    for (const auto& [lh, counts] : s.top_keys) {
        w.put(lh.first), w.put(lh.second), w.put<uint64_t>(counts.size());
        for (const auto& [key, n] : counts) w.put_string(key), w.put(n);
    }
    w.put<uint64_t>(s.top_key_first_input.size());
    for (const auto& [lh, firsts] : s.top_key_first_input) {
        w.put(lh.first), w.put(lh.second), w.put<uint64_t>(firsts.size());
        for (const auto& [key, first] : firsts) w.put_string(key), w.put(first);
    }
    w.put<uint64_t>(s.diagrams.size());
    for (const auto& d : s.diagrams) {
        w.put(d.input), w.put(d.layer), w.put(d.head);
        w.put_vector(d.bars);
    }
    w.put(s.frame.n_layers);
    w.put_vector(s.frame.first), w.put_vector(s.frame.last), w.put_vector(s.frame.other);
    w.put(s.frame.reference_count_sum), w.put(s.frame.reference_count_n);
    w.put<uint64_t>(s.warnings.size());
    for (const auto& x : s.warnings) w.put_string(x);
}

void P2Accumulator::load(BinaryReader& r) {
    r.expect_tag("p2_accumulator+welford+kl_rows");
    P2Results s;
    s.config = state_.config;
    const bool compat = r.get<bool>(), per_head = r.get<bool>();
    const auto symmetrize = r.get<Symmetrize>();
    const bool kl_all_rows = r.get<bool>();
    if (compat != s.config.compat || per_head != s.config.per_head ||
        symmetrize != s.config.symmetrize || kl_all_rows != s.config.kl_all_rows)
        r.fail("P2 state was written with other options");
    s.n_inputs = r.get<int64_t>(), s.n_layers = r.get<int64_t>(), s.n_heads = r.get<int64_t>();
    s.any_causal = r.get<bool>();
    for (auto n = r.get<uint64_t>(); n > 0; --n) {
        P2Key k;
        k.table = r.get_string(), k.layer = r.get<int64_t>(), k.head = r.get<int64_t>();
        k.metric = r.get_string(), k.param = r.get_string();
        s.stats[k] = get_stat(r);
    }
    for (auto n = r.get<uint64_t>(); n > 0; --n) {
        std::pair<int64_t, int64_t> lh;
        lh.first = r.get<int64_t>(), lh.second = r.get<int64_t>();
        auto& counts = s.top_keys[lh];
        for (auto m = r.get<uint64_t>(); m > 0; --m) {
            std::string key = r.get_string();
            counts[key] = r.get<int64_t>();
        }
    }
    for (auto n = r.get<uint64_t>(); n > 0; --n) {
        std::pair<int64_t, int64_t> lh;
        lh.first = r.get<int64_t>(), lh.second = r.get<int64_t>();
        auto& firsts = s.top_key_first_input[lh];
        for (auto m = r.get<uint64_t>(); m > 0; --m) {
            std::string key = r.get_string();
            firsts[key] = r.get<int64_t>();
        }
    }
    for (auto n = r.get<uint64_t>(); n > 0; --n) {
        P2Diagram d;
        d.input = r.get<int64_t>(), d.layer = r.get<int64_t>(), d.head = r.get<int64_t>();
        d.bars = r.get_vector<PersistenceBar>();
        s.diagrams.push_back(std::move(d));
    }
    s.frame.n_layers = r.get<int64_t>();
    s.frame.mid_late_first = s.config.mid_late_begin(s.frame.n_layers);  // from the options
    s.frame.first = r.get_vector<int64_t>(), s.frame.last = r.get_vector<int64_t>(),
    s.frame.other = r.get_vector<int64_t>();
    s.frame.reference_count_sum = r.get<double>(), s.frame.reference_count_n = r.get<int64_t>();
    for (auto n = r.get<uint64_t>(); n > 0; --n) s.warnings.push_back(r.get_string());
    state_ = std::move(s);
}

}  // namespace sinkscope::metrics
