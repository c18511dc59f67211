// Regime predictor (spec 7, 10.g): from the sink dispersion (rho or V_b), predict whether
// classical attention metrics are safe to prune by, and validate the prediction against the
// measured pruning outcome (or, as a second named criterion, the measured flip rate).
#pragma once

#include <string>
#include <vector>

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
// The same rule on a statistic of any range (V_b): thresholds need only be finite, lo <= hi.
Regime predict_regime_of(double x, double lo, double hi);

// Spec 7: classical-unsafe iff flip_rate >= 0.15; abstain when the rate is not finite (no
// compared triples).
Regime measured_regime(double flip_rate);

// Prediction against measurement: "correct", "wrong", "abstained" (prediction abstains) or
// "unmeasured" (no finite flip rate).
std::string regime_agreement(Regime predicted, double flip_rate);
// The same against a measured regime (Abstain: unmeasured).
std::string regime_agreement(Regime predicted, Regime measured);

// One evaluated point of a prune run (prune.csv): the method ("none", a channel, "random"), the
// sparsity and the measure's value; and the random baseline's spread at one sparsity
// (prune_random.csv).
struct PrunePoint {
    std::string method;
    double sparsity = 0;
    double value = 0;
};
struct RandomSpread {
    double sparsity = 0;
    double min = 0, max = 0;
};

// Whether a pruned model's measure `value` is beyond the random spread on the side where the
// measure is worse: above its max when higher is worse (perplexity), below its min otherwise
// (top-1 agreement).
bool beyond_random_spread(double value, const RandomSpread& spread, bool higher_is_worse);

// The pruning regime a prune run measured (spec 7): classical-unsafe when at some sparsity the
// classical channel's measure is beyond the random baseline's spread on the bad side (above its
// max when higher is worse, as perplexity; below its min otherwise, as top-1 agreement) while
// dA_perp's is within it (not beyond on the bad side); classical-safe when both channels were
// evaluated at some sparsity with a random spread and no sparsity is of that kind; Abstain
// (unmeasured) when no sparsity has the classical channel, dA_perp and a random spread.
// `reason` says which sparsity decided it and with which values.
struct PruningRegime {
    Regime measured = Regime::Abstain;
    double sparsity = 0;  // the first unsafe sparsity; the largest compared one when safe
    std::string reason;
};
PruningRegime measured_pruning_regime(const std::vector<PrunePoint>& points,
                                      const std::vector<RandomSpread>& random,
                                      const std::string& classical_channel, bool higher_is_worse);

}  // namespace sinkscope::metrics
