// Reference-frame member "entropy": row entropy of each head (shared pass) and of the head average
// (spec 8, 10.m; compat B.7: bits over the matrix per head, renormalised entries of the
// average).
#include "ref_frame_member.hpp"
#include "sinkscope/metrics/ref_frame_names.hpp"

namespace sinkscope::metrics::ref_frame {
namespace {

namespace n = ref_frame_names;

class Entropy final : public Member {
public:
    const char* name() const override { return "entropy"; }
    std::vector<std::string> tables() const override { return {n::kEntropy}; }
    LayerNeeds needs(const RefFrameConfig&, bool) const override {
        return {.avg = true, .head_entropy = true};
    }
    void head(const LayerView& v, int64_t h, double entropy) const override {
        v.put(n::kEntropy, h, v.c.compat ? n::kMatrixEntropyBits : n::kEntropyAllRows, "", entropy);
    }
    void layer(const LayerView& v) const override {
        v.put(n::kEntropy, -1, n::kEntropyAllRows, "", mean_row_entropy(v.avg, v.c.compat));
    }
};

const Entropy instance;

}  // namespace

const Member& entropy_member = instance;

}  // namespace sinkscope::metrics::ref_frame
