// Value-space analyses (spec section 8 "Value space", "Attention entropy ... alignment";
// compat semantics from PAPERS.md B.6 and B.7, with its entropy-magnitude and PCA correlations).
#include "sinkscope/metrics/value_space.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>
#include <utility>

#include <cblas.h>
#include <Eigen/Dense>

#include "sinkscope/core/error.hpp"

namespace sinkscope::metrics {

namespace {

// Head-averaged attention of layer l, rows closed over their visible keys (spec 10.a);
// [T, T] row-major, invisible entries 0.
std::vector<double> head_average(const AttentionInput& a, int64_t l, bool close_rows) {
    const int64_t T = a.n_tokens;
    std::vector<double> avg(static_cast<size_t>(T * T), 0.0);
    std::vector<double> buffer;  // recomputed rows of a long input
    for (int64_t h = 0; h < a.n_heads; ++h)
        a.for_each_row(l, h, 0, a.length, buffer, [&](int64_t i, const double* row) {
            double sum = 0;
            for (int64_t j = a.key_begin(i); j < a.key_end(i); ++j) sum += row[j];
            double scale = close_rows && sum > 0 ? 1.0 / sum : 1.0;
            for (int64_t j = a.key_begin(i); j < a.key_end(i); ++j)
                avg[i * T + j] += row[j] * scale / double(a.n_heads);
        });
    return avg;
}

double norm(const double* v, int64_t d) {
    double s = 0;
    for (int64_t k = 0; k < d; ++k) s += v[k] * v[k];
    return std::sqrt(s);
}

// Relative magnitude and directional influence of the reference part of one attention row, from
// its output `post` = sum_j a_ij v_j and reference part `ref` = sum_{j in R} a_ij v_j ([d]
// each). False when the row sees no reference key or either sum is zero.
bool reference_share(const double* post, const double* ref, int64_t d, bool any_ref, double& rel,
                     double& direction) {
    const double np = norm(post, d), nr = norm(ref, d);
    if (!any_ref || np == 0 || nr == 0) return false;
    double dot = 0;
    for (int64_t k = 0; k < d; ++k) dot += ref[k] * post[k];
    rel = std::clamp(nr / np, 0.0, 1.0);
    direction = (std::clamp(dot / (nr * np), -1.0, 1.0) + 1.0) / 2.0;
    return true;
}

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Rows `idx` of a row-major [*, d] array.
RowMatrix gather_rows(const double* v, int64_t d, const std::vector<int64_t>& idx) {
    RowMatrix out(static_cast<Eigen::Index>(idx.size()), d);  // [|idx|, d]
    for (size_t k = 0; k < idx.size(); ++k)
        for (int64_t c = 0; c < d; ++c) out(static_cast<Eigen::Index>(k), c) = v[idx[k] * d + c];
    return out;
}

// out = A B (b_transposed: A B^T) for row-major A [m, k] and B [k, n] ([n, k]), out resized to
// [m, n]. The large products go to the system BLAS (OpenBLAS with the install script), which
// picks its kernels for the CPU at run time; Eigen's are fixed at build time (SSE2 in a portable
// build) and ~10x slower here. Same sums, another summation order.
void gemm(bool b_transposed, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
          const double* b, int64_t ldb, RowMatrix& out) {
    out.resize(m, n);
    if (k == 0) {  // an empty sum (no reference token); BLAS would refuse lda = 0
        out.setZero();
        return;
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans,
                static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
                static_cast<int>(lda), b, static_cast<int>(ldb), 0.0, out.data(),
                static_cast<int>(n));
}

// Rows per block of the products below: a block's weights and outputs stay small ([b, T] and
// [b, d]) and its product only spans the keys its rows see (about half for causal attention).
constexpr int64_t k_row_block = 256;

// Principal components of the PCA correlation (B.7: PCA(3)).
constexpr int k_pca_components = 3;

// Keys seen by rows [i0, i1): [min key_begin, max key_end).
std::pair<int64_t, int64_t> block_keys(const AttentionInput& a, int64_t i0, int64_t i1) {
    int64_t kb = a.n_tokens, ke = 0;
    for (int64_t i = i0; i < i1; ++i) {
        kb = std::min(kb, a.key_begin(i));
        ke = std::max(ke, std::min(a.key_end(i), a.n_tokens));
    }
    return {std::min(kb, ke), ke};
}

// For rows [i0, i1) with weights w ([i1 - i0, T] row-major, 0 outside each row's visible keys)
// over vectors v ([T, d] row-major): post = w v and ref = w[:, R] v[R, :] ([i1 - i0, d] each),
// as blocked matrix products. The weights outside the visible keys add exact zeros, so these
// are the sums over visible keys of spec 8 in another summation order.
void block_sums(const AttentionInput& a, int64_t i0, int64_t i1, const double* w, const double* v,
                int64_t d, const std::vector<int64_t>& ref, const RowMatrix& v_ref, RowMatrix& post,
                RowMatrix& ref_sum) {
    const int64_t T = a.n_tokens, rows = i1 - i0;
    const auto [kb, ke] = block_keys(a, i0, i1);
    if (ke > kb)
        gemm(false, rows, d, ke - kb, w + kb, T, v + kb * d, d, post);
    else
        post.setZero(rows, d);                                     // no visible key in the block
    RowMatrix w_ref(rows, static_cast<Eigen::Index>(ref.size()));  // [rows, |R|]
    for (int64_t r = 0; r < rows; ++r)
        for (size_t k = 0; k < ref.size(); ++k) w_ref(r, k) = w[r * T + ref[k]];
    gemm(false, rows, d, static_cast<int64_t>(ref.size()), w_ref.data(), w_ref.cols(), v_ref.data(),
         d, ref_sum);
}

}  // namespace

double pearson_r(const std::vector<double>& x, const std::vector<double>& y) {
    SS_CHECK(x.size() == y.size(), "pearson_r on samples of different length");
    const double n = double(x.size());
    if (x.size() < 2) return std::nan("");
    double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
    double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t k = 0; k < x.size(); ++k) {
        double dx = x[k] - mx, dy = y[k] - my;
        sxy += dx * dy, sxx += dx * dx, syy += dy * dy;
    }
    if (sxx == 0 || syy == 0) return std::nan("");
    return sxy / std::sqrt(sxx * syy);
}

