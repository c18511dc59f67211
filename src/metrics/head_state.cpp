// Exact save/load of the head accumulator, so an interrupted long run resumes with the same
// numbers it would have produced uninterrupted (the reference-frame group's state: ref_frame.cpp
// and its members). The accumulator must be constructed with the same options before load(); the
// analyze driver checks that through its run fingerprint.
#include "sinkscope/core/serialize.hpp"
#include "sinkscope/metrics/head.hpp"

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
}  // namespace

void HeadAccumulator::save(BinaryWriter& w) const {
    // Pair sums of squared distances since the Gram sums of earlier versions, the weighted
    // content entropy in the head sums and the sums per query position since then, the content
    // concentration since then: another tag, so such a state is refused rather than misread.
    w.tag("head_accumulator/pair-sums+weighted-entropy+positions+concentration");
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
    r.expect_tag("head_accumulator/pair-sums+weighted-entropy+positions+concentration");
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

}  // namespace sinkscope::metrics
