// Row quantities (spec section 1, resolved details 10.a-10.c): closure, CLR, sink balance,
// entropies and the row-level distances.
#include "sinkscope/metrics/row.hpp"

#include <cmath>
#include <cstdlib>

#include "sinkscope/core/error.hpp"

namespace sinkscope::metrics {

namespace {
double xlogx(double x) {
    return x > 0 ? x * std::log(x) : 0.0;
}
}  // namespace

ZeroPolicy parse_zero_policy(const std::string& text) {
    ZeroPolicy z;
    if (text == "error") return z;
    const std::string prefix = "replace:";
    if (text.rfind(prefix, 0) == 0) {
        std::string num = text.substr(prefix.size());
        char* end = nullptr;
        double d = std::strtod(num.c_str(), &end);
        if (!num.empty() && end && *end == '\0' && d > 0 && d < 1) {
            z.kind = ZeroPolicy::Kind::Replace;
            z.delta = d;
            return z;
        }
    }
    throw UsageError("zeros must be 'error' or 'replace:DELTA' with 0 < DELTA < 1, got '" + text +
                     "'");
}

std::string to_string(const ZeroPolicy& z) {
    if (z.kind == ZeroPolicy::Kind::Error) return "error";
    char buf[64];
    std::snprintf(buf, sizeof buf, "replace:%.17g", z.delta);
    return buf;
}

double binary_entropy(double s) {
    return -xlogx(s) - xlogx(1.0 - s);
}

// Pass 1 closure (10.a), pass 2 sink/content split (spec 1), pass 3 entropies, pass 4
// log-ratios after the zero policy (10.c: only CLR and b see the replacement).
int64_t compose_row_probabilities(const double* a, int64_t n_parts, int64_t sink,
                                  const ZeroPolicy& zeros, RowOut& out, double* scratch) {
    const int64_t d = n_parts;
    SS_CHECK(d >= 2 && sink >= 0 && sink < d, "row with ", d, " parts and sink ", sink);
    double total = 0;
    for (int64_t j = 0; j < d; ++j) total += a[j];
    SS_CHECK(total > 0, "row with non-positive sum ", total);
    int64_t n_zeros = 0, first_zero = -1;
    double content = 0;
    for (int64_t j = 0; j < d; ++j) {
        out.p[j] = a[j] / total;
        if (out.p[j] == 0) {
            if (first_zero < 0) first_zero = j;
            ++n_zeros;
        }
        if (j != sink) content += out.p[j];
    }
    if (n_zeros > 0 && zeros.kind == ZeroPolicy::Kind::Error) return first_zero;

    // Multiplicative replacement on the closed row (spec 1); pi's log-ratios come from the same
    // replaced row, so dA^2 = dA_perp^2 + (b - b')^2 holds exactly under the policy too.
    double scale = 1.0;
    if (n_zeros > 0) {
        scale = 1.0 - double(n_zeros) * zeros.delta;
        if (!(scale > 0))
            throw UsageError("zeros replace:" + std::to_string(zeros.delta) +
                             " is too large for a row with " + std::to_string(n_zeros) +
                             " zero parts");
    }
    double sum_log = 0;
    for (int64_t j = 0; j < d; ++j) {
        scratch[j] = out.p[j] == 0 ? std::log(zeros.delta) : std::log(out.p[j] * scale);
        sum_log += scratch[j];
    }

    const double s = out.p[sink];
    out.sink_mass = s;
    out.content_mass = content;
    double h = 0, h_pi = 0;
    for (int64_t j = 0, c = 0; j < d; ++j) {
        // Without zeros, scale = 1 and scratch[j] = ln(p_j * 1) is ln p_j: the same bits as
        // xlogx's logarithm, one logarithm a part fewer.
        const double pj = out.p[j];
        h -= pj > 0 ? pj * (n_zeros == 0 ? scratch[j] : std::log(pj)) : 0.0;
        if (j == sink) continue;
        out.pi[c] = content > 0 ? out.p[j] / content : 1.0 / double(d - 1);
        h_pi -= xlogx(out.pi[c]);
        ++c;
    }
    out.entropy = h;
    out.content_entropy = h_pi;
    out.binary_sink_entropy = -xlogx(s) - xlogx(content);
    const double mean_all = sum_log / double(d);
    const double mean_content = (sum_log - scratch[sink]) / double(d - 1);
    for (int64_t j = 0, c = 0; j < d; ++j) {
        out.clr[j] = scratch[j] - mean_all;
        if (j != sink) out.clr_content[c++] = scratch[j] - mean_content;
    }
    out.sink_balance = std::sqrt(double(d) / double(d - 1)) * out.clr[sink];
    return -1;
}

// Scores: fp64 log-softmax over the visible keys (spec 10.b), split at the sink: with
// delta = lse(content scores) - z_s, ln s = -softplus(delta) and ln(1 - s) = -softplus(-delta),
// so a sink mass of 1 - 1e-12 keeps full precision in s, 1 - s and both logarithms.
void compose_row_scores(const double* z, int64_t n_parts, int64_t sink, RowOut& out) {
    const int64_t d = n_parts;
    SS_CHECK(d >= 2 && sink >= 0 && sink < d, "row with ", d, " parts and sink ", sink);
    double zc_max = -INFINITY, sum_z = 0;
    for (int64_t j = 0; j < d; ++j) {
        if (j != sink) zc_max = std::max(zc_max, z[j]);
        sum_z += z[j];
    }
    double sum_content = 0;
    for (int64_t j = 0; j < d; ++j)
        if (j != sink) sum_content += std::exp(z[j] - zc_max);
    const double lse_content = zc_max + std::log(sum_content);
    const double delta = lse_content - z[sink];
    auto softplus = [](double v) { return std::max(v, 0.0) + std::log1p(std::exp(-std::abs(v))); };
    const double log_s = -softplus(delta);
    const double log_content = -softplus(-delta);  // ln(1 - s)
    const double mean_all = sum_z / double(d);
    const double mean_content = (sum_z - z[sink]) / double(d - 1);
    out.sink_mass = std::exp(log_s);
    out.content_mass = std::exp(log_content);
    double h = -out.sink_mass * log_s, h_pi = 0;
    for (int64_t j = 0, c = 0; j < d; ++j) {
        out.clr[j] = z[j] - mean_all;
        if (j == sink) {
            out.p[j] = out.sink_mass;
            continue;
        }
        const double log_pi = z[j] - lse_content;
        const double log_p = log_pi + log_content;
        out.p[j] = std::exp(log_p);
        h -= out.p[j] * log_p;
        out.pi[c] = std::exp(log_pi);
        h_pi -= out.pi[c] * log_pi;
        out.clr_content[c] = z[j] - mean_content;
        ++c;
    }
    out.entropy = h;
    out.content_entropy = h_pi;
    out.binary_sink_entropy = -out.sink_mass * log_s - out.content_mass * log_content;
    out.sink_balance = std::sqrt(double(d) / double(d - 1)) * out.clr[sink];
}

namespace {
RowQuantities make_row(int64_t d, int64_t sink) {
    if (d < 2) throw UsageError("a row needs at least 2 parts, got " + std::to_string(d));
    if (sink < 0 || sink >= d)
        throw UsageError("sink index " + std::to_string(sink) + " outside a row of " +
                         std::to_string(d) + " parts");
    RowQuantities r;
    r.n_parts = d;
    r.sink = sink;
    r.p.resize(d);
    r.pi.resize(d - 1);
    r.clr.resize(d);
    r.clr_content.resize(d - 1);
    return r;
}
RowOut out_of(RowQuantities& r) {
    return RowOut{r.p.data(), r.pi.data(), r.clr.data(), r.clr_content.data(), 0, 0, 0, 0, 0, 0};
}
void copy_scalars(const RowOut& o, RowQuantities& r) {
    r.sink_mass = o.sink_mass;
    r.content_mass = o.content_mass;
    r.sink_balance = o.sink_balance;
    r.entropy = o.entropy;
    r.binary_sink_entropy = o.binary_sink_entropy;
    r.content_entropy = o.content_entropy;
}
}  // namespace

RowQuantities row_from_probabilities(const double* a, int64_t n_parts, int64_t sink,
                                     const ZeroPolicy& zeros, const std::string& origin) {
    RowQuantities r = make_row(n_parts, sink);
    for (int64_t j = 0; j < n_parts; ++j)
        if (!(a[j] >= 0) || !std::isfinite(a[j]))
            throw InputError(origin, "part " + std::to_string(j) + " is negative or not finite");
    std::vector<double> scratch(n_parts);
    RowOut o = out_of(r);
    int64_t zero = compose_row_probabilities(a, n_parts, sink, zeros, o, scratch.data());
    if (zero >= 0)
        throw InputError(origin, "exact zero at part " + std::to_string(zero) +
                                     ": log-ratio metrics need the zero policy replace:DELTA "
                                     "(zeros option; docs/metrics.md)");
    copy_scalars(o, r);
    return r;
}

RowQuantities row_from_scores(const double* z, int64_t n_parts, int64_t sink) {
    RowQuantities r = make_row(n_parts, sink);
    for (int64_t j = 0; j < n_parts; ++j)
        if (!std::isfinite(z[j]))
            throw InputError("scores", "part " + std::to_string(j) + " is not finite");
    RowOut o = out_of(r);
    compose_row_scores(z, n_parts, sink, o);
    copy_scalars(o, r);
    return r;
}

namespace {
double l2(const std::vector<double>& x, const std::vector<double>& y) {
    SS_CHECK(x.size() == y.size(), "rows of different length ", x.size(), " and ", y.size());
    double acc = 0;
    for (size_t j = 0; j < x.size(); ++j) acc += (x[j] - y[j]) * (x[j] - y[j]);
    return std::sqrt(acc);
}
}  // namespace

double aitchison_distance(const RowQuantities& p, const RowQuantities& q) {
    return l2(p.clr, q.clr);
}
double content_distance(const RowQuantities& p, const RowQuantities& q) {
    return l2(p.clr_content, q.clr_content);
}
double sink_term(const RowQuantities& p, const RowQuantities& q) {
    return std::abs(p.sink_balance - q.sink_balance);
}

const char* to_string(Convention c) {
    return c == Convention::Keep ? "keep" : "drop";
}
const char* to_string(ClassicalMetric m) {
    switch (m) {
        case ClassicalMetric::Cosine:
            return "cosine";
        case ClassicalMetric::JensenShannon:
            return "js";
        case ClassicalMetric::Euclidean:
            return "euclidean";
    }
    return "?";
}

double cosine_distance(const double* x, const double* y, int64_t n) {
    double xy = 0, xx = 0, yy = 0;
    for (int64_t j = 0; j < n; ++j) {
        xy += x[j] * y[j];
        xx += x[j] * x[j];
        yy += y[j] * y[j];
    }
    return 1.0 - xy / std::sqrt(xx * yy);
}

double js_divergence(const double* x, const double* y, int64_t n) {
    double acc = 0;
    for (int64_t j = 0; j < n; ++j) {
        const double m = 0.5 * (x[j] + y[j]);
        if (x[j] > 0) acc += x[j] * std::log(x[j] / m);
        if (y[j] > 0) acc += y[j] * std::log(y[j] / m);
    }
    return std::max(0.0, 0.5 * acc);
}

double euclidean_distance(const double* x, const double* y, int64_t n) {
    double acc = 0;
    for (int64_t j = 0; j < n; ++j) acc += (x[j] - y[j]) * (x[j] - y[j]);
    return std::sqrt(acc);
}

double classical_distance(ClassicalMetric metric, Convention convention, const RowQuantities& p,
                          const RowQuantities& q) {
    const auto& x = convention == Convention::Keep ? p.p : p.pi;
    const auto& y = convention == Convention::Keep ? q.p : q.pi;
    SS_CHECK(x.size() == y.size(), "rows of different length ", x.size(), " and ", y.size());
    const int64_t n = static_cast<int64_t>(x.size());
    switch (metric) {
        case ClassicalMetric::Cosine:
            return cosine_distance(x.data(), y.data(), n);
        case ClassicalMetric::JensenShannon:
            return js_divergence(x.data(), y.data(), n);
        case ClassicalMetric::Euclidean:
            return euclidean_distance(x.data(), y.data(), n);
    }
    return 0;
}

}  // namespace sinkscope::metrics
