// Sink sets, sink-removal KL and sink concentration (spec 8, 10.k; PAPERS.md B.5).
#include "sinkscope/metrics/sink_kl.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/topology.hpp"

namespace sinkscope::metrics {
namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();

// KL(p || q) in nats over [0, n) with 0 ln 0 = 0 and +inf where q = 0 < p.
double kl_divergence(const double* p, const double* q, int64_t n) {
    double kl = 0;
    for (int64_t j = 0; j < n; ++j) {
        if (p[j] <= 0) continue;
        if (q[j] <= 0) return std::numeric_limits<double>::infinity();
        kl += p[j] * std::log(p[j] / q[j]);
    }
    return kl;
}

// Rows of one layer as [H][n * n] with entries outside the visible keys set to 0. Principled:
// rows closed over their visible keys (10.a). Compat: raw rows renormalised over all n keys,
// an all-zero row becoming uniform (KL.ipynb step 1).
std::vector<std::vector<double>> layer_rows(const AttentionInput& in, int64_t layer, bool compat) {
    const int64_t n = in.length;
    std::vector<std::vector<double>> heads(static_cast<size_t>(in.n_heads),
                                           std::vector<double>(static_cast<size_t>(n * n), 0.0));
    for (int64_t h = 0; h < in.n_heads; ++h) {
        auto& m = heads[static_cast<size_t>(h)];  // [n, n]
        for (int64_t i = 0; i < n; ++i) {
            const double* src = in.row(layer, h, i);
            double* dst = m.data() + i * n;
            const int64_t kb = in.key_begin(i), ke = std::min(in.key_end(i), n);
            double sum = 0;
            for (int64_t j = kb; j < ke; ++j) sum += (dst[j] = src[j]);
            if (sum > 0) {
                for (int64_t j = kb; j < ke; ++j) dst[j] /= sum;
            } else if (compat) {
                std::fill(dst, dst + n, 1.0 / static_cast<double>(n));
            } else if (ke > kb) {
                std::fill(dst + kb, dst + ke, 1.0 / static_cast<double>(ke - kb));
            }
        }
    }
    return heads;
}

}  // namespace

double percentile_linear(std::vector<double> values, double q) {
    SS_CHECK(!values.empty(), "percentile of no values");
    std::sort(values.begin(), values.end());
    const double index = (q / 100.0) * static_cast<double>(values.size() - 1);
    const auto lo = static_cast<size_t>(std::floor(index));
    const size_t hi = std::min(lo + 1, values.size() - 1);
    const double frac = index - static_cast<double>(lo);
    const double a = values[lo], b = values[hi], diff = b - a;
    // numpy's _lerp: interpolate from the nearer end so the result is exact at both ends.
    return frac >= 0.5 ? b - diff * (1.0 - frac) : a + diff * frac;
}

std::vector<int64_t> sink_set(const std::vector<double>& incoming, double t) {
    const double cut = percentile_linear(incoming, 100.0 * t);
    std::vector<int64_t> s;
    for (size_t j = 0; j < incoming.size(); ++j)
        if (incoming[j] >= cut) s.push_back(static_cast<int64_t>(j));
    return s;
}

