// Reference-frame member "spectra": singular-value spectra of attention against Marchenko-Pastur
// (spec 8, 10.l; compat B.9: eigenvalues), on the head average and, with --per-head, each head.
#include <limits>

#include "ref_frame_member.hpp"
#include "sinkscope/metrics/ref_frame_names.hpp"
#include "sinkscope/metrics/spectra.hpp"

namespace sinkscope::metrics::ref_frame {
namespace {

namespace n = ref_frame_names;

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
