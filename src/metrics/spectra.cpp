// Random-matrix spectra of attention (spec 8, 10.l; compat rmt.ipynb, PAPERS.md B.9).
#include "sinkscope/metrics/spectra.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <numbers>
#include <vector>

#include <cblas.h>

#include "sinkscope/core/error.hpp"

// LAPACK (liblapack-dev; at run time the liblapack.so.3 alternative, OpenBLAS's with the install
// script): eigenvalues of a symmetric matrix by two-stage tridiagonalisation (dense -> band by
// blocked products, band -> tridiagonal) and a divide-and-conquer / QL solve. Fortran calling
// convention: every argument by pointer, then the hidden lengths of the character arguments.
extern "C" void dsyevd_2stage_(const char* jobz, const char* uplo, const int* n, double* a,
                               const int* lda, double* w, double* work, const int* lwork,
                               int* iwork, const int* liwork, int* info, size_t jobz_len,
                               size_t uplo_len);

namespace sinkscope::metrics {
namespace {
constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
constexpr double k_inf = std::numeric_limits<double>::infinity();
}  // namespace

double marchenko_pastur_cdf(double x) {
    if (x <= 0) return 0.0;
    if (x >= 4) return 1.0;
    // With x = 4 sin^2(theta), the integral of sqrt((4 - x) / x) / (2 pi) is
    // (2 theta + sin(2 theta)) / pi.
    const double theta = std::asin(std::sqrt(x / 4.0));
    return (2.0 * theta + std::sin(2.0 * theta)) / std::numbers::pi;
}

double mp_bulk_ks(std::vector<double> sigma2) {
    if (sigma2.size() < 2) return k_nan;
    std::sort(sigma2.begin(), sigma2.end());
    sigma2.pop_back();  // the top outlier (10.l)
    double mean = 0;
    for (double v : sigma2) mean += v;
    mean /= static_cast<double>(sigma2.size());
    if (!(mean > 0)) return k_nan;
    const double m = static_cast<double>(sigma2.size());
    double ks = 0;
    for (size_t i = 0; i < sigma2.size(); ++i) {
        const double f = marchenko_pastur_cdf(sigma2[i] / mean);
        ks = std::max({ks, std::abs(static_cast<double>(i + 1) / m - f),
                       std::abs(f - static_cast<double>(i) / m)});
    }
    return ks;
}

namespace {

// Lower triangle of a a^T ([m, m], the strict upper triangle left 0), as a sum of rank-b
// updates over column blocks K: a[:, K] a[:, K]^T. Rows above the first non-zero row of a
// block add exactly 0 and are skipped, so a causal (lower-triangular) matrix costs n^3 / 3
// multiply-adds instead of the 2 n^3 of a general product; only the summation order differs.
// Each update is the system BLAS's dsyrk (OpenBLAS: kernels picked for the CPU at run time;
// the analyses run it on one thread, see core/system.hpp SingleThreadedBlas).
Eigen::MatrixXd gram_lower(const Eigen::MatrixXd& a) {
    const Eigen::Index m = a.rows(), k = a.cols();
    Eigen::MatrixXd gram = Eigen::MatrixXd::Zero(m, m);  // [m, m]
    constexpr Eigen::Index block = 128;
    for (Eigen::Index k0 = 0; k0 < k; k0 += block) {
        const Eigen::Index kb = std::min(block, k - k0);
        Eigen::Index r0 = m;
        for (Eigen::Index c = k0; c < k0 + kb; ++c) {
            Eigen::Index r = 0;
            while (r < r0 && a(r, c) == 0.0) ++r;
            r0 = std::min(r0, r);
        }
        if (r0 == m) continue;
        cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, static_cast<int>(m - r0),
                    static_cast<int>(kb), 1.0, &a(r0, k0), static_cast<int>(a.outerStride()), 1.0,
                    &gram(r0, r0), static_cast<int>(gram.outerStride()));
    }
    return gram;
}

// Eigenvalues of the symmetric matrix whose lower triangle `a` holds, ascending (a is
// overwritten). LAPACK's routine is backward stable like Eigen's SelfAdjointEigenSolver (each
// eigenvalue within ~n u ||a|| of the exact one), and on a 2,048 x 2,048 Gram matrix ~4x faster
// on one core (bench/README.md): Eigen's tridiagonalisation is unblocked, memory-bound rank-2
// updates.
Eigen::VectorXd symmetric_eigenvalues(Eigen::MatrixXd& a) {
    const int n = static_cast<int>(a.rows()), lda = static_cast<int>(a.outerStride());
    Eigen::VectorXd w(n);
    int info = 0, lwork = -1, liwork = -1, iwork_query = 0;
    double work_query = 0;
    dsyevd_2stage_("N", "L", &n, a.data(), &lda, w.data(), &work_query, &lwork, &iwork_query,
                   &liwork, &info, 1, 1);
    SS_CHECK(info == 0, "LAPACK dsyevd_2stage workspace query failed (info ", info, ")");
    lwork = static_cast<int>(work_query);
    liwork = iwork_query;
    std::vector<double> work(static_cast<size_t>(std::max(lwork, 1)));
    std::vector<int> iwork(static_cast<size_t>(std::max(liwork, 1)));
    dsyevd_2stage_("N", "L", &n, a.data(), &lda, w.data(), work.data(), &lwork, iwork.data(),
                   &liwork, &info, 1, 1);
    SS_CHECK(info == 0, "LAPACK dsyevd_2stage failed on a ", n, " x ", n, " Gram matrix (info ",
             info, ")");
    return w;
}

}  // namespace