SinkKl sink_kl(const AttentionInput& in, int64_t layer, double t, bool compat) {
    const int64_t n = in.length, n_heads = in.n_heads;
    SinkKl out;
    if (n == 0 || n_heads == 0) return out;
    const auto heads = layer_rows(in, layer, compat);  // [H][n, n]

    // Pass 1: incoming mass over heads and rows, and the sink set S_t.
    std::vector<double> incoming(static_cast<size_t>(n), 0.0);  // [n]
    for (const auto& m : heads)
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j) incoming[static_cast<size_t>(j)] += m[i * n + j];
    const auto sinks = sink_set(incoming, t);
    std::vector<char> is_sink(static_cast<size_t>(n), 0);
    for (auto j : sinks) is_sink[static_cast<size_t>(j)] = 1;
    out.n_sinks = static_cast<int64_t>(sinks.size());

    // Pass 2: concentration. Compat: share of the first 4 heads' total mass on S, in percent.
    if (compat) {
        const int64_t n_conc = std::min(n_heads, k_compat_conc_heads);
        double acc = 0;
        for (int64_t h = 0; h < n_conc; ++h) {
            const auto& m = heads[static_cast<size_t>(h)];
            double on_s = 0, total = 0;
            for (int64_t i = 0; i < n; ++i)
                for (int64_t j = 0; j < n; ++j) {
                    total += m[i * n + j];
                    if (is_sink[static_cast<size_t>(j)]) on_s += m[i * n + j];
                }
            acc += total > 0 ? on_s / total : 0.0;
        }
        out.concentration = 100.0 * acc / static_cast<double>(n_conc);
    } else {
        double acc = 0;
        int64_t cnt = 0;
        for (const auto& m : heads)
            for (int64_t i = 0; i < n; ++i) {
                double on_s = 0;
                for (auto j : sinks) on_s += m[i * n + j];
                acc += on_s;
                ++cnt;
            }
        out.concentration = acc / static_cast<double>(cnt);
    }

    // Pass 3: KL of every head to the head average, with and without S (rows renormalised;
    // a row left with no mass becomes uniform over its non-sink keys).
    std::vector<int64_t> rows;
    if (compat && n > k_compat_kl_rows) {
        rows = linspace_indices(n, k_compat_kl_rows);
    } else {
        for (int64_t i = 0; i < n; ++i) rows.push_back(i);
    }
    std::vector<double> mean(static_cast<size_t>(n)), mean_cut(static_cast<size_t>(n));
    std::vector<std::vector<double>> cut(static_cast<size_t>(n_heads),
                                         std::vector<double>(static_cast<size_t>(n)));
    double sum_before = 0, sum_after = 0;
    for (int64_t i : rows) {
        // Compat sees all n keys of the row; principled its visible keys.
        const int64_t kb = compat ? 0 : in.key_begin(i);
        const int64_t ke = compat ? n : std::min(in.key_end(i), n);
        int64_t n_free = 0;
        for (int64_t j = kb; j < ke; ++j) n_free += is_sink[static_cast<size_t>(j)] ? 0 : 1;
        if (n_free == 0) {
            ++out.rows_excluded;
            continue;
        }
        std::fill(mean.begin(), mean.end(), 0.0);
        std::fill(mean_cut.begin(), mean_cut.end(), 0.0);
        for (int64_t h = 0; h < n_heads; ++h) {
            const double* p = heads[static_cast<size_t>(h)].data() + i * n;
            auto& c = cut[static_cast<size_t>(h)];
            double rest = 0;
            for (int64_t j = 0; j < n; ++j) {
                mean[static_cast<size_t>(j)] += p[j] / static_cast<double>(n_heads);
                c[static_cast<size_t>(j)] =
                    (j >= kb && j < ke && !is_sink[static_cast<size_t>(j)]) ? p[j] : 0.0;
                rest += c[static_cast<size_t>(j)];
            }
            for (int64_t j = kb; j < ke; ++j) {
                if (is_sink[static_cast<size_t>(j)]) continue;
                c[static_cast<size_t>(j)] =
                    rest > 0 ? c[static_cast<size_t>(j)] / rest : 1.0 / static_cast<double>(n_free);
            }
            for (int64_t j = 0; j < n; ++j)
                mean_cut[static_cast<size_t>(j)] += c[static_cast<size_t>(j)] / n_heads;
        }
        for (int64_t h = 0; h < n_heads; ++h) {
            const double* p = heads[static_cast<size_t>(h)].data() + i * n;
            sum_before += kl_divergence(p, mean.data(), n);
            sum_after += kl_divergence(cut[static_cast<size_t>(h)].data(), mean_cut.data(), n);
        }
        ++out.rows_used;
    }
    if (out.rows_used == 0) {
        out.kl_before = out.kl_after = out.kl_reduction = k_nan;
        return out;
    }
    const double denom = static_cast<double>(out.rows_used * n_heads);
    out.kl_before = sum_before / denom;
    out.kl_after = sum_after / denom;
    out.kl_reduction = out.kl_before - out.kl_after;
    return out;
}

double direct_sink_mass(const AttentionInput& in, int64_t layer, int64_t sink) {
    double acc = 0;
    int64_t cnt = 0;
    for (int64_t h = 0; h < in.n_heads; ++h)
        for (int64_t i = 0; i < in.length; ++i) {
            const int64_t kb = in.key_begin(i), ke = std::min(in.key_end(i), in.length);
            if (sink < kb || sink >= ke) continue;
            const double* r = in.row(layer, h, i);
            double sum = 0;
            for (int64_t j = kb; j < ke; ++j) sum += r[j];
            if (sum <= 0) continue;
            acc += r[sink] / sum;
            ++cnt;
        }
    return cnt > 0 ? acc / static_cast<double>(cnt) : k_nan;
}

}  // namespace sinkscope::metrics
