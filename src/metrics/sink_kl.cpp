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

// One layer's closed rows p(h, i, j) = raw * inv_sum on the visible keys, 0 elsewhere, read a
// block of rows at a time through AttentionInput::rows (thread-safe; a long input's rows are
// recomputed once per block, not once per row). The constructor reads every row once for the
// visible sums (principled and compat both divide by them: 10.a closure; KL.ipynb step 1
// renormalises raw rows, whose masked entries are 0) and each head's column mass of the closed
// rows.
struct LayerRows {
    const AttentionInput& in;
    int64_t layer;
    int64_t n;
    std::vector<double> inv_sum;               // [H, n]
    std::vector<double> head_col;              // [H, n]: sum_i p(h, i, j)
    std::vector<std::vector<double>> buffers;  // [H]: the loaded block's rows (recomputed ones)
    std::vector<const double*> block;          // [H]: rows [b0, b1) of each head
    int64_t b0 = 0, b1 = 0;

    LayerRows(const AttentionInput& input, int64_t l)
        : in(input),
          layer(l),
          n(input.length),
          inv_sum(static_cast<size_t>(input.n_heads * input.length), 0.0),
          head_col(static_cast<size_t>(input.n_heads * input.length), 0.0),
          buffers(static_cast<size_t>(input.n_heads)),
          block(static_cast<size_t>(input.n_heads), nullptr) {
        for (int64_t h = 0; h < in.n_heads; ++h)
            in.for_each_row(layer, h, 0, n, buffers[0], [&](int64_t i, const double* r) {
                double sum = 0;
                for (int64_t j = vis_begin(i); j < vis_end(i); ++j) sum += r[j];
                if (!(sum > 0))
                    throw InputError("attention", "row " + std::to_string(i) + " of layer " +
                                                      std::to_string(layer) + " head " +
                                                      std::to_string(h) +
                                                      " has no mass on its visible keys");
                const double sc = 1.0 / sum;
                inv_sum[static_cast<size_t>(h * n + i)] = sc;
                for (int64_t j = vis_begin(i); j < vis_end(i); ++j)
                    head_col[static_cast<size_t>(h * n + j)] += r[j] * sc;
            });
    }
    int64_t vis_begin(int64_t i) const { return in.key_begin(i); }
    int64_t vis_end(int64_t i) const { return std::min(in.key_end(i), n); }
    // Makes rows [i0, i1) of every head readable by raw().
    void load(int64_t i0, int64_t i1) {
        for (int64_t h = 0; h < in.n_heads; ++h)
            block[static_cast<size_t>(h)] =
                in.rows(layer, h, i0, i1, buffers[static_cast<size_t>(h)]);
        b0 = i0;
        b1 = i1;
    }
    const double* raw(int64_t h, int64_t i) const {
        return block[static_cast<size_t>(h)] + (i - b0) * in.n_tokens;
    }
    double scale(int64_t h, int64_t i) const { return inv_sum[static_cast<size_t>(h * n + i)]; }
};

}  // namespace

double percentile_linear(std::vector<double> values, double q) {
    std::sort(values.begin(), values.end());
    return percentile_linear_sorted(values, q);
}

double percentile_linear_sorted(const std::vector<double>& values, double q) {
    SS_CHECK(!values.empty(), "percentile of no values");
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
    return sink_kl_all(in, layer, {t}, compat).front();
}