SingularSpectrum singular_spectrum(const Eigen::MatrixXd& a) {
    SingularSpectrum s;
    if (a.size() == 0) return s;
    // sigma^2 are the eigenvalues of the Gram matrix of the smaller side; a symmetric
    // eigenvalue solve (values only: tridiagonalisation + implicit QL, no vectors) is several
    // times faster than an SVD and exact enough for these ratios. The solver reads the lower
    // triangle only.
    Eigen::MatrixXd gram =
        a.rows() <= a.cols() ? gram_lower(a) : gram_lower(a.transpose().eval());  // [k, k]
    const Eigen::VectorXd ev = symmetric_eigenvalues(gram);                       // ascending
    // Below ~1e-13 sigma_1^2 the Gram eigenvalues are rounding noise: they are set to 0, so a
    // rank-one matrix has an all-zero bulk (KS NaN, 10.l) rather than a KS of noise.
    const double resolution = 1e-13 * std::max(0.0, ev[ev.size() - 1]);
    for (Eigen::Index i = ev.size() - 1; i >= 0; --i)
        s.sigma2.push_back(ev[i] > resolution ? ev[i] : 0.0);
    double sum = 0, sum_sq = 0;
    for (double v : s.sigma2) {
        sum += v;
        sum_sq += v * v;
    }
    const double top = s.sigma2.front();
    s.stable_rank = top > 0 ? sum / top : k_nan;
    s.participation_ratio = sum_sq > 0 ? sum * sum / sum_sq : k_nan;
    s.mp_ks = mp_bulk_ks(s.sigma2);
    return s;
}

double mp_kl_compat(std::vector<double> magnitudes) {
    std::sort(magnitudes.begin(), magnitudes.end(), std::greater<>());
    if (magnitudes.size() > 10) magnitudes.resize(10);
    if (magnitudes.empty()) return k_nan;
    double mean = 0;
    for (double v : magnitudes) mean += v;
    mean /= static_cast<double>(magnitudes.size());
    if (!(mean > 0)) return k_nan;
    for (double& v : magnitudes) v /= mean;
    // np.histogram(x, bins=20, density=True): range [min, max], or [v - 0.5, v + 0.5] when flat.
    double lo = *std::min_element(magnitudes.begin(), magnitudes.end());
    double hi = *std::max_element(magnitudes.begin(), magnitudes.end());
    if (lo == hi) {
        lo -= 0.5;
        hi += 0.5;
    }
    constexpr int n_bins = 20;
    const double width = (hi - lo) / n_bins;
    std::array<double, n_bins> hist{}, mp{};
    for (double v : magnitudes) {
        auto b = static_cast<int>((v - lo) / width);
        hist[static_cast<size_t>(std::clamp(b, 0, n_bins - 1))] += 1;
    }
    const double gamma = 0.99;
    const double a = std::pow(1 - std::sqrt(gamma), 2), b = std::pow(1 + std::sqrt(gamma), 2);
    double hsum = 0, msum = 0;
    for (int k = 0; k < n_bins; ++k) {
        const double x = lo + (k + 0.5) * width;
        mp[static_cast<size_t>(k)] =
            (x >= a && x <= b) ? std::sqrt((b - x) * (x - a)) / (2 * std::numbers::pi * gamma * x)
                               : 0.0;
        hsum += hist[static_cast<size_t>(k)];
        msum += mp[static_cast<size_t>(k)];
    }
    if (!(msum > 0)) return k_inf;
    double kl = 0;
    for (size_t k = 0; k < n_bins; ++k) {
        const double p = hist[k] / hsum, q = mp[k] / msum;
        if (p <= 0) continue;
        if (q <= 0) return k_inf;
        kl += p * std::log(p / q);
    }
    return kl;
}

EigenSpectrum eigen_spectrum_compat(const Eigen::MatrixXd& a, bool causal) {
    EigenSpectrum s;
    std::vector<double> mag;  // |lambda|
    if (causal) {
        // Lower-triangular A: its eigenvalues are exactly its diagonal.
        for (Eigen::Index i = 0; i < a.rows(); ++i) mag.push_back(std::abs(a(i, i)));
    } else {
        Eigen::EigenSolver<Eigen::MatrixXd> solver(a, false);
        SS_CHECK(solver.info() == Eigen::Success, "eigensolver failed on an attention matrix");
        for (const auto& l : solver.eigenvalues()) mag.push_back(std::abs(l));
    }
    std::sort(mag.begin(), mag.end(), std::greater<>());
    if (mag.empty()) return s;
    s.spectral_gap = mag.size() < 2 ? k_nan : (mag[1] > 0 ? mag[0] / mag[1] : k_inf);
    double sum = 0, sum_sq = 0;
    for (double v : mag) {
        sum += v;
        sum_sq += v * v;
    }
    s.participation_ratio = sum_sq > 0 ? sum * sum / sum_sq : k_nan;
    s.mp_kl = mp_kl_compat(mag);
    return s;
}

}  // namespace sinkscope::metrics