double row_entropy(const double* row, int64_t begin, int64_t end, double floor) {
    double sum = 0, plogp = 0;
    for (int64_t j = begin; j < end; ++j)
        if (row[j] > floor) {
            sum += row[j];
            plogp += row[j] * std::log(row[j]);
        }
    return sum > 0 ? std::log(sum) - plogp / sum : std::nan("");
}

std::vector<std::vector<double>> principal_scores(const double* x, int64_t n, int64_t p, int64_t ld,
                                                  int k) {
    if (k <= 0 || n < k + 1 || p < k) return {};  // centred rank <= min(n - 1, p) < k
    RowMatrix xc(n, p);                           // [n, p] centred columns
    for (int64_t c = 0; c < p; ++c) {
        double mean = 0;
        for (int64_t i = 0; i < n; ++i) mean += x[i * ld + c];
        mean /= double(n);
        for (int64_t i = 0; i < n; ++i) xc(i, c) = x[i * ld + c] - mean;
    }
    // The smaller Gram matrix: its k leading eigenvectors are the u_k themselves (n <= p) or
    // the v_k, mapped to u_k = X_c v_k / ||X_c v_k||.
    const bool by_rows = n <= p;
    const Eigen::MatrixXd g = by_rows ? Eigen::MatrixXd(xc * xc.transpose())   // [n, n]
                                      : Eigen::MatrixXd(xc.transpose() * xc);  // [p, p]
    const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(g);  // eigenvalues ascending
    SS_CHECK(es.info() == Eigen::Success, "PCA: the eigendecomposition did not converge");
    const Eigen::Index m = g.rows();
    auto lambda = [&](int j) {  // j-th largest (0-based); 0 beyond the Gram's size
        return j < m ? es.eigenvalues()(m - 1 - j) : 0.0;
    };
    const double tau = 8.0 * double(p + n) * 0x1p-53 * xc.squaredNorm();
    for (int j = 0; j < k; ++j)
        if (lambda(j) <= tau || lambda(j) - lambda(j + 1) <= tau) return {};
    std::vector<std::vector<double>> out(static_cast<size_t>(k));
    for (int j = 0; j < k; ++j) {
        Eigen::VectorXd u = by_rows ? Eigen::VectorXd(es.eigenvectors().col(m - 1 - j))
                                    : Eigen::VectorXd(xc * es.eigenvectors().col(m - 1 - j));
        u /= u.norm();
        Eigen::Index top = 0;
        for (Eigen::Index i = 1; i < u.size(); ++i)
            if (std::abs(u(i)) > std::abs(u(top))) top = i;
        if (u(top) < 0) u = -u;
        out[size_t(j)].assign(u.data(), u.data() + u.size());
    }
    return out;
}

