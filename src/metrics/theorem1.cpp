// Theorem 1 on demand (theorem1.hpp): the reversing set of each spec 1 row metric over the grid
// of the triple family, counted point by point, and the closed form for dA.
#include "sinkscope/metrics/theorem1.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/reversal.hpp"

namespace sinkscope::metrics {

namespace {
// grid^3 points fit int64 by far, and a grid this fine already takes hours.
constexpr int64_t kMaxGrid = 2048;
constexpr int64_t kMaxParts = 1 << 16;
}  // namespace

void check_theorem1_options(const Theorem1Options& o) {
    if (o.n_parts < 3 || o.n_parts > kMaxParts)
        throw UsageError("--parts must be in 3.." + std::to_string(kMaxParts) + " (a sink and " +
                         "at least two content parts), got " + std::to_string(o.n_parts));
    if (o.grid < 1 || o.grid > kMaxGrid)
        throw UsageError("--grid must be in 1.." + std::to_string(kMaxGrid) + ", got " +
                         std::to_string(o.grid));
    if (!(o.t_max > 0) || !std::isfinite(o.t_max))
        throw UsageError("--t-max must be a finite number > 0, got " + std::to_string(o.t_max));
}

const std::vector<Theorem1Metric>& theorem1_metrics() {
    using C = ClassicalMetric;
    using K = Theorem1Kind;
    static const std::vector<Theorem1Metric> kMetrics = [] {
        std::vector<Theorem1Metric> m;
        for (Convention conv : {Convention::Keep, Convention::Drop})
            for (C c : {C::Cosine, C::JensenShannon, C::Euclidean})
                m.push_back({to_string(c), conv, K::Classical, c});
        m.push_back({"dA", Convention::Keep, K::Aitchison});
        m.push_back({"dA_perp", Convention::Drop, K::Content});
        m.push_back({"sink_term", Convention::Keep, K::SinkTerm});
        return m;
    }();
    return kMetrics;
}

// Spec 1: every distance comes from row.hpp, the functions the head analyses use.
double theorem1_distance(const Theorem1Metric& metric, const RowQuantities& p,
                         const RowQuantities& q) {
    switch (metric.kind) {
        case Theorem1Kind::Classical:
            return classical_distance(metric.classical, metric.convention, p, q);
        case Theorem1Kind::Aitchison:
            return aitchison_distance(p, q);
        case Theorem1Kind::Content:
            return content_distance(p, q);
        case Theorem1Kind::SinkTerm:
            return sink_term(p, q);
    }
    throw InternalError("theorem1: unknown metric kind");
}

double theorem1_midpoint(int64_t i, int64_t n, double hi) {
    return (double(i) + 0.5) * hi / double(n);
}

std::vector<double> theorem1_content(int64_t n_parts, double t, bool mirror) {
    SS_CHECK(n_parts >= 3, "theorem1 family with ", n_parts, " parts");
    const int64_t m = n_parts - 2;  // the content parts are j = 0..m
    std::vector<double> pi(m + 1);
    double total = 0;
    for (int64_t j = 0; j <= m; ++j) total += pi[j] = std::exp(t * double(j) / double(m));
    for (double& v : pi) v /= total;
    if (mirror) std::reverse(pi.begin(), pi.end());
    return pi;
}

RowQuantities theorem1_row(int64_t n_parts, double s, double t, bool mirror) {
    const std::vector<double> pi = theorem1_content(n_parts, t, mirror);
    std::vector<double> p(n_parts);  // [D], sink at 0
    p[0] = s;
    for (int64_t j = 1; j < n_parts; ++j) p[j] = (1.0 - s) * pi[j - 1];
    return row_from_probabilities(p.data(), n_parts, 0, ZeroPolicy{}, "theorem1 row");
}

Theorem1Triple theorem1_triple(int64_t n_parts, double s_a, double s_b, double t) {
    return {theorem1_row(n_parts, s_a, t, false), theorem1_row(n_parts, s_b, t, false),
            theorem1_row(n_parts, s_a, t, true)};
}

namespace {
// Spec 3: verdict of each metric on (a; b, c) into out[metric].
void verdicts_into(const RowQuantities& a, const RowQuantities& b, const RowQuantities& c,
                   int* out) {
    const auto& metrics = theorem1_metrics();
    for (size_t k = 0; k < metrics.size(); ++k)
        out[k] = triple_verdict(theorem1_distance(metrics[k], a, b),
                                theorem1_distance(metrics[k], a, c));
}
}  // namespace

std::vector<int> theorem1_verdicts(const Theorem1Triple& triple) {
    std::vector<int> v(theorem1_metrics().size());
    verdicts_into(triple.a, triple.b, triple.c, v.data());
    return v;
}

double theorem1_closed_form_gap(int64_t n_parts, double s_a, double s_b, double t) {
    const double d = double(n_parts);
    const auto logit = [](double s) { return std::log(s) - std::log1p(-s); };
    const double sink_gap = std::sqrt((d - 1) / d) * std::abs(logit(s_a) - logit(s_b));
    const double content_gap = t * std::sqrt(d * (d - 1) / (3 * (d - 2)));
    return sink_gap - content_gap;
}

Theorem1Result run_theorem1(const Theorem1Options& options) {
    check_theorem1_options(options);
    const int64_t d = options.n_parts, n = options.grid;
    const auto& metrics = theorem1_metrics();
    const size_t n_metrics = metrics.size();
    std::vector<int64_t> reversed(n_metrics, 0), tied(n_metrics, 0);
    std::vector<int> verdict(n_metrics);
    Theorem1Result result;
    result.options = options;
    result.closed_form_min_margin = std::numeric_limits<double>::infinity();
    const double kperp = std::sqrt(double(d) * double(d - 1) / (3.0 * double(d - 2)));

    // One t at a time keeps the rows O(grid D) in memory.
    std::vector<RowQuantities> plain(n), mirrored(n);  // [grid] rows at s_i, pi(t) / pi_rev(t)
    for (int64_t it = 0; it < n; ++it) {
        const double t = theorem1_midpoint(it, n, options.t_max);
        // Pass 1: the rows of this t.
        for (int64_t is = 0; is < n; ++is) {
            const double s = theorem1_midpoint(is, n, 1.0);
            plain[is] = theorem1_row(d, s, t, false);
            mirrored[is] = theorem1_row(d, s, t, true);
        }
        for (int64_t ia = 0; ia < n; ++ia) {
            const double s_a = theorem1_midpoint(ia, n, 1.0);
            for (int64_t ib = 0; ib < n; ++ib) {
                // Pass 2: the verdicts on (a; b, c) = (plain[ia]; plain[ib], mirrored[ia]).
                verdicts_into(plain[ia], plain[ib], mirrored[ia], verdict.data());
                for (size_t k = 0; k < n_metrics; ++k) {
                    reversed[k] += verdict[k] > 0;
                    tied[k] += verdict[k] == 0;
                }
                // Pass 3: the closed form for dA (theorem1.hpp).
                const double s_b = theorem1_midpoint(ib, n, 1.0);
                const double gap = theorem1_closed_form_gap(d, s_a, s_b, t);
                result.closed_form_reversed += gap > 0;
                // gap + kperp t = |b(a) - b(b)|, kperp t = dA_perp(pi, pi_rev).
                const double scale = std::max(gap + kperp * t, kperp * t);
                result.closed_form_min_margin =
                    std::min(result.closed_form_min_margin, std::abs(gap) / scale);
            }
        }
    }
    const int64_t n_points = n * n * n;
    for (size_t k = 0; k < n_metrics; ++k) {
        Theorem1Row row;
        row.metric = metrics[k].name;
        row.convention = to_string(metrics[k].convention);
        row.n_points = n_points;
        row.n_reversed = reversed[k];
        row.n_tied = tied[k];
        row.reversal_measure = double(reversed[k]) / double(n_points);
        row.tie_measure = double(tied[k]) / double(n_points);
        result.rows.push_back(std::move(row));
    }
    result.closed_form_measure = double(result.closed_form_reversed) / double(n_points);
    return result;
}

}  // namespace sinkscope::metrics
