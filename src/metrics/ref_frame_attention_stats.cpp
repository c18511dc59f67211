// Reference-frame member "attention_stats": the mean, maximum and standard deviation of the
// entries of each layer's head-averaged attention (spec 8, B.2: the head average; the P2
// notebooks' per-layer attention statistics, spec/PAPERS.md B.3), per input, then the mean over
// inputs. Every one of the n x n entries counts, the masked zeros above the diagonal of a causal
// model included, as the notebooks compute them. The head average is the shared pass's: each row
// renormalised to sum 1 (principled; under --compat the rows as stored). Rows sum to 1, so the
// mean is 1/n up to rounding: it is reported because the paper's tables do, and as a check.
#include <algorithm>
#include <cmath>

#include "ref_frame_member.hpp"
#include "sinkscope/metrics/ref_frame_names.hpp"

namespace sinkscope::metrics::ref_frame {
namespace {

namespace n = ref_frame_names;

class AttentionStats final : public Member {
public:
    const char* name() const override { return "attention_stats"; }
    std::vector<std::string> tables() const override { return {n::kAttentionStats}; }
    LayerNeeds needs(const RefFrameConfig&, bool) const override { return {.avg = true}; }
    void matrix(const LayerView& v, int64_t h, const Eigen::MatrixXd& m) const override {
        if (h != -1 || m.size() == 0) return;
        // Two passes in a fixed (column-major) order: the mean, then the squared deviations
        // from it (numpy's std with ddof 0), so the result does not depend on threads or CPU.
        const double count = static_cast<double>(m.size());
        double sum = 0, max = m(0, 0);
        for (Eigen::Index j = 0; j < m.cols(); ++j)
            for (Eigen::Index i = 0; i < m.rows(); ++i) {
                sum += m(i, j);
                max = std::max(max, m(i, j));
            }
        const double mean = sum / count;
        double squares = 0;
        for (Eigen::Index j = 0; j < m.cols(); ++j)
            for (Eigen::Index i = 0; i < m.rows(); ++i)
                squares += (m(i, j) - mean) * (m(i, j) - mean);
        v.put(n::kAttentionStats, -1, n::kAttentionMean, "", mean);
        v.put(n::kAttentionStats, -1, n::kAttentionMax, "", max);
        v.put(n::kAttentionStats, -1, n::kAttentionStd, "", std::sqrt(squares / count));
    }
};

const AttentionStats instance;

}  // namespace

const Member& attention_stats_member = instance;

}  // namespace sinkscope::metrics::ref_frame
