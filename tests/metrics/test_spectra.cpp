// Random-matrix spectra: Marchenko-Pastur law, stable rank, compat eigenvalue statistics
// (spec 8, 10.l; PAPERS.md B.9).
#include <cmath>
#include <numbers>
#include <random>

#include <gtest/gtest.h>

#include "sinkscope/metrics/spectra.hpp"
#include "testing.hpp"

using namespace sinkscope::metrics;
namespace testutil = sinkscope::testutil;

// The closed-form MP(1) CDF matches a midpoint quadrature of its density and its ends.
TEST(Spectra, MarchenkoPasturCdfMatchesQuadrature) {
    EXPECT_EQ(marchenko_pastur_cdf(0.0), 0.0);
    EXPECT_EQ(marchenko_pastur_cdf(4.0), 1.0);
    for (double x : {0.5, 1.0, 2.0, 3.5}) {
        // substitute x = t^2 to remove the 1/sqrt singularity at 0: dx = 2t dt
        const int n = 200000;
        double acc = 0;
        const double tmax = std::sqrt(x);
        for (int k = 0; k < n; ++k) {
            const double t = (k + 0.5) * tmax / n;
            acc += std::sqrt(4 - t * t) / (2 * std::numbers::pi * t) * 2 * t;
        }
        // midpoint rule on g(t) = sqrt(4 - t^2) / pi: error <= tmax h^2 max|g''| / 24 with
        // max|g''| = 4 / (pi (4 - x)^1.5), plus the float64 sum of n terms (gamma_n * integral)
        const double h = tmax / n;
        const double quadrature =
            tmax * h * h * 4 / (std::numbers::pi * std::pow(4 - x, 1.5)) / 24 +
            testutil::gamma_k(n, testutil::kU64) * acc * h;
        EXPECT_WITHIN(marchenko_pastur_cdf(x), acc * tmax / n, quadrature) << x;
    }
}

// sigma^2 of a square Gaussian matrix follow MP(gamma = 1): KS of the bulk < 0.05 at 512.
TEST(Spectra, GaussianMatrixFollowsMarchenkoPastur) {
    std::mt19937_64 rng(12345);
    std::normal_distribution<double> normal;
    Eigen::MatrixXd x(512, 512);
    for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
    const auto s = singular_spectrum(x);
    EXPECT_LT(s.mp_ks, 0.05);
}

// Uniform attention is rank one (KS NaN: the bulk is all zero); a rank-one matrix plus small
// noise has stable rank near 1.
TEST(Spectra, RankOneHasStableRankOne) {
    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal;
    Eigen::VectorXd u(64), v(64);
    for (int i = 0; i < 64; ++i) u[i] = normal(rng), v[i] = normal(rng);
    Eigen::MatrixXd a = u * v.transpose();
    for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] += 0.01 * normal(rng);
    const auto s = singular_spectrum(a);
    // perturbation, not rounding: stable rank - 1 ~ ||N||_F^2 / sigma_1^2 ~ (0.01 * 64)^2 / 64^2 =
    // 1e-4 for noise N of std 0.01 (|u| |v| ~ 64); 0.01 is 100 times that
    EXPECT_WITHIN(s.stable_rank, 1.0, 0.01);
    const auto flat = singular_spectrum(Eigen::MatrixXd::Constant(16, 16, 1.0 / 16));
    // an SVD of a 16 x 16 matrix: singular values within n 2^-53 ||A|| (rounding noise squared
    // adds ~u^2 to the sum)
    EXPECT_REL_WITHIN(flat.stable_rank, 1.0, testutil::kF64SumRel);
    EXPECT_TRUE(std::isnan(flat.mp_ks));
}

// The identity has n equal singular values: stable rank n, participation ratio n.
TEST(Spectra, IdentityHasFullRank) {
    const auto s = singular_spectrum(Eigen::MatrixXd::Identity(20, 20));
    EXPECT_REL_WITHIN(s.stable_rank, 20.0, testutil::kF64SumRel);  // sums of 20 squares
    EXPECT_REL_WITHIN(s.participation_ratio, 20.0, testutil::kF64SumRel);
}

// Compat on causal A reads the diagonal; a general eigensolver on the same lower-triangular
// matrix gives the same gap and participation ratio.
TEST(Spectra, CompatCausalDiagonalEqualsEigenvalues) {
    const int n = 10;
    Eigen::MatrixXd a = Eigen::MatrixXd::Zero(n, n);
    for (int i = 0; i < n; ++i) {
        a(i, i) = 1.0 / (i + 1.5);
        for (int j = 0; j < i; ++j) a(i, j) = (1 - a(i, i)) / i;
    }
    a(0, 0) = 1.0;
    const auto diag = eigen_spectrum_compat(a, true);
    const auto general = eigen_spectrum_compat(a, false);
    EXPECT_REL_WITHIN(diag.spectral_gap, 1.0 / (1.0 / 2.5), testutil::kFewOps);
    // Non-symmetric QR (Eigen::EigenSolver): |d lambda| <= kappa(lambda) n 2^-53 ||A|| with
    // ||A|| <= 2 and eigenvalue condition numbers kappa <= ~10^5 for this triangular matrix (its
    // diagonal entries are >= 0.007 apart): <= 2e-10.
    constexpr double kNonsymmetricEigenAbs = 1e-9;
    EXPECT_WITHIN(general.spectral_gap, diag.spectral_gap, kNonsymmetricEigenAbs);
    EXPECT_WITHIN(general.participation_ratio, diag.participation_ratio, kNonsymmetricEigenAbs);
}

// rmt.ipynb's top-10 MP-KL is +inf when a normalised value falls outside the MP support and
// finite when they all sit inside it.
TEST(Spectra, CompatMpKlInfiniteOutsideSupport) {
    std::vector<double> outlier(10, 0.01);
    outlier[0] = 100.0;  // normalised to ~9.9 > 3.99
    EXPECT_TRUE(std::isinf(mp_kl_compat(outlier)));
    const std::vector<double> inside{0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0};
    const double kl = mp_kl_compat(inside);
    EXPECT_TRUE(std::isfinite(kl));
    EXPECT_GE(kl, 0.0);
}
