// Spec/METRICS.md section 6: the Shapley split of an entropy change (entropy_split.hpp).
#include "sinkscope/metrics/entropy_split.hpp"

#include <cmath>
#include <limits>

namespace sinkscope::metrics {

namespace {
double xlogx(double x) {
    return x > 0 ? x * std::log(x) : 0.0;
}
}  // namespace

void EntropySplit::add(const EntropyParts& a, const EntropyParts& b) {
    const double hb0 = -xlogx(a.sink_mass) - xlogx(a.content_mass);
    const double hb1 = -xlogx(b.sink_mass) - xlogx(b.content_mass);
    sink_term += (hb1 - hb0) +
                 (b.content_mass - a.content_mass) * (a.content_entropy + b.content_entropy) / 2;
    content_term += (a.content_mass + b.content_mass) / 2 * (b.content_entropy - a.content_entropy);
    delta_entropy += b.entropy - a.entropy;
    ++n_rows;
}

double EntropySplit::sink_share() const {
    const double total = sink_term + content_term;
    return total != 0 ? sink_term / total : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace sinkscope::metrics
