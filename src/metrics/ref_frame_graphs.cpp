// Reference-frame member "graphs": thresholded attention graphs of every layer (spec 8, 10.i; all
// layers in both modes, 10.o), on the head average and, with --per-head, on each head; at the
// end, whether each threshold is effective for a layer (mean density in the band), each
// threshold's effectiveness score, and the threshold correlation map of the Fiedler value. Per
// threshold also the path length and clustering of the graph (graph_paths.hpp); compat:
// laplacian.ipynb's (largest component; only for n <= 30 and at least 2 entries of B set,
// otherwise missing and counted in n_skipped).
#include <algorithm>
#include <cmath>
#include <map>

#include "ref_frame_member.hpp"
#include "sinkscope/metrics/graph.hpp"
#include "sinkscope/metrics/graph_paths.hpp"
#include "sinkscope/metrics/ref_frame_names.hpp"
#include "sinkscope/metrics/statistics.hpp"

namespace sinkscope::metrics::ref_frame {
namespace {

namespace n = ref_frame_names;

// laplacian.ipynb computes the path length and clustering for n <= 30 nodes only (B.4).
constexpr int64_t k_compat_paths_max_nodes = 30;

class Graphs final : public Member {
public:
    const char* name() const override { return "graphs"; }
    std::vector<std::string> tables() const override { return {n::kGraphs}; }
    LayerNeeds needs(const RefFrameConfig&, bool) const override {
        return {.avg = true, .head_matrix = true};
    }
    void matrix(const LayerView& v, int64_t h, const Eigen::MatrixXd& m) const override {
        const RefFrameConfig& c = v.c;
        const std::vector<double>& taus = c.constants.graph_thresholds;
        const auto all = graph_stats_all(m, taus, c.compat);
        const bool paths_computed = !c.compat || m.rows() <= k_compat_paths_max_nodes;
        const auto paths = paths_computed ? graph_paths_all(m, taus) : std::vector<GraphPaths>();
        for (size_t k = 0; k < taus.size(); ++k) {
            const auto& g = all[k];
            const auto p = param_of(taus[k]);
            auto skip = [&](const char* metric) {
                v.out.skipped.push_back(RefFrameKey{n::kGraphs, v.l, h, metric, p});
            };
            v.put(n::kGraphs, h, n::kDensity, p, g.density);
            // 10.r (B.4): laplacian.ipynb returns the density alone where this input's
            // threshold is not effective and layer % 4 != 0; its graph metrics are missing.
            const bool effective = g.density >= c.constants.effective_density_lo &&
                                   g.density <= c.constants.effective_density_hi;
            if (c.compat && !effective && c.layer_id(v.l) % 4 != 0) {
                for (const char* metric :
                     {n::kLambda2, n::kLaplacianGap, n::kStarBasic, n::kStarCombined, n::kGini,
                      n::kCentralization, n::kDegreeVariance, n::kNNodes, n::kAvgShortestPath,
                      n::kClustering})
                    skip(metric);
                continue;
            }
            v.put(n::kGraphs, h, n::kLambda2, p, g.lambda2);
            v.put(n::kGraphs, h, n::kLaplacianGap, p, g.laplacian_gap);
            v.put(n::kGraphs, h, n::kStarBasic, p, g.star_basic);
            v.put(n::kGraphs, h, n::kStarCombined, p, g.star_combined);
            v.put(n::kGraphs, h, n::kGini, p, g.gini);
            v.put(n::kGraphs, h, n::kCentralization, p, g.centralization);
            v.put(n::kGraphs, h, n::kDegreeVariance, p, g.degree_variance);
            v.put(n::kGraphs, h, n::kNNodes, p, static_cast<double>(g.n_nodes));
            if (!c.compat) {
                const auto& q = paths[k];
                v.put(n::kGraphs, h, n::kAvgShortestPath, p, q.avg_shortest_path);
                v.put(n::kGraphs, h, n::kReachablePairShare, p, q.reachable_share);
                v.put(n::kGraphs, h, n::kClustering, p, q.clustering);
                continue;
            }
            // The notebook's: none above 30 nodes or with fewer than 2 entries set; the path
            // length on the largest component, none when that is a single node.
            if (!paths_computed || paths[k].n_set < 2) {
                skip(n::kAvgShortestPath);
                skip(n::kClustering);
                continue;
            }
            const auto& q = paths[k];
            if (q.lcc_nodes >= 2)
                v.put(n::kGraphs, h, n::kAvgShortestPath, p, q.lcc_avg_shortest_path);
            else
                skip(n::kAvgShortestPath);
            v.put(n::kGraphs, h, n::kClustering, p, q.clustering);
        }
    }
    // Effectiveness on the density averaged over inputs (10.i), and the share of layers.
    void finish(const RefFrameResults& state, RefFrameResults& r) const override {
        const RefFrameConfig& c = r.config;
        std::map<std::string, std::pair<int64_t, int64_t>> per_tau;  // effective, layers
        for (const auto& [k, s] : state.stats) {
            if (k.table != n::kGraphs || k.metric != n::kDensity || k.head != -1) continue;
            const double m = s.mean();
            const bool eff =
                m >= c.constants.effective_density_lo && m <= c.constants.effective_density_hi;
            r.stats[RefFrameKey{n::kGraphs, k.layer, -1, n::kEffective, k.param}].add(eff ? 1.0
                                                                                          : 0.0);
            per_tau[k.param].first += eff ? 1 : 0;
            per_tau[k.param].second += 1;
        }
        for (const auto& [tau, cnt] : per_tau)
            r.stats[RefFrameKey{n::kGraphs, -1, -1, n::kEffectivenessScore, tau}].add(
                static_cast<double>(cnt.first) / static_cast<double>(cnt.second));
        correlation_map(state, r);
    }

private:
    // The reference-frame paper's threshold correlation map: at every threshold, Pearson's r
    // across the layers between the Fiedler value (lambda2) and centralization, star-likeness,
    // density and degree variance, on the layers' head-average means over inputs (a layer where
    // either mean is not finite is left out); and, between consecutive thresholds (ascending)
    // whose finite r differ in sign, where the sign flips.
    static void correlation_map(const RefFrameResults& state, RefFrameResults& r) {
        std::map<std::string, std::map<std::string, std::map<int64_t, double>>> means;
        for (const auto& [k, s] : state.stats)
            if (k.table == n::kGraphs && k.head == -1 && k.layer >= 0)
                means[k.metric][k.param][k.layer] = s.mean();
        std::vector<std::pair<double, std::string>> taus;  // ascending
        for (double t : r.config.constants.graph_thresholds) taus.emplace_back(t, param_of(t));
        std::sort(taus.begin(), taus.end());
        for (const char* partner :
             {n::kCentralization, n::kStarCombined, n::kDensity, n::kDegreeVariance}) {
            const std::string name = partner;
            double previous = std::nan("");
            std::string previous_tau;
            for (const auto& [tau, p] : taus) {
                std::vector<double> x, y;
                const auto& fiedler = means[n::kLambda2][p];
                const auto& other = means[name][p];
                for (const auto& [layer, v] : fiedler) {
                    const auto it = other.find(layer);
                    if (it == other.end() || !std::isfinite(v) || !std::isfinite(it->second))
                        continue;
                    x.push_back(v);
                    y.push_back(it->second);
                }
                const Correlation c = pearson(x, y);
                r.stats[RefFrameKey{n::kGraphs, -1, -1, n::kFiedlerR + name, p}].add(c.r);
                r.stats[RefFrameKey{n::kGraphs, -1, -1, n::kFiedlerP + name, p}].add(c.p);
                if (!std::isfinite(c.r)) continue;
                if (std::isfinite(previous) && previous * c.r < 0)
                    r.stats[RefFrameKey{n::kGraphs, -1, -1, n::kFiedlerSignFlip + name,
                                        previous_tau + "->" + p}]
                        .add(tau);
                previous = c.r;
                previous_tau = p;
            }
        }
    }
};

const Graphs instance;

}  // namespace

const Member& graphs_member = instance;

}  // namespace sinkscope::metrics::ref_frame
