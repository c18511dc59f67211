// Regime predictor (spec 7, 10.g).
#include "sinkscope/metrics/regime.hpp"

#include <cmath>
#include <set>

#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"

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
    return predict_regime_of(rho, lo, hi);
}

Regime predict_regime_of(double x, double lo, double hi) {
    if (!(std::isfinite(lo) && std::isfinite(hi) && lo <= hi))
        throw UsageError(detail::concat(
            "regime thresholds need lo <= hi, both finite, got lo = ", lo, ", hi = ", hi));
    if (!std::isfinite(x)) return Regime::Abstain;
    if (x >= hi) return Regime::ClassicalUnsafe;
    if (x <= lo) return Regime::ClassicalSafe;
    return Regime::Abstain;
}

Regime measured_regime(double flip_rate) {
    if (!std::isfinite(flip_rate)) return Regime::Abstain;
    return flip_rate >= kUnsafeFlipRate ? Regime::ClassicalUnsafe : Regime::ClassicalSafe;
}

std::string regime_agreement(Regime predicted, double flip_rate) {
    if (!std::isfinite(flip_rate)) return "unmeasured";
    return regime_agreement(predicted, measured_regime(flip_rate));
}

std::string regime_agreement(Regime predicted, Regime measured) {
    if (measured == Regime::Abstain) return "unmeasured";
    if (predicted == Regime::Abstain) return "abstained";
    return predicted == measured ? "correct" : "wrong";
}

PruningRegime measured_pruning_regime(const std::vector<PrunePoint>& points,
                                      const std::vector<RandomSpread>& random,
                                      const std::string& classical_channel, bool higher_is_worse) {
    auto value_of = [&](const std::string& method, double sparsity, double& v) {
        for (const PrunePoint& p : points)
            if (p.method == method && p.sparsity == sparsity && std::isfinite(p.value)) {
                v = p.value;
                return true;
            }
        return false;
    };
    // Beyond the random spread on the side where the measure is worse.
    auto beyond = [&](double v, const RandomSpread& r) {
        return higher_is_worse ? v > r.max : v < r.min;
    };
    std::set<double> sparsities;
    for (const RandomSpread& r : random)
        if (std::isfinite(r.min) && std::isfinite(r.max)) sparsities.insert(r.sparsity);
    PruningRegime out;
    for (double s : sparsities) {  // ascending
        const RandomSpread* r = nullptr;
        for (const RandomSpread& x : random)
            if (x.sparsity == s) r = &x;
        double c = 0, perp = 0;
        if (!value_of(classical_channel, s, c) || !value_of("dA_perp", s, perp)) continue;
        const std::string spread = "random " + format_number(r->min) + "-" + format_number(r->max);
        const std::string at = "at sparsity " + format_number(s) + ": " + classical_channel + " " +
                               format_number(c) + ", dA_perp " + format_number(perp) + ", " +
                               spread;
        if (beyond(c, *r) && !beyond(perp, *r))
            return {Regime::ClassicalUnsafe, s,
                    at + " (" + classical_channel + " beyond the random spread, dA_perp within)"};
        out = {Regime::ClassicalSafe, s, at};
    }
    if (out.measured == Regime::ClassicalSafe)
        out.reason = "no sparsity with " + classical_channel +
                     " beyond the random spread and dA_perp within; last " + out.reason;
    else
        out.reason = "no sparsity with " + classical_channel +
                     ", dA_perp and a random baseline (prune --channels " + classical_channel +
                     ",dA_perp --random-seeds N)";
    return out;
}

}  // namespace sinkscope::metrics
