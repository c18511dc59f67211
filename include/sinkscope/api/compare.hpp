// `sinkscope compare`: joins finished run directories (analyze, dynamics, prune, fisher) into
// cross-model tables, the regime predictor (spec 7) fitted on some runs and applied frozen to the
// others, and report.html. Reads run.json and the CSV tables only: no model, no torch.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "sinkscope/core/run_files.hpp"
#include "sinkscope/metrics/regime.hpp"

namespace sinkscope::api {

struct CompareOptions {
    std::vector<std::string> runs;  // run directories as given (a dynamics run: its sub-runs)
    std::filesystem::path out = "runs/compare";
    bool overwrite = false;          // replace an earlier sinkscope result at `out`
    std::vector<std::string> fit;    // runs (as given in `runs`) the thresholds are fitted on
    std::vector<std::string> apply;  // runs the frozen thresholds are applied to (default: all)
    bool allow_mixed = false;        // compare runs of different inputs or conventions
    bool report = true;              // write report.html
    std::string command_line;        // for run.json
    // Spec 7: what the predictor predicts ("pruning": the pruning regime measured by a prune run
    // of the model; "flip_rate": the flip-rate criterion), from which statistic ("rho" or
    // "v_b"), the classical prune channel judged, and the least width of the abstain band.
    std::string regime_outcome = "pruning";
    std::string regime_statistic = "rho";
    std::string regime_channel = "js";
    double regime_min_width = 0.05;
    // Set (RunFiles::in_memory(), the Python bindings without out=): the tables and run.json go
    // there instead of into `out`, which is neither checked nor written (no report.html).
    std::optional<RunFiles> memory;
};

// One model-level observation of the regime predictor: the statistic (rho or V_b, spec 2) and
// the measured regime (Abstain: unmeasured, left out of fitting).
struct RegimePoint {
    double x;
    metrics::Regime measured;
};

struct RegimeFit {
    double lo = metrics::kRegimeLo;
    double hi = metrics::kRegimeHi;
    int64_t n_correct = 0, n_wrong = 0, n_abstain = 0;  // on the fitted points
};

// The candidate thresholds of the fitting rule and the range the statistic lives in: for rho,
// 0, 1, the spec defaults 0.2 and 0.5 and the midpoints between consecutive distinct sorted
// measured rho values of `points` in [0, 1]; for V_b (>= 0, no upper bound), 0, the midpoints
// and the largest measured value + 1 (a threshold above every point). Sorted, distinct.
std::vector<double> regime_candidates(const std::vector<RegimePoint>& points,
                                      const std::string& statistic = "rho");

// The fitting rule (spec 7 leaves the choice of lo/hi open): over every candidate pair lo <= hi,
// maximise the number of correct non-abstaining predictions on `points`; ties broken by fewer
// wrong predictions, then fewer abstentions, then the smallest lo, then the smallest hi. Then the
// band is widened to at least `min_width` about its centre (clamped to [0, 1] for rho, to >= 0
// for V_b), so that a fit cannot collapse it to a point; the scores are those of the final band.
// Unmeasured points are ignored. No usable point: the spec defaults (rho).
RegimeFit fit_regime(const std::vector<RegimePoint>& points, const std::string& statistic = "rho",
                     double min_width = 0);

// One line describing the fitting rule (run.json, regime.csv, report).
extern const char* const kRegimeFitRule;

// Runs the command: reads every run (InputError naming the path on a missing or damaged run),
// checks that inputs and conventions agree (UsageError naming the first difference, unless
// allow_mixed), then writes models.csv, compare.csv, frames.csv, regime.csv,
// regime_confusion.csv, run.json and report.html into `out` (all or nothing).
void run_compare_command(const CompareOptions& options, std::ostream& log);

}  // namespace sinkscope::api
