// Section 8 member "spectra": singular-value spectra of attention against Marchenko-Pastur
// (spec 8, 10.l; compat B.9: eigenvalues), on the head average and, with --per-head, each head.
#include <limits>

#include "p2_member.hpp"
#include "sinkscope/metrics/spectra.hpp"

namespace sinkscope::metrics::p2 {
namespace {

class Spectra final : public Member {
public:
    const char* name() const override { return "spectra"; }
    std::vector<std::string> tables() const override { return {"spectra"}; }
    LayerNeeds needs(const P2Config&, bool) const override {
        return {.avg = true, .head_matrix = true};
    }
    void matrix(const LayerView& v, int64_t h, const Eigen::MatrixXd& m) const override {
        const auto sv = singular_spectrum(m);
        v.put("spectra", h, "stable_rank", "", sv.stable_rank);
        if (v.c.compat) {
            const auto ev = eigen_spectrum_compat(m, v.in.masking == Masking::Causal);
            v.put("spectra", h, "spectral_gap", "", ev.spectral_gap);
            v.put("spectra", h, "eig_participation_ratio", "", ev.participation_ratio);
            v.put("spectra", h, "mp_kl", "", ev.mp_kl);
        } else {
            v.put("spectra", h, "participation_ratio", "", sv.participation_ratio);
            v.put("spectra", h, "mp_ks", "", sv.mp_ks);
            v.put("spectra", h, "sigma1_sq", "",
                  sv.sigma2.empty() ? std::numeric_limits<double>::quiet_NaN() : sv.sigma2[0]);
        }
    }
};

const Spectra instance;

}  // namespace

const Member& spectra_member = instance;

}  // namespace sinkscope::metrics::p2
