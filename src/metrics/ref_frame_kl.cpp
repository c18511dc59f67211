// Reference-frame member "kl": KL divergence of the heads from their average before and after sink
// removal, sink concentration and the direct sink mass (spec 8, 10.k; compat B.5 on the layers
// of 10.o). Reads the rows itself (sink_kl.hpp): a run of it alone makes no shared pass.
#include <limits>

#include "ref_frame_member.hpp"
#include "sinkscope/metrics/ref_frame_names.hpp"
#include "sinkscope/metrics/sink_kl.hpp"

namespace sinkscope::metrics::ref_frame {
namespace {

namespace n = ref_frame_names;

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

class Kl final : public Member {
public:
    const char* name() const override { return "kl"; }
    std::vector<std::string> tables() const override { return {n::kKl}; }
    bool reads_sinks() const override { return true; }
    void layer(const LayerView& v) const override {
        const RefFrameConfig& c = v.c;
        if (!v.in_layers(kl_layers(v.model_layers(), c.compat))) return;
        const std::vector<double>& ts = c.constants.sink_percentiles;
        const auto all = sink_kl_all(v.in, v.l, ts, c.compat, c.kl_all_rows);
        for (size_t k = 0; k < ts.size(); ++k) {
            const auto& r = all[k];
            const auto p = param_of(ts[k]);
            v.put(n::kKl, -1, n::kKlBefore, p, r.kl_before);
            v.put(n::kKl, -1, n::kKlAfter, p, r.kl_after);
            v.put(n::kKl, -1, n::kKlReduction, p, r.kl_reduction);
            v.put(n::kKl, -1, c.compat ? n::kSinkConcentrationPercent : n::kSinkConcentration, p,
                  r.concentration);
            v.put(n::kKl, -1, n::kNSinks, p, static_cast<double>(r.n_sinks));
            v.put(n::kKl, -1, n::kRowsExcluded, p, static_cast<double>(r.rows_excluded));
        }
        // 10.k: mass on s, the layer's resolved sink (10.d: per-layer outputs, per-layer sink).
        const int64_t s = v.layer_sinks[static_cast<size_t>(v.l)];
        v.put(n::kKl, -1, n::kSinkMassAllRows,
              direct_sink_param(resolve_auto(c.sink, v.in.masking)),
              s < v.in.length ? direct_sink_mass(v.in, v.l, s)
                              : std::numeric_limits<double>::quiet_NaN());
    }
};

const Kl instance;

}  // namespace

const Member& kl_member = instance;

}  // namespace sinkscope::metrics::ref_frame
