// Reference-frame member "topology": persistent homology of 1 - attention (spec 8, 10.j; compat B.3
// on the layers of 10.o): bar counts and persistence per dimension, Betti curves (table betti),
// and the diagrams of the first k_saved_diagram_inputs inputs.
#include "ref_frame_member.hpp"
#include "sinkscope/metrics/ref_frame_names.hpp"
#include "sinkscope/metrics/topology.hpp"

namespace sinkscope::metrics::ref_frame {
namespace {

namespace n = ref_frame_names;

constexpr const char* k_causal_compat_warning =
    "compat ruscio2025 on causal attention: the topology Betti numbers only count tokens "
    "(upper triangle of 1 - A is 1; PAPERS.md B.3)";

class Topology final : public Member {
public:
    const char* name() const override { return "topology"; }
    std::vector<std::string> tables() const override { return {n::kTopology, n::kBetti}; }
    LayerNeeds needs(const RefFrameConfig&, bool) const override {
        return {.avg = true, .head_matrix = true};
    }
    void matrix(const LayerView& v, int64_t h, const Eigen::MatrixXd& m) const override {
        const RefFrameConfig& c = v.c;
        if (!v.in_layers(topology_layers(v.model_layers(), c.compat))) return;
        const int64_t n = v.in.length;
        std::vector<PersistenceBar> bars;
        if (c.compat) {
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
            // Picking before symmetrising gives the same entries (d_ij depends on a_ij and a_ji
            // only) without two [n, n] temporaries.
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
            v.put(n::kTopology, h, n::kNBars + sfx, "", static_cast<double>(s.n_bars[k]));
            v.put(n::kTopology, h, n::kNEssential + sfx, "", static_cast<double>(s.n_essential[k]));
            v.put(n::kTopology, h, n::kTotalPersistence + sfx, "", s.total_persistence[k]);
            v.put(n::kTopology, h, n::kNLong + sfx, "", static_cast<double>(s.n_long[k]));
            v.put(n::kTopology, h, n::kMeanPersistence + sfx, "", s.mean_persistence[k]);
            v.put(n::kTopology, h, n::kMaxPersistence + sfx, "", s.max_persistence[k]);
            for (int g = 0; g < k_betti_grid_points; ++g)
                v.put(n::kBetti, h, n::kBettiPrefix + std::to_string(d), param_of(g / 100.0),
                      s.betti[k][static_cast<size_t>(g)]);
        }
        if (v.input_id < k_saved_diagram_inputs)
            (h < 0 ? v.out.diagrams : v.out.head_diagrams)
                .push_back(RefFrameDiagram{v.input_id, v.l, h, std::move(bars)});
    }
    void apply(const RefFrameLayerOutput& out, int64_t, int64_t,
               RefFrameResults& state) const override {
        for (const auto& d : out.diagrams) state.diagrams.push_back(d);
    }
    void merge(const RefFrameResults& other, int64_t n_before,
               RefFrameResults& into) const override {
        for (const auto& d : other.diagrams) {
            const int64_t id = d.input + n_before;
            if (id >= k_saved_diagram_inputs) continue;
            RefFrameDiagram copy = d;
            copy.input = id;
            into.diagrams.push_back(std::move(copy));
        }
    }
    void finish(const RefFrameResults&, RefFrameResults& r) const override {
        if (r.config.compat && r.any_causal) r.warnings.emplace_back(k_causal_compat_warning);
    }
    void visit_state(FieldIo& io, RefFrameResults& s) const override { io(s.diagrams); }
};

const Topology instance;

}  // namespace

const Member& topology_member = instance;

}  // namespace sinkscope::metrics::ref_frame
