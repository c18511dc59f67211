// Sink geometry (sink_geometry.hpp): key norms and query-key cosines around the sink position.
#include "sinkscope/metrics/sink_geometry.hpp"

#include <cmath>
#include <limits>

namespace sinkscope::metrics {

namespace {
double norm(const double* x, int64_t d) {
    double acc = 0;
    for (int64_t i = 0; i < d; ++i) acc += x[i] * x[i];
    return std::sqrt(acc);
}
double dot(const double* x, const double* y, int64_t d) {
    double acc = 0;
    for (int64_t i = 0; i < d; ++i) acc += x[i] * y[i];
    return acc;
}
double mean(double sum, int64_t n) {
    return n > 0 ? sum / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
}
}  // namespace

std::array<double, kSinkGeometryCount> sink_geometry(const double* q, const double* k, int64_t d,
                                                     const AttentionInput& shape, int64_t s) {
    std::array<double, kSinkGeometryCount> out;
    out.fill(std::numeric_limits<double>::quiet_NaN());
    const int64_t n = shape.length;
    if (s < 0 || s >= n) return out;
    std::vector<double> qn(static_cast<size_t>(n)), kn(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        qn[static_cast<size_t>(i)] = norm(q + i * d, d);
        kn[static_cast<size_t>(i)] = norm(k + i * d, d);
    }
    double others = 0;
    for (int64_t j = 0; j < n; ++j)
        if (j != s) others += kn[static_cast<size_t>(j)];
    out[kKeyNormSink] = kn[static_cast<size_t>(s)];
    out[kKeyNormOthers] = mean(others, n - 1);
    out[kKeyNormRatio] = out[kKeyNormSink] / out[kKeyNormOthers];
    // Cosines in a fixed order (queries, then keys ascending): the same sums on every thread
    // count and CPU.
    double c_sink = 0, c_other = 0;
    int64_t n_sink = 0, n_other = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double qi = qn[static_cast<size_t>(i)];
        if (qi == 0) continue;
        for (int64_t j = shape.key_begin(i); j < shape.key_end(i); ++j) {
            const double kj = kn[static_cast<size_t>(j)];
            if (j == i || kj == 0) continue;
            const double c = dot(q + i * d, k + j * d, d) / (qi * kj);
            if (j == s)
                c_sink += c, ++n_sink;
            else
                c_other += c, ++n_other;
        }
    }
    out[kQkCosineSink] = mean(c_sink, n_sink);
    out[kQkCosineOthers] = mean(c_other, n_other);
    out[kQkCosineExcess] = out[kQkCosineSink] - out[kQkCosineOthers];
    return out;
}

}  // namespace sinkscope::metrics