PcaCorrelation pca_correlation(const std::vector<std::vector<double>>& a,
                               const std::vector<std::vector<double>>& b) {
    PcaCorrelation out;
    if (a.empty() || a.size() != b.size()) return out;
    double abs_sum = 0, signed_sum = 0;
    for (size_t k = 0; k < a.size(); ++k) {
        const double r = pearson_r(a[k], b[k]);
        if (!std::isfinite(r)) return out;
        abs_sum += std::abs(r);
        signed_sum += r;
    }
    out.abs_mean = abs_sum / double(a.size());
    out.signed_mean = signed_sum / double(a.size());
    return out;
}

std::vector<int64_t> reference_tokens(const std::vector<double>& head_avg, const AttentionInput& a,
                                      const ValueSpaceOptions& opts) {
    const int64_t n = a.length, T = a.n_tokens;
    SS_CHECK(n > 0, "reference_tokens on an empty input");
    // Column mean over all n rows, masked entries counting 0 (spec 10.d, 10.m).
    std::vector<double> col(static_cast<size_t>(n), 0.0);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = a.key_begin(i); j < a.key_end(i); ++j)
            col[j] += head_avg[i * T + j] / double(n);
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t p, int64_t q) { return col[p] > col[q]; });
    int64_t above = 0;
    while (above < n && col[order[above]] > opts.reference_threshold) ++above;
    int64_t k =
        above > 0 ? above : std::max<int64_t>(1, int64_t(opts.fallback_fraction * double(n)));
    int64_t cap = std::max<int64_t>(1, int64_t(opts.cap_fraction * double(n)));
    order.resize(static_cast<size_t>(std::min(k, cap)));
    return order;
}

ValueSpaceAccumulator::ValueSpaceAccumulator(int64_t n_layers, ValueSpaceOptions opts)
    : opts_(opts), layers_(static_cast<size_t>(n_layers)) {}

