// Regime predictor (spec 7, 10.g).
#include "sinkscope/metrics/regime.hpp"

#include <cmath>

#include "sinkscope/core/error.hpp"

namespace sinkscope::metrics {

std::string regime_name(Regime r) {
    switch (r) {
        case Regime::ClassicalSafe:
            return "classical-safe";
        case Regime::ClassicalUnsafe:
            return "classical-unsafe";
        case Regime::Abstain:
            return "abstain";
    }
    throw InternalError("unknown regime");
}

void check_regime_thresholds(double lo, double hi) {
    if (!(std::isfinite(lo) && std::isfinite(hi) && 0.0 <= lo && lo <= hi && hi <= 1.0))
        throw UsageError(detail::concat("regime thresholds need 0 <= lo <= hi <= 1, got lo = ", lo,
                                        ", hi = ", hi));
}

Regime predict_regime(double rho, double lo, double hi) {
    check_regime_thresholds(lo, hi);
    if (!std::isfinite(rho)) return Regime::Abstain;
    if (rho >= hi) return Regime::ClassicalUnsafe;
    if (rho <= lo) return Regime::ClassicalSafe;
    return Regime::Abstain;
}

Regime measured_regime(double flip_rate) {
    if (!std::isfinite(flip_rate)) return Regime::Abstain;
    return flip_rate >= kUnsafeFlipRate ? Regime::ClassicalUnsafe : Regime::ClassicalSafe;
}

std::string regime_agreement(Regime predicted, double flip_rate) {
    if (!std::isfinite(flip_rate)) return "unmeasured";
    if (predicted == Regime::Abstain) return "abstained";
    return predicted == measured_regime(flip_rate) ? "correct" : "wrong";
}

}  // namespace sinkscope::metrics
