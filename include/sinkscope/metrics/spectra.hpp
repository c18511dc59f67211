// Random-matrix spectra of attention matrices (spec section 8 "Random-matrix spectra", 10.l;
// compat semantics of rmt.ipynb in PAPERS.md B.9).
#pragma once

#include <cstdint>
#include <vector>

#include <Eigen/Dense>

namespace sinkscope::metrics {

struct SingularSpectrum {
    std::vector<double> sigma2;      // squared singular values, descending
    double stable_rank = 0;          // sum sigma^2 / sigma_1^2
    double participation_ratio = 0;  // (sum sigma^2)^2 / sum sigma^4
    double mp_ks = 0;  // KS of the normalised bulk vs MP(gamma = 1); NaN if degenerate
};

// Principled spectrum of any [m, n] matrix (10.l).
SingularSpectrum singular_spectrum(const Eigen::MatrixXd& a);

// Marchenko-Pastur CDF for gamma = 1, unit variance, support [0, 4].
double marchenko_pastur_cdf(double x);
// KS distance of the bulk (largest value removed, rest divided by its mean) to MP(1);
// NaN when the bulk is empty or all zero (10.l).
double mp_bulk_ks(std::vector<double> sigma2);

struct EigenSpectrum {
    double spectral_gap = 0;         // |l1| / |l2| (inf when l2 = 0)
    double participation_ratio = 0;  // (sum |l|)^2 / sum |l|^2
    double mp_kl = 0;                // top-10 |l| histogram vs MP(0.99) KL; may be inf
};

// Compat (B.9): eigenvalues of A (for causal A, exactly its diagonal).
EigenSpectrum eigen_spectrum_compat(const Eigen::MatrixXd& a, bool causal);

// rmt.ipynb's MP-KL on values (top 10 by magnitude, normalised by their mean, 20-bin density
// histogram over [min, max] vs the MP(0.99) density at bin centres, both summed to 1).
double mp_kl_compat(std::vector<double> magnitudes);

}  // namespace sinkscope::metrics