void ValueSpaceAccumulator::add(const AttentionInput& a,
                                const std::vector<std::vector<double>>& hidden_in, int64_t d_model,
                                const std::vector<std::vector<double>>& values, int64_t d_head,
                                std::vector<ValueSpaceLayer>* per_input) {
    const int64_t L = a.n_layers, H = a.n_heads, T = a.n_tokens, n = a.length;
    SS_CHECK(int64_t(layers_.size()) == L, "value-space accumulator built for ", layers_.size(),
             " layers, input has ", L);
    // Consecutive layers share a state (L + 1), others have their own pair (2 L; value_space.hpp).
    const bool paired = int64_t(hidden_in.size()) == 2 * L;
    SS_CHECK(paired || int64_t(hidden_in.size()) == L + 1, "expected ", L + 1, " or ", 2 * L,
             " hidden states, got ", hidden_in.size());
    const auto entering = [paired](int64_t l) { return size_t(paired ? 2 * l : l); };
    for (const auto& h : hidden_in)
        SS_CHECK(int64_t(h.size()) == T * d_model, "hidden state of ", h.size(),
                 " values, expected ", T * d_model);
    SS_CHECK(values.empty() || int64_t(values.size()) == L, "values for ", values.size(),
             " layers");

    if (per_input) per_input->assign(static_cast<size_t>(L), ValueSpaceLayer{});

    // Compat rescaling of "value vectors" (B.6): 1e5/max|h| when max|h| > 1e5.
    std::vector<std::vector<double>> scaled;
    const auto* hidden = &hidden_in;
    if (opts_.compat) {
        scaled = hidden_in;
        for (auto& h : scaled) {
            double mx = 0;
            for (double v : h) mx = std::max(mx, std::abs(v));
            if (mx > 1e5)
                for (double& v : h) v *= 1e5 / mx;
        }
        hidden = &scaled;
    }

    for (int64_t l = 0; l < L; ++l) {
        ValueSpaceLayer& out = layers_[l];
        // Every sum and count goes into the running state and, when asked, into this input's.
        using L = ValueSpaceLayer;
        ValueSpaceLayer* mine = per_input ? &(*per_input)[static_cast<size_t>(l)] : nullptr;
        auto bump = [&](auto L::*field, auto v) {
            out.*field += v;
            if (mine) mine->*field += v;
        };
        std::vector<double> avg = head_average(a, l, !opts_.compat);
        auto ref = reference_tokens(avg, a, opts_);
        std::vector<char> is_ref(static_cast<size_t>(T), 0);
        for (auto j : ref) is_ref[j] = 1;
        bump(&L::sum_reference_count, double(ref.size()));
        bump(&L::n_inputs, 1);

        // Rows that see a reference key: prefix counts of R over the keys.
        std::vector<int64_t> refs_before(static_cast<size_t>(T + 1), 0);  // [T + 1]
        for (int64_t j = 0; j < T; ++j) refs_before[j + 1] = refs_before[j] + is_ref[j];
        auto sees_reference = [&](int64_t i) {
            const int64_t kb = a.key_begin(i), ke = std::min(a.key_end(i), T);
            return ke > kb && refs_before[ke] - refs_before[kb] > 0;
        };
        RowMatrix post, ref_sum;  // [block rows, d] each

        // Hidden-state variant on the head average (as the paper).
        const double* hv = (*hidden)[entering(l)].data();
        const RowMatrix h_ref = gather_rows(hv, d_model, ref);  // [|R|, d_model]
        for (int64_t i0 = 0; i0 < n; i0 += k_row_block) {
            const int64_t i1 = std::min(n, i0 + k_row_block);
            block_sums(a, i0, i1, avg.data() + i0 * T, hv, d_model, ref, h_ref, post, ref_sum);
            for (int64_t i = i0; i < i1; ++i) {
                if (is_ref[i]) {
                    if (opts_.compat) {
                        bump(&L::sum_rel_magnitude_hidden, 0.5);
                        bump(&L::sum_direction_hidden, 0.5);
                        bump(&L::n_hidden, 1);
                    }
                    continue;
                }
                double rel, dir;
                const bool any_ref = sees_reference(i);
                if (reference_share(post.row(i - i0).data(), ref_sum.row(i - i0).data(), d_model,
                                    any_ref, rel, dir)) {
                    bump(&L::sum_rel_magnitude_hidden, rel);
                    bump(&L::sum_direction_hidden, dir);
                    bump(&L::n_hidden, 1);
                } else if (!any_ref) {
                    bump(&L::n_no_reference_visible, 1);
                }
            }
        }
        // True-V variant: each head's own attention over its own values (R from the average),
        // pooled over the layer's heads and per head.
        if (!values.empty()) {
            SS_CHECK(int64_t(values[l].size()) == H * T * d_head, "values of layer ", l, " hold ",
                     values[l].size(), " numbers, expected ", H * T * d_head);
            if (out.heads.empty()) out.heads.resize(static_cast<size_t>(H));
            SS_CHECK(int64_t(out.heads.size()) == H, "value-space accumulator holds ",
                     out.heads.size(), " heads, input has ", H);
            if (mine) mine->heads.resize(static_cast<size_t>(H));
            std::vector<double> w;       // [block rows, T] closed rows of one head
            std::vector<double> buffer;  // recomputed rows of a long input
            for (int64_t h = 0; h < H; ++h) {
                const double* vh = values[l].data() + h * T * d_head;
                const RowMatrix v_ref = gather_rows(vh, d_head, ref);  // [|R|, d_head]
                for (int64_t i0 = 0; i0 < n; i0 += k_row_block) {
                    const int64_t i1 = std::min(n, i0 + k_row_block);
                    w.assign(static_cast<size_t>((i1 - i0) * T), 0.0);
                    a.for_each_row(l, h, i0, i1, buffer, [&](int64_t i, const double* row) {
                        double* wi = w.data() + (i - i0) * T;
                        double sum = 0;
                        for (int64_t j = a.key_begin(i); j < a.key_end(i); ++j) sum += row[j];
                        for (int64_t j = a.key_begin(i); j < a.key_end(i); ++j)
                            wi[j] = opts_.compat || sum <= 0 ? row[j] : row[j] / sum;
                    });
                    block_sums(a, i0, i1, w.data(), vh, d_head, ref, v_ref, post, ref_sum);
                    for (int64_t i = i0; i < i1; ++i) {
                        if (is_ref[i]) continue;
                        double rel, dir;
                        if (reference_share(post.row(i - i0).data(), ref_sum.row(i - i0).data(),
                                            d_head, sees_reference(i), rel, dir)) {
                            bump(&L::sum_rel_magnitude_value, rel);
                            bump(&L::sum_direction_value, dir);
                            bump(&L::n_value, 1);
                            for (ValueSpaceLayer* t : {&out, mine})
                                if (t) {
                                    ValueSpaceHead& x = t->heads[static_cast<size_t>(h)];
                                    x.sum_rel_magnitude += rel, x.sum_direction += dir, ++x.n;
                                }
                        }
                    }
                }
            }
        }

        // Transformation magnitude ||h^{l+1}_i - h^l_i|| (spec 8; compat rescaling of B.7).
        const double* h0 = hidden_in[entering(l)].data();
        const double* h1 = hidden_in[entering(l) + 1].data();
        double scale = 1.0;
        if (opts_.compat) {
            double mx = 0;
            for (int64_t k = 0; k < n * d_model; ++k)
                mx = std::max({mx, std::abs(h0[k]), std::abs(h1[k])});
            if (mx > 1e3) scale = 1e3 / mx;
        }
        std::vector<double> magnitude(static_cast<size_t>(n));  // [n] per token
        for (int64_t i = 0; i < n; ++i) {
            double s = 0;
            for (int64_t k = 0; k < d_model; ++k) {
                double diff = (h1[i * d_model + k] - h0[i * d_model + k]) * scale;
                if (opts_.compat) diff = std::clamp(diff, -1e3, 1e3);
                s += diff * diff;
            }
            magnitude[size_t(i)] = std::sqrt(s);
            bump(&L::sum_transformation, magnitude[size_t(i)]);
            bump(&L::n_transformation, 1);
        }

        // Entropy-magnitude correlation (B.7): Pearson r over the tokens between the entropy of
        // the head average's row and the token's transformation magnitude; a token whose row
        // has no entry above the floor (no entropy) is left out.
        {
            const double floor = opts_.compat ? 100.0 * double(FLT_EPSILON) : 0.0;
            std::vector<double> hs, ms;
            for (int64_t i = 0; i < n; ++i) {
                const double e = row_entropy(avg.data() + i * T, a.key_begin(i),
                                             std::min(a.key_end(i), T), floor);
                if (std::isnan(e)) continue;
                hs.push_back(e);
                ms.push_back(magnitude[size_t(i)]);
            }
            const double r = pearson_r(hs, ms);
            if (std::isfinite(r)) {
                bump(&L::sum_entropy_magnitude, r);
                bump(&L::n_entropy_magnitude, 1);
            } else {
                bump(&L::n_entropy_magnitude_undefined, 1);
            }
        }

        // Geometric-semantic alignment: Pearson r of A_ij vs cos(h_i, h_j) over visible
        // off-diagonal pairs (compat: all off-diagonal pairs, structural zeros included).
        std::vector<double> norms(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) norms[i] = norm(hv + i * d_model, d_model);
        // Dot products from blocked products h[I] h[J]^T over the keys the rows of I pair with.
        std::vector<double> xs, ys;
        RowMatrix dots;  // [rows, keys]
        for (int64_t i0 = 0; i0 < n; i0 += k_row_block) {
            const int64_t i1 = std::min(n, i0 + k_row_block);
            auto [jb, je] = block_keys(a, i0, i1);
            if (opts_.compat) jb = 0, je = n;
            je = std::min(je, n);
            if (je <= jb) continue;
            gemm(true, i1 - i0, je - jb, d_model, hv + i0 * d_model, d_model, hv + jb * d_model,
                 d_model, dots);
            for (int64_t i = i0; i < i1; ++i) {
                int64_t j0 = opts_.compat ? 0 : a.key_begin(i),
                        j1 = opts_.compat ? n : a.key_end(i);
                for (int64_t j = j0; j < j1; ++j) {
                    if (j == i) continue;
                    const double dot = dots(i - i0, j - jb);
                    double c = norms[i] > 0 && norms[j] > 0 ? dot / (norms[i] * norms[j]) : 0.0;
                    xs.push_back(avg[i * T + j]);
                    ys.push_back(c);
                }
            }
        }
        double r = pearson_r(xs, ys);
        if (std::isfinite(r)) {
            bump(&L::sum_alignment, r);
            bump(&L::n_alignment, 1);
        } else {
            bump(&L::n_alignment_undefined, 1);
        }

        // PCA correlation (B.7): the first 3 principal components of the head average (the n
        // rows as samples, [n, n]) and of the residual stream entering the layer ([n, d_model];
        // as captured: the compat rescaling by one factor changes no component).
        const PcaCorrelation pca = pca_correlation(
            principal_scores(avg.data(), n, n, T, k_pca_components),
            principal_scores(hidden_in[entering(l)].data(), n, d_model, d_model, k_pca_components));
        if (std::isfinite(pca.abs_mean)) {
            bump(&L::sum_pca, pca.abs_mean);
            bump(&L::sum_pca_signed, pca.signed_mean);
            bump(&L::n_pca, 1);
        } else {
            bump(&L::n_pca_undefined, 1);
        }
    }
}

