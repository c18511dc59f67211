// Reference-frame member "frame": the reference-frame type (spec 8, 10.n): where each head's anchor
// (top key) sits in every layer, the mean reference count of the middle and late layers'
// renormalised head average (B.6), and the verdict at the end.
#include <algorithm>
#include <limits>

#include "ref_frame_member.hpp"
#include "sinkscope/metrics/frame.hpp"
#include "sinkscope/metrics/ref_frame_names.hpp"

namespace sinkscope::metrics::ref_frame {
namespace {

// The head-average KL reduction per layer at the middle sink percentile (NaN where the KL
// analysis did not run on a layer): the series whose profile over depth is a signature.
std::vector<double> kl_profile_series(const RefFrameResults& r) {
    const auto& pct = r.config.constants.sink_percentiles;
    std::vector<double> out(static_cast<size_t>(r.frame.n_layers),
                            std::numeric_limits<double>::quiet_NaN());
    if (!r.config.runs("kl") || pct.empty()) return out;
    std::vector<double> sorted = pct;
    std::sort(sorted.begin(), sorted.end());
    const std::string param = param_of(sorted[sorted.size() / 2]);
    for (size_t l = 0; l < out.size(); ++l) {
        const auto it = r.stats.find(RefFrameKey{ref_frame_names::kKl, static_cast<int64_t>(l), -1,
                                                 ref_frame_names::kKlReduction, param});
        if (it != r.stats.end()) out[l] = it->second.mean();
    }
    return out;
}

class Frame final : public Member {
public:
    const char* name() const override { return "frame"; }
    std::vector<std::string> tables() const override { return {}; }
    LayerNeeds needs(const RefFrameConfig&, bool mid_late) const override {
        return {.avg = mid_late, .top = true};
    }
    void layer(const LayerView& v) const override {
        for (int64_t h = 0; h < v.in.n_heads; ++h)
            ++v.out.classes[static_cast<size_t>(
                classify_position(v.top[static_cast<size_t>(h)], v.in.length))];
        if (!v.mid_late) return;  // middle and late layers (10.n)
        for (int64_t h = 0; h < v.in.n_heads; ++h) {
            const int64_t j = v.top[static_cast<size_t>(h)];
            const auto cls = classify_position(j, v.in.length);
            v.out.anchors.emplace_back(
                cls == PositionClass::Other ? "#" + std::to_string(j) : position_class_name(cls),
                v.token_strings ? (*v.token_strings)[static_cast<size_t>(j)] : std::string());
        }
        // Reference count of the value-space analysis on the renormalised average (B.6).
        Eigen::MatrixXd closed = v.avg;
        for (Eigen::Index i = 0; i < closed.rows(); ++i) {
            const double s = closed.row(i).sum();
            if (s > 0) closed.row(i) /= s;
        }
        v.out.reference_count = reference_count(closed);
    }
    void apply(const RefFrameLayerOutput& out, int64_t l, int64_t,
               RefFrameResults& state) const override {
        const auto li = static_cast<size_t>(l);
        state.frame.first[li] += out.classes[static_cast<size_t>(PositionClass::First)];
        state.frame.last[li] += out.classes[static_cast<size_t>(PositionClass::Last)];
        state.frame.other[li] += out.classes[static_cast<size_t>(PositionClass::Other)];
        for (size_t h = 0; h < out.anchors.size(); ++h) {
            const auto& [place, token] = out.anchors[h];
            const std::pair<int64_t, int64_t> lh{l, static_cast<int64_t>(h)};
            ++state.frame.head_places[lh][place];
            if (!token.empty()) ++state.frame.head_tokens[lh][token];
        }
        if (out.reference_count >= 0) {
            state.frame.reference_count_sum += static_cast<double>(out.reference_count);
            ++state.frame.reference_count_n;
        }
    }
    void merge(const RefFrameResults& other, int64_t, RefFrameResults& into) const override {
        into.frame.merge(other.frame);
    }
    void finish(const RefFrameResults&, RefFrameResults& r) const override {
        const RefFrameConfig& c = r.config;
        r.rule_verdict = frame_verdict(r.frame, c.constants.centralized_share_first,
                                       c.constants.centralized_max_reference_count);
        r.frame.n_inputs = r.n_inputs;
        r.frame_reading =
            read_frame_signatures(r.frame, c.constants.signature_rule(), kl_profile_series(r));
        r.verdict = c.constants.frame_verdict == "rule" ? r.rule_verdict : r.frame_reading.verdict;
        if (r.frame.n_layers > 0 && r.frame.mid_late_begin() >= r.frame.n_layers)
            r.warnings.push_back(
                "the reference-frame verdict reads the middle and late layers (model layers >= " +
                std::to_string(c.model_layer_count(r.frame.n_layers) / 3) +
                ") and none was analysed (--layers): its first-position share is 0 and its mean "
                "reference count undefined");
    }
    void visit_state(FieldIo& io, RefFrameResults& s) const override {
        FrameEvidence& f = s.frame;
        io(f.n_layers), io(f.first), io(f.last), io(f.other);
        io(f.reference_count_sum), io(f.reference_count_n);
        io(f.head_places), io(f.head_tokens);
        if (!io.loading()) return;
        // A damaged count must not reach mid_late_begin (a loop over it, indexing layer_ids).
        const auto n = static_cast<size_t>(f.n_layers);
        if (f.n_layers < 0 || (f.n_layers != 0 && f.n_layers != s.n_layers) ||
            f.first.size() != n || f.last.size() != n || f.other.size() != n ||
            (n != 0 && !s.config.layer_ids.empty() && s.config.layer_ids.size() != n))
            io.reader().fail("reference-frame evidence does not match its layer count");
        f.mid_late_first = s.config.mid_late_begin(f.n_layers);  // from the options
    }
};

const Frame instance;

}  // namespace

const Member& frame_member = instance;

}  // namespace sinkscope::metrics::ref_frame
