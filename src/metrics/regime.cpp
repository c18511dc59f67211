// Regime predictor (spec 7, 10.g).
#include "sinkscope/metrics/regime.hpp"

#include <algorithm>
#include <cmath>

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
    return regime_agreement(predicted, measured_regime(flip_rate));  // non-finite: unmeasured
}

std::string regime_agreement(Regime predicted, Regime measured) {
    if (measured == Regime::Abstain) return "unmeasured";
    if (predicted == Regime::Abstain) return "abstained";
    return predicted == measured ? "correct" : "wrong";
}

bool beyond_random_spread(double value, const RandomSpread& spread, bool higher_is_worse) {
    return higher_is_worse ? value > spread.max : value < spread.min;
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
    std::vector<RandomSpread> spreads;  // with a spread, by ascending sparsity
    for (const RandomSpread& r : random)
        if (std::isfinite(r.min) && std::isfinite(r.max)) spreads.push_back(r);
    std::stable_sort(
        spreads.begin(), spreads.end(),
        [](const RandomSpread& a, const RandomSpread& b) { return a.sparsity < b.sparsity; });
    PruningRegime out;
    for (size_t i = 0; i < spreads.size(); ++i) {
        // one spread per sparsity, the last one given
        if (i + 1 < spreads.size() && spreads[i + 1].sparsity == spreads[i].sparsity) continue;
        const RandomSpread* r = &spreads[i];
        const double s = r->sparsity;
        double c = 0, perp = 0;
        if (!value_of(classical_channel, s, c) || !value_of("dA_perp", s, perp)) continue;
        const std::string spread = "random " + format_number(r->min) + "-" + format_number(r->max);
        const std::string at = "at sparsity " + format_number(s) + ": " + classical_channel + " " +
                               format_number(c) + ", dA_perp " + format_number(perp) + ", " +
                               spread;
        if (beyond_random_spread(c, *r, higher_is_worse) &&
            !beyond_random_spread(perp, *r, higher_is_worse))
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