void ValueSpaceAccumulator::merge(const ValueSpaceAccumulator& o) {
    SS_CHECK(o.layers_.size() == layers_.size(),
             "merging value-space accumulators of different depth");
    for (size_t l = 0; l < layers_.size(); ++l) {
        auto& a = layers_[l];
        const auto& b = o.layers_[l];
        a.sum_reference_count += b.sum_reference_count, a.n_inputs += b.n_inputs;
        a.sum_rel_magnitude_hidden += b.sum_rel_magnitude_hidden;
        a.sum_direction_hidden += b.sum_direction_hidden, a.n_hidden += b.n_hidden;
        a.sum_rel_magnitude_value += b.sum_rel_magnitude_value;
        a.sum_direction_value += b.sum_direction_value, a.n_value += b.n_value;
        a.n_no_reference_visible += b.n_no_reference_visible;
        a.sum_transformation += b.sum_transformation, a.n_transformation += b.n_transformation;
        a.sum_alignment += b.sum_alignment, a.n_alignment += b.n_alignment;
        a.n_alignment_undefined += b.n_alignment_undefined;
        a.sum_entropy_magnitude += b.sum_entropy_magnitude;
        a.n_entropy_magnitude += b.n_entropy_magnitude;
        a.n_entropy_magnitude_undefined += b.n_entropy_magnitude_undefined;
        a.sum_pca += b.sum_pca, a.sum_pca_signed += b.sum_pca_signed, a.n_pca += b.n_pca;
        a.n_pca_undefined += b.n_pca_undefined;
        if (a.heads.empty()) a.heads.resize(b.heads.size());
        SS_CHECK(b.heads.empty() || b.heads.size() == a.heads.size(),
                 "merging value-space accumulators of ", a.heads.size(), " and ", b.heads.size(),
                 " heads");
        for (size_t h = 0; h < b.heads.size(); ++h) {
            a.heads[h].sum_rel_magnitude += b.heads[h].sum_rel_magnitude;
            a.heads[h].sum_direction += b.heads[h].sum_direction;
            a.heads[h].n += b.heads[h].n;
        }
    }
}

