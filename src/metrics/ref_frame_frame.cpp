// Reference-frame member "frame": the reference-frame type (spec 8, 10.n): where each head's anchor
// (top key) sits in every layer, the mean reference count of the middle and late layers'
// renormalised head average (B.6), and the verdict at the end.
#include "ref_frame_member.hpp"
#include "sinkscope/metrics/frame.hpp"

namespace sinkscope::metrics::ref_frame {
namespace {

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
        r.verdict = frame_verdict(r.frame, c.constants.centralized_share_first,
                                  c.constants.centralized_max_reference_count);
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
