// Regime predictor (spec 7, 10.g): from the sink share rho, predict whether classical attention
// metrics are safe to use, and validate the prediction against the measured flip rate.
#pragma once

#include <string>

namespace sinkscope::metrics {

enum class Regime { ClassicalSafe, ClassicalUnsafe, Abstain };

// "classical-safe", "classical-unsafe", "abstain".
std::string regime_name(Regime r);

// Default thresholds of spec 7.
inline constexpr double kRegimeLo = 0.2;
inline constexpr double kRegimeHi = 0.5;
// Spec 7: a model is measured classical-unsafe when its pooled flip rate is >= this.
inline constexpr double kUnsafeFlipRate = 0.15;

// Throws UsageError unless 0 <= lo <= hi <= 1.
void check_regime_thresholds(double lo, double hi);

// Spec 7: classical-unsafe if rho >= hi, classical-safe if rho <= lo, else abstain. A
// non-finite rho (no sink or content variation at all) gives abstain.
Regime predict_regime(double rho, double lo = kRegimeLo, double hi = kRegimeHi);

// Spec 7: classical-unsafe iff flip_rate >= 0.15; abstain when the rate is not finite (no
// compared triples).
Regime measured_regime(double flip_rate);

// Prediction against measurement: "correct", "wrong", "abstained" (prediction abstains) or
// "unmeasured" (no finite flip rate).
std::string regime_agreement(Regime predicted, double flip_rate);

}  // namespace sinkscope::metrics