std::vector<SinkKl> sink_kl_all(const AttentionInput& in, int64_t layer,
                                const std::vector<double>& percentiles, bool compat,
                                bool all_rows) {
    all_rows = all_rows && !compat;
    const int64_t n = in.length, n_heads = in.n_heads;
    std::vector<SinkKl> results(percentiles.size());
    if (n == 0 || n_heads == 0) return results;
    LayerRows view(in, layer);
    const auto nh = static_cast<double>(n_heads);

    // Rows visited and their key ranges: compat sees all n keys of the row (masked ones hold 0)
    // and only 20 rows when n > 20 (B.5); principled all rows, visible keys.
    std::vector<int64_t> rows;
    if (compat && n > k_compat_kl_rows) {
        rows = linspace_indices(n, k_compat_kl_rows);
    } else {
        for (int64_t i = 0; i < n; ++i) rows.push_back(i);
    }
    auto key_range = [&](int64_t i) {
        return compat ? std::pair<int64_t, int64_t>{0, n}
                      : std::pair<int64_t, int64_t>{view.vis_begin(i), view.vis_end(i)};
    };

    // Pass 1 (the constructor's): incoming mass over heads and all rows, shared by every
    // percentile; and the per-head mass columns the concentration needs.
    const std::vector<double>& head_col = view.head_col;        // [H, n]
    std::vector<double> incoming(static_cast<size_t>(n), 0.0);  // [n]
    for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t j = 0; j < n; ++j)
            incoming[static_cast<size_t>(j)] += head_col[static_cast<size_t>(h * n + j)];

    // Sink sets and concentration per percentile. Each head's total mass is n (closed rows).
    // Compat: first 4 heads' share of mass on S, in percent; principled: mean over heads and
    // rows of mass on S.
    const size_t n_pct = percentiles.size();
    std::vector<std::vector<char>> is_sink(n_pct, std::vector<char>(static_cast<size_t>(n), 0));
    for (size_t k = 0; k < n_pct; ++k) {
        SinkKl& out = results[k];
        const auto sinks = sink_set(incoming, percentiles[k]);
        for (auto j : sinks) is_sink[k][static_cast<size_t>(j)] = 1;
        out.n_sinks = static_cast<int64_t>(sinks.size());
        const int64_t n_conc = compat ? std::min(n_heads, k_compat_conc_heads) : n_heads;
        double on_s = 0;
        for (int64_t h = 0; h < n_conc; ++h)
            for (auto j : sinks) on_s += head_col[static_cast<size_t>(h * n + j)];
        out.concentration = on_s / static_cast<double>(n_conc * n) * (compat ? 100.0 : 1.0);
    }

    // Pass 2, row by row (memory O(H n), so long inputs fit): p and ln p of the row for every
    // head; the KL of every head to the head average with sinks present,
    // sum_h sum_j p (ln p - ln M); and for every percentile the KL without S: p' = p / rest on
    // the non-sink keys (uniform when rest = 0), so ln p' = ln p - ln rest; M' = mean_h p'.
    // The buffers are reused across calls: fresh allocations per layer cost more than the
    // arithmetic. Only the visible keys of each row are read, so they need no zero fill.
    thread_local std::vector<double> p_buf, log_buf;
    p_buf.resize(static_cast<size_t>(n_heads * n));    // [H, n]
    log_buf.resize(static_cast<size_t>(n_heads * n));  // [H, n]
    auto prow = [&](int64_t h) { return p_buf.data() + h * n; };
    auto lrow = [&](int64_t h) { return log_buf.data() + h * n; };
    std::vector<double> mean(static_cast<size_t>(n)), log_mean(static_cast<size_t>(n));
    std::vector<double> rest(static_cast<size_t>(n_heads));
    std::vector<double> log_mean_cut(static_cast<size_t>(n));
    std::vector<double> mean_cut(static_cast<size_t>(n));
    std::vector<double> sum_before(n_pct, 0.0), sum_after(n_pct, 0.0);
    double sum_before_all = 0;  // kl_row of every row (all_rows)
    const int64_t per_block = in.rows_per_block(n_heads);
    for (size_t r = 0; r < rows.size(); ++r) {
        const int64_t i = rows[r];
        if (i >= view.b1) {  // the next block: the visited rows within per_block of i
            size_t e = r + 1;
            while (e < rows.size() && rows[e] < i + per_block) ++e;
            view.load(i, rows[e - 1] + 1);
        }
        const int64_t vb = view.vis_begin(i), ve = view.vis_end(i);
        std::fill(mean.begin(), mean.end(), 0.0);
        for (int64_t h = 0; h < n_heads; ++h) {
            const double* raw = view.raw(h, i);
            const double sc = view.scale(h, i);
            double* p = prow(h);
            double* lp = lrow(h);
            for (int64_t j = vb; j < ve; ++j) {
                p[j] = raw[j] * sc;
                mean[static_cast<size_t>(j)] += p[j];
                lp[j] = p[j] > 0 ? std::log(p[j]) : 0.0;
            }
        }
        for (int64_t j = vb; j < ve; ++j) {
            const double m = mean[static_cast<size_t>(j)] / nh;
            log_mean[static_cast<size_t>(j)] = m > 0 ? std::log(m) : 0.0;
        }
        double kl_row = 0;
        for (int64_t h = 0; h < n_heads; ++h) {
            const double* p = prow(h);
            const double* lp = lrow(h);
            for (int64_t j = vb; j < ve; ++j)
                if (p[j] > 0) kl_row += p[j] * (lp[j] - log_mean[static_cast<size_t>(j)]);
        }
        sum_before_all += kl_row;

        const auto [kb, ke] = key_range(i);
        for (size_t k = 0; k < n_pct; ++k) {
            SinkKl& out = results[k];
            const std::vector<char>& cut = is_sink[k];
            int64_t n_free = 0;
            for (int64_t j = kb; j < ke; ++j) n_free += cut[static_cast<size_t>(j)] ? 0 : 1;
            if (n_free == 0) {
                ++out.rows_excluded;
                continue;
            }
            const double uniform = 1.0 / static_cast<double>(n_free);
            std::fill(mean_cut.begin(), mean_cut.end(), 0.0);
            for (int64_t h = 0; h < n_heads; ++h) {
                const double* p = prow(h);
                double s = 0;
                for (int64_t j = vb; j < ve; ++j)
                    if (!cut[static_cast<size_t>(j)]) s += p[j];
                rest[static_cast<size_t>(h)] = s;
                if (s > 0) {
                    const double inv = 1.0 / s;
                    for (int64_t j = vb; j < ve; ++j)
                        if (!cut[static_cast<size_t>(j)])
                            mean_cut[static_cast<size_t>(j)] += p[j] * inv;
                } else {
                    for (int64_t j = kb; j < ke; ++j)
                        if (!cut[static_cast<size_t>(j)])
                            mean_cut[static_cast<size_t>(j)] += uniform;
                }
            }
            for (int64_t j = kb; j < ke; ++j) {
                const double m = mean_cut[static_cast<size_t>(j)] / nh;
                log_mean_cut[static_cast<size_t>(j)] = m > 0 ? std::log(m) : 0.0;
            }
            double acc = 0;
            for (int64_t h = 0; h < n_heads; ++h) {
                const double* p = prow(h);
                const double* lp = lrow(h);
                const double s = rest[static_cast<size_t>(h)];
                if (s > 0) {
                    const double inv = 1.0 / s, log_s = std::log(s);
                    for (int64_t j = vb; j < ve; ++j)
                        if (!cut[static_cast<size_t>(j)] && p[j] > 0)
                            acc +=
                                p[j] * inv * (lp[j] - log_s - log_mean_cut[static_cast<size_t>(j)]);
                } else {
                    const double log_u = std::log(uniform);
                    for (int64_t j = kb; j < ke; ++j)
                        if (!cut[static_cast<size_t>(j)])
                            acc += uniform * (log_u - log_mean_cut[static_cast<size_t>(j)]);
                }
            }
            sum_before[k] += kl_row;
            sum_after[k] += acc;
            ++out.rows_used;
        }
    }
    const double before_all =
        rows.empty() ? k_nan : sum_before_all / (static_cast<double>(rows.size()) * nh);
    for (size_t k = 0; k < n_pct; ++k) {
        SinkKl& out = results[k];
        if (out.rows_used == 0) {
            out.kl_before = all_rows ? before_all : k_nan;
            out.kl_after = out.kl_reduction = k_nan;
            continue;
        }
        const double denom = static_cast<double>(out.rows_used) * nh;
        out.kl_before = all_rows ? before_all : sum_before[k] / denom;
        out.kl_after = sum_after[k] / denom;
        out.kl_reduction = out.kl_before - out.kl_after;
    }
    return results;
}

double direct_sink_mass(const AttentionInput& in, int64_t layer, int64_t sink) {
    double acc = 0;
    int64_t cnt = 0;
    const int64_t n = in.length;
    std::vector<double> buffer;
    for (int64_t h = 0; h < in.n_heads; ++h)
        in.for_each_row(layer, h, 0, n, buffer, [&](int64_t i, const double* r) {
            const int64_t kb = in.key_begin(i), ke = std::min(in.key_end(i), n);
            if (sink < kb || sink >= ke) return;
            double sum = 0;
            for (int64_t j = kb; j < ke; ++j) sum += r[j];
            if (sum <= 0) return;
            acc += r[sink] / sum;
            ++cnt;
        });
    return cnt > 0 ? acc / static_cast<double>(cnt) : k_nan;
}

}  // namespace sinkscope::metrics
