// Reference-frame member "spectra": singular-value spectra of attention against Marchenko-Pastur
// (spec 8, 10.l; compat B.9: eigenvalues), on the head average and, with --per-head, each head.
// Compat also rmt.ipynb's sink concentration and row entropy of the same matrix.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ref_frame_member.hpp"
#include "sinkscope/metrics/ref_frame_names.hpp"
#include "sinkscope/metrics/spectra.hpp"

namespace sinkscope::metrics::ref_frame {
namespace {

namespace n = ref_frame_names;

// rmt.ipynb (B.9): c = the column sums; the sinks are the columns with c_j >= numpy's
// percentile(c, 90) (linear: rank 0.9 (n - 1) between the sorted values, interpolated as numpy's
// _lerp does); the share of sum c on them (0 when sum c = 0). A fraction, not a percentage.
double rmt_sink_concentration(const Eigen::MatrixXd& m) {
    const Eigen::Index n = m.cols();
    if (n == 0) return std::numeric_limits<double>::quiet_NaN();
    std::vector<double> c(static_cast<size_t>(n));
    for (Eigen::Index j = 0; j < n; ++j) c[j] = m.col(j).sum();
    std::vector<double> sorted = c;
    std::sort(sorted.begin(), sorted.end());
    const double rank = 0.9 * static_cast<double>(n - 1);
    const double below = std::floor(rank);
    const double t = rank - below;
    const auto lo = static_cast<size_t>(below);
    const size_t hi = std::min(lo + 1, static_cast<size_t>(n - 1));
    const double a = sorted[lo], b = sorted[hi], diff = b - a;
    const double threshold = t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
    double sinks = 0, total = 0;
    for (double x : c) {
        total += x;
        if (x >= threshold) sinks += x;
    }
    return total > 0 ? sinks / total : 0.0;
}

// rmt.ipynb (B.9): the mean over rows of -sum_j a_ij log2(a_ij + 1e-10), bits.
double rmt_row_entropy_bits(const Eigen::MatrixXd& m) {
    if (m.rows() == 0) return std::numeric_limits<double>::quiet_NaN();
    double sum = 0;
    for (Eigen::Index i = 0; i < m.rows(); ++i) {
        double h = 0;
        for (Eigen::Index j = 0; j < m.cols(); ++j) h -= m(i, j) * std::log2(m(i, j) + 1e-10);
        sum += h;
    }
    return sum / static_cast<double>(m.rows());
}

class Spectra final : public Member {
public:
    const char* name() const override { return "spectra"; }
    std::vector<std::string> tables() const override { return {n::kSpectra}; }
    LayerNeeds needs(const RefFrameConfig&, bool) const override {
        return {.avg = true, .head_matrix = true};
    }
    void matrix(const LayerView& v, int64_t h, const Eigen::MatrixXd& m) const override {
        const auto sv = singular_spectrum(m);
        v.put(n::kSpectra, h, n::kStableRank, "", sv.stable_rank);
        if (v.c.compat) {
            const auto ev = eigen_spectrum_compat(m, v.in.masking == Masking::Causal);
            v.put(n::kSpectra, h, n::kSpectralGap, "", ev.spectral_gap);
            v.put(n::kSpectra, h, n::kEigParticipationRatio, "", ev.participation_ratio);
            v.put(n::kSpectra, h, n::kMpKl, "", ev.mp_kl);
            v.put(n::kSpectra, h, n::kRmtSinkConcentration, "", rmt_sink_concentration(m));
            v.put(n::kSpectra, h, n::kRmtRowEntropyBits, "", rmt_row_entropy_bits(m));
        } else {
            v.put(n::kSpectra, h, n::kParticipationRatio, "", sv.participation_ratio);
            v.put(n::kSpectra, h, n::kMpKs, "", sv.mp_ks);
            v.put(n::kSpectra, h, n::kSigma1Sq, "",
                  sv.sigma2.empty() ? std::numeric_limits<double>::quiet_NaN() : sv.sigma2[0]);
        }
    }
};

const Spectra instance;

}  // namespace

const Member& spectra_member = instance;

}  // namespace sinkscope::metrics::ref_frame