// One layer's state, field by field (FieldIo: the same visit saves and loads it).
void fields(FieldIo& io, ValueSpaceLayer& x) {
    io(x.sum_reference_count), io(x.n_inputs);
    io(x.sum_rel_magnitude_hidden), io(x.sum_direction_hidden), io(x.n_hidden);
    io(x.sum_rel_magnitude_value), io(x.sum_direction_value), io(x.n_value);
    io(x.n_no_reference_visible);
    io(x.sum_transformation), io(x.n_transformation);
    io(x.sum_alignment), io(x.n_alignment), io(x.n_alignment_undefined);
    io(x.sum_entropy_magnitude), io(x.n_entropy_magnitude), io(x.n_entropy_magnitude_undefined);
    io(x.sum_pca), io(x.sum_pca_signed), io(x.n_pca), io(x.n_pca_undefined);
    io(x.heads);
}

namespace {
// The state's section tag. "value_space" was the layout before the entropy-magnitude, PCA and
// per-head sums (a raw copy of the per-layer struct); such a state is refused by name.
constexpr const char* k_state_tag = "value_space.2";
}  // namespace

void ValueSpaceAccumulator::save(BinaryWriter& w) const {
    w.tag(k_state_tag);
    FieldIo io(w);
    auto layers = layers_;
    io(layers);
}

void ValueSpaceAccumulator::load(BinaryReader& r) {
    const std::string tag = r.get_string();
    if (tag == "value_space")
        r.fail(
            "value-space state of an earlier sinkscope, without the entropy-magnitude, PCA "
            "and per-head sums: it cannot be resumed; start the run again");
    if (tag != k_state_tag)
        r.fail(std::string("expected section '") + k_state_tag + "', found " + quote(tag));
    FieldIo io(r);
    std::vector<ValueSpaceLayer> layers;
    io(layers);
    if (layers.size() != layers_.size())
        r.fail("value-space state has " + std::to_string(layers.size()) + " layers, expected " +
               std::to_string(layers_.size()));
    layers_ = std::move(layers);
}

}  // namespace sinkscope::metrics
