// The `sinkscope compare` command: finished run directories -> cross-model tables, the regime
// predictor (spec 7) fitted on some runs and frozen on the others, run.json and report.html.
// Reads run.json and CSV tables only (no torch): the numbers are the runs' own.
#include "sinkscope/api/compare.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <tuple>

#include "sinkscope/analysis/options.hpp"
#include "sinkscope/analysis/registry.hpp"
#include "sinkscope/analysis/run_values.hpp"
#include "sinkscope/analysis/tables.hpp"
#include "sinkscope/api/run_outputs.hpp"
#include "sinkscope/core/error.hpp"
#include "sinkscope/core/format.hpp"
#include "sinkscope/core/output_dir.hpp"
#include "sinkscope/io/json.hpp"
#include "sinkscope/io/run_record.hpp"
#include "sinkscope/io/table.hpp"
#include "sinkscope/metrics/pruning.hpp"
#include "sinkscope/report/report.hpp"

namespace sinkscope::api {

namespace fs = std::filesystem;
using nlohmann::json;
namespace tables = analysis::tables;

const char* const kRegimeFitRule =
    "candidates: for rho 0, 1, 0.2, 0.5 (for V_b 0 and the largest fit value + 1) and the "
    "midpoints between consecutive distinct sorted values of the measured fit runs; over every "
    "pair lo <= hi maximise the correct non-abstaining predictions, then fewer wrong, then fewer "
    "abstentions, then the smallest lo, then the smallest hi; then the band is widened about its "
    "centre to at least --regime-min-width; fit runs without a measured outcome are left out";

std::vector<double> regime_candidates(const std::vector<RegimePoint>& points,
                                      const std::string& statistic) {
    const bool rho = statistic == "rho";
    std::vector<double> x;
    for (const auto& p : points)
        if (p.measured != metrics::Regime::Abstain && std::isfinite(p.x) && p.x >= 0 &&
            (!rho || p.x <= 1))
            x.push_back(p.x);
    std::sort(x.begin(), x.end());
    x.erase(std::unique(x.begin(), x.end()), x.end());
    std::vector<double> c =
        rho ? std::vector<double>{0.0, 1.0, metrics::kRegimeLo, metrics::kRegimeHi}
            : std::vector<double>{0.0, (x.empty() ? 0.0 : x.back()) + 1.0};
    for (size_t i = 1; i < x.size(); ++i) c.push_back(0.5 * (x[i - 1] + x[i]));
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    return c;
}

RegimeFit fit_regime(const std::vector<RegimePoint>& points, const std::string& statistic,
                     double min_width) {
    std::vector<RegimePoint> used;
    for (const auto& p : points)
        if (p.measured != metrics::Regime::Abstain) used.push_back(p);
    auto score = [&](double lo, double hi) {
        RegimeFit f{lo, hi, 0, 0, 0};
        for (const auto& p : used) {
            const metrics::Regime r = metrics::predict_regime_of(p.x, lo, hi);
            if (r == metrics::Regime::Abstain)
                ++f.n_abstain;
            else if (r == p.measured)
                ++f.n_correct;
            else
                ++f.n_wrong;
        }
        return f;
    };
    if (used.empty()) return score(metrics::kRegimeLo, metrics::kRegimeHi);
    const std::vector<double> c = regime_candidates(used, statistic);
    RegimeFit best;
    bool have = false;
    // Candidates ascend, so the first pair reaching a score has the smallest lo, then hi.
    for (size_t i = 0; i < c.size(); ++i)
        for (size_t j = i; j < c.size(); ++j) {
            const RegimeFit f = score(c[i], c[j]);
            if (!have || std::make_tuple(f.n_correct, -f.n_wrong, -f.n_abstain) >
                             std::make_tuple(best.n_correct, -best.n_wrong, -best.n_abstain)) {
                best = f;
                have = true;
            }
        }
    if (best.hi - best.lo >= min_width) return best;
    // Spec 7: the band has a least width, about the chosen centre, inside the statistic's range.
    const double top = statistic == "rho" ? 1.0 : std::numeric_limits<double>::infinity();
    const double width = std::min(min_width, top);
    double lo = 0.5 * (best.lo + best.hi) - 0.5 * width;
    lo = std::clamp(lo, 0.0, top - width);
    return score(lo, lo + width);
}

namespace {

struct Value {
    std::string metric, param;
    double value;
};

struct Run {
    std::string path;   // as shown in the tables: the argument, or argument/sub-run of dynamics
    std::string given;  // the argument it came from (what --fit / --apply name)
    fs::path dir;
    json rec;
    std::string subcommand, model, checkpoint, architecture, inputs_sha256, sink;
    std::string sink_resolved;  // run.json sink_policy.resolved ("" when the run does not say)
    int64_t n_params = -1;      // -1: the run does not record it
    double rho = std::nan(""), v_b = std::nan(""), flip_rate = std::nan("");
    bool has_regime = false;  // rho read from the run (an analyze run's or a prune run's own)
    std::vector<Value> values;
    // A prune run: its points, random spreads, measure and unpruned value, the regime it
    // measured (spec 7), and the index of the analyze run of the same model that took it over
    // (-1: none). An analyze run: the index of the prune run joined to it (-1: none).
    std::vector<metrics::PrunePoint> prune_points;
    std::vector<metrics::RandomSpread> prune_random;
    std::string measure;
    double baseline = std::nan("");
    metrics::PruningRegime pruning;
    int analyze_of = -1;
    int prune_of = -1;
    // Spec 7: which side of the random spread is worse (perplexity: higher; top-1 agreement:
    // lower).
    bool higher_is_worse() const { return measure != "top1_agreement"; }
    json frame;  // frame.json, or null
    std::string role = "none";
};

// Model-level numbers of one run, read from its own tables: each analysis' (its registry row's
// compare_values, in registry order), then the Fisher command's model rows. rho (spec 2) and the
// pooled flip rate (spec 7) also feed the regime predictor.
void read_values(Run& r) {
    const fs::path& dir = r.dir;
    std::vector<analysis::RunValue> read;
    for (const analysis::AnalysisInfo& info : analysis::registry())
        if (info.compare_values) info.compare_values(RunFiles(dir), read);
    for (const analysis::RunValue& v : read) {
        r.values.push_back({v.metric, v.param, v.value});
        if (v.metric == "rho") {
            r.rho = v.value;
            r.has_regime = true;
        } else if (v.metric == "flip_rate" && v.param == "pooled") {
            r.flip_rate = v.value;
        } else if (v.metric == "v_b") {
            r.v_b = v.value;
        }
    }
    // Fisher: the model-level rows (layer and head -1) of fisher.csv.
    if (analysis::RunTable f(dir, tables::kFisher.name); f.present())
        for (size_t i = 0; i < f.size(); ++i)
            if (f.num(i, "layer") < 0 && f.num(i, "head") < 0)
                r.values.push_back(
                    {f.text(i, "metric"), f.text(i, "convention"), f.num(i, "value")});
    if (fs::exists(dir / tables::kFrameFile)) {
        r.frame = io::read_json_file(dir / tables::kFrameFile);
        if (!r.frame.is_object())
            throw InputError((dir / tables::kFrameFile).string(), "is not a JSON object");
    }
}

// A prune run's tables (prune.csv, prune_random.csv) and the sink dispersion of its calibration
// set (run.json regime_inputs), which the regime predictor reads (spec 7).
void read_prune(Run& r) {
    const std::string file = (r.dir / "run.json").string();
    r.measure = io::json_string_or(r.rec, "measure", "perplexity", file);
    if (r.rec.contains("regime_inputs") && r.rec["regime_inputs"].is_object()) {
        const json& g = r.rec["regime_inputs"];
        if (g.contains("rho") && g["rho"].is_number()) {
            r.rho = g["rho"].get<double>();
            r.has_regime = true;
        }
        if (g.contains("v_b") && g["v_b"].is_number()) r.v_b = g["v_b"].get<double>();
    }
    if (analysis::RunTable t(r.dir, tables::kPrune.name); t.present())
        for (size_t i = 0; i < t.size(); ++i) {
            const std::string method = t.text(i, "method");
            if (method == "none") r.baseline = t.num(i, "value");
            if (method != "none" && method != "random")
                r.prune_points.push_back({method, t.num(i, "sparsity"), t.num(i, "value")});
        }
    if (analysis::RunTable t(r.dir, tables::kPruneRandom.name); t.present())
        for (size_t i = 0; i < t.size(); ++i)
            r.prune_random.push_back({t.num(i, "sparsity"), t.num(i, "min"), t.num(i, "max")});
}

Run read_run(const fs::path& dir, const std::string& shown, const std::string& given,
             const std::string& checkpoint_label) {
    Run r;
    r.path = shown;
    r.given = given;
    r.dir = dir;
    r.rec = read_run_json(dir, shown);
    const std::string file = (dir / "run.json").string();
    r.subcommand = io::json_string_or(r.rec, "subcommand", "", file);
    static const std::set<std::string> known = {"analyze", "metrics", "prune", "fisher"};
    if (!known.count(r.subcommand))
        throw InputError(file, "is a '" + printable(r.subcommand, 40) +
                                   "' run; compare reads analyze, metrics, dynamics, prune and "
                                   "fisher runs");
    r.model = model_name(r.rec, dir);
    r.checkpoint = checkpoint_label.empty() ? io::json_string_or(r.rec, "checkpoint", "", file)
                                            : checkpoint_label;
    if (r.rec.contains("model") && r.rec["model"].is_object()) {
        r.architecture = io::json_string_or(r.rec["model"], "architecture", "", file);
        r.n_params = io::json_int_or(r.rec["model"], "n_params", -1, file);
    }
    if (r.rec.contains("data") && r.rec["data"].is_object())
        r.inputs_sha256 = io::json_string_or(r.rec["data"], "inputs_sha256", "", file);
    if (r.rec.contains("options") && r.rec["options"].is_object() &&
        r.rec["options"].contains("sink") && r.rec["options"]["sink"].is_string())
        r.sink = r.rec["options"]["sink"].get<std::string>();
    if (r.rec.contains("sink_policy") && r.rec["sink_policy"].is_object())
        r.sink_resolved = io::json_string_or(r.rec["sink_policy"], "resolved", "", file);
    read_values(r);
    if (r.subcommand == "prune") read_prune(r);
    return r;
}

// A run argument: a plain run, or a dynamics run expanded into its checkpoints' sub-runs.
void add_runs(const std::string& given, std::vector<Run>& runs) {
    const fs::path dir(given);
    const json rec = read_run_json(dir, given);
    const std::string file = (dir / "run.json").string();
    if (io::json_string_or(rec, "subcommand", "", file) != "dynamics" ||
        !rec.contains("checkpoints")) {
        runs.push_back(read_run(dir, given, given, ""));
        return;
    }
    const json& cps = rec["checkpoints"];
    if (!cps.is_array() || cps.empty())
        throw InputError(file, "key 'checkpoints' must be a non-empty array");
    for (const json& cp : cps) {
        if (!cp.is_object()) throw InputError(file, "an entry of 'checkpoints' is not an object");
        const std::string sub = io::json_string(cp, "path", file);
        const fs::path rel(sub);
        if (sub.empty() || rel.is_absolute())
            throw InputError(file, "checkpoint path " + io::brief(cp["path"]) +
                                       " must be relative to the dynamics run");
        std::string label = io::json_string_or(cp, "label", "", file);
        if (label.empty() && cp.contains("step") && cp["step"].is_number_integer())
            label = "step " + std::to_string(cp["step"].get<int64_t>());
        runs.push_back(read_run(dir / rel, (dir / rel).string(), given, label));
        if (runs.back().subcommand == "prune" || runs.back().subcommand == "fisher")
            throw InputError(runs.back().path, "a dynamics checkpoint must be an analyze run");
    }
}

// What an option key is, for the messages: its spec's label (analysis/options.hpp).
std::string option_label(const std::string& key) {
    const analysis::OptionSpec* spec = analysis::find_option(key);
    return (spec && !spec->label.empty() ? spec->label : "option " + key) + " (" +
           analysis::cli_flag(key) + ")";
}

// Keys earlier versions wrote in run.json, by the key of the same option now.
const std::map<std::string, std::string> kRenamedOptions = {
    {"reference_fallback_fraction", "reference_fallback"},
    {"reference_cap_fraction", "reference_cap"}};

// Whether runs that differ in option `key` are reported: an option that does not change the
// compared numbers (how fast, what else is written) is not.
bool compared_option(const std::string& key) {
    const analysis::OptionSpec* spec = analysis::find_option(key);
    return !spec || spec->compared;
}

// The options a run's numbers depend on, its sink convention as the run resolved it: --sink auto
// is first on causal attention, so such a run agrees with a --sink first run.
json compared_options(const Run& r) {
    if (!r.rec.contains("options") || !r.rec["options"].is_object()) return json();
    json o = r.rec["options"];
    for (const auto& [old_key, key] : kRenamedOptions)
        if (o.contains(old_key) && !o.contains(key)) {
            o[key] = o[old_key];
            o.erase(old_key);
        }
    if (!r.sink_resolved.empty()) o["sink"] = r.sink_resolved;
    return o;
}

std::string shown_value(const json& v) {
    return v.is_string() ? printable(v.get<std::string>(), 80) : io::brief(v);
}

// Differences between each run and the first of its kind (inputs hash, options): one line each.
std::vector<std::string> differences(const std::vector<Run>& runs) {
    std::vector<std::string> out;
    const Run* first_hash = nullptr;
    std::map<std::string, const Run*> first_of_kind;  // options compare within one subcommand
    for (const Run& r : runs) {
        if (!r.inputs_sha256.empty()) {
            if (!first_hash)
                first_hash = &r;
            else if (first_hash->inputs_sha256 != r.inputs_sha256)
                out.push_back("runs differ in their inputs (the tokenised input set's sha256): " +
                              first_hash->path + " has " + first_hash->inputs_sha256.substr(0, 12) +
                              ", " + r.path + " has " + r.inputs_sha256.substr(0, 12));
        }
        const std::string kind = r.subcommand == "metrics" ? "analyze" : r.subcommand;
        const auto [it, inserted] = first_of_kind.emplace(kind, &r);
        if (inserted) continue;
        const Run& a = *it->second;
        const json oa = compared_options(a), ob = compared_options(r);
        if (!oa.is_object() || !ob.is_object()) continue;
        std::set<std::string> keys;
        for (auto k = oa.begin(); k != oa.end(); ++k) keys.insert(k.key());
        for (auto k = ob.begin(); k != ob.end(); ++k) keys.insert(k.key());
        for (const std::string& k : keys) {
            if (!compared_option(k)) continue;
            const json va = oa.contains(k) ? oa[k] : json("(not set)");
            const json vb = ob.contains(k) ? ob[k] : json("(not set)");
            if (va != vb)
                out.push_back("runs differ in " + option_label(k) + ": " + a.path + " has " +
                              shown_value(va) + ", " + r.path + " has " + shown_value(vb));
        }
    }
    return out;
}

double frame_num(const json& f, const char* key) {
    return f.contains(key) && f[key].is_number() ? f[key].get<double>() : std::nan("");
}
std::string frame_str(const json& f, const char* key) {
    return f.contains(key) && f[key].is_string() ? f[key].get<std::string>() : "";
}

// The run list, --fit and --apply, checked before anything is read.
void check_compare_options(const CompareOptions& o) {
    if (o.runs.empty()) throw UsageError("compare needs at least one run directory");
    if (o.regime_outcome != "pruning" && o.regime_outcome != "flip_rate")
        throw UsageError("--regime-outcome must be pruning or flip_rate, got '" +
                         printable(o.regime_outcome, 40) + "'");
    if (o.regime_statistic != "rho" && o.regime_statistic != "v_b")
        throw UsageError("--regime-statistic must be rho or v_b, got '" +
                         printable(o.regime_statistic, 40) + "'");
    if (o.regime_statistic == "v_b" && o.fit.empty())
        throw UsageError(
            "--regime-statistic v_b has no default thresholds (V_b is in nats^2, with no fixed "
            "scale): name the runs to fit them on with --fit");
    if (o.regime_channel == "dA_perp" || !metrics::find_prune_channel(o.regime_channel))
        throw UsageError("--regime-channel must be a prune channel other than dA_perp (" +
                         metrics::prune_channel_names("dA_perp") + "), got '" +
                         printable(o.regime_channel, 40) + "'");
    if (!(std::isfinite(o.regime_min_width) && o.regime_min_width >= 0 &&
          (o.regime_statistic != "rho" || o.regime_min_width <= 1)))
        throw UsageError("--regime-min-width must be >= 0 (and <= 1 for rho), got " +
                         io::format_number(o.regime_min_width));
    if (o.out.empty() && !o.memory) throw UsageError("--out must not be empty");
    std::set<std::string> given(o.runs.begin(), o.runs.end());
    if (given.size() != o.runs.size()) throw UsageError("compare: a run directory is given twice");
    // The same folder spelled twice (rA and ./rA/, a symlink to it) is the same run.
    std::map<fs::path, std::string> seen;
    for (const std::string& p : o.runs) {
        std::error_code ec;
        fs::path key = fs::weakly_canonical(fs::absolute(p, ec), ec);
        if (ec) continue;  // unreadable: reading the run reports it
        const auto [it, inserted] = seen.emplace(key, p);
        if (!inserted)
            throw UsageError("compare: " + printable(it->second, 200) + " and " +
                             printable(p, 200) + " are the same run directory (" +
                             printable(key.string(), 200) + "): give each run once");
    }
    for (const auto* list : {&o.fit, &o.apply})
        for (const std::string& p : *list)
            if (!given.count(p))
                throw UsageError(std::string(list == &o.fit ? "--fit" : "--apply") + " " +
                                 printable(p, 200) +
                                 " is not one of the run directories given (name it as given)");
    for (const std::string& p : o.fit)
        if (std::find(o.apply.begin(), o.apply.end(), p) != o.apply.end())
            throw UsageError("--fit and --apply both name " + printable(p, 200) +
                             ": a run is either fitted on or predicted");
}

// Every run, read whole before anything is written; --out must not be one of them.
std::vector<Run> read_runs(const CompareOptions& o) {
    std::vector<Run> runs;
    for (const std::string& p : o.runs) add_runs(p, runs);
    for (const Run& r : runs) {
        std::error_code ec;
        if (!o.memory && fs::exists(o.out, ec) && fs::equivalent(o.out, r.dir, ec))
            throw UsageError("--out " + o.out.string() + " is one of the runs compared");
    }
    return runs;
}

// Spec 7's outcome of each prune run, and each analyze run joined to the prune run of the same
// model and checkpoint (the first one given; a second is reported). A joined prune run is no
// regime point of its own: its analyze run is.
void join_prune_runs(std::vector<Run>& runs, const CompareOptions& o,
                     std::vector<std::string>& warnings) {
    for (Run& p : runs)
        if (p.subcommand == "prune")
            p.pruning = metrics::measured_pruning_regime(p.prune_points, p.prune_random,
                                                         o.regime_channel, p.higher_is_worse());
    for (size_t a = 0; a < runs.size(); ++a) {
        Run& r = runs[a];
        if (r.subcommand != "analyze" && r.subcommand != "metrics") continue;
        for (size_t i = 0; i < runs.size(); ++i) {
            Run& p = runs[i];
            if (p.subcommand != "prune" || p.model != r.model || p.checkpoint != r.checkpoint)
                continue;
            if (r.prune_of >= 0) {
                warnings.push_back(p.path + " is a second prune run of " + r.model + " (" +
                                   runs[size_t(r.prune_of)].path + " is used for " + r.path + ")");
                continue;
            }
            r.prune_of = int(i);
            r.pruning = p.pruning;
            p.analyze_of = int(a);
        }
    }
}

// The regime predictor's statistic of a run, and whether the run is a regime point: an analyze
// run with rho, or a prune run not joined to one (its calibration set's dispersion).
double regime_statistic(const Run& r, const CompareOptions& o) {
    return o.regime_statistic == "v_b" ? r.v_b : r.rho;
}
bool regime_subject(const Run& r) {
    return r.has_regime && r.analyze_of < 0;
}
// The measured regime under the chosen outcome (Abstain: unmeasured).
metrics::Regime measured_outcome(const Run& r, const CompareOptions& o) {
    // measured_regime: Abstain for a non-finite flip rate
    return o.regime_outcome == "flip_rate" ? metrics::measured_regime(r.flip_rate)
                                           : r.pruning.measured;
}

// The regime predictor's thresholds (spec 7): fitted on the --fit runs, applied frozen to the
// --apply runs (default: every run not fitted on).
struct Fitted {
    RegimeFit rf;
    std::vector<RegimePoint> points;
    bool fitted = false;
};

// Sets each run's role and fits the thresholds; what was left out goes to `warnings`.
Fitted fit_roles(std::vector<Run>& runs, const CompareOptions& o,
                 std::vector<std::string>& warnings) {
    const std::set<std::string> fit(o.fit.begin(), o.fit.end());
    const std::set<std::string> apply(o.apply.begin(), o.apply.end());
    // A run and the prune run joined to it are one point: named by either.
    auto named = [&](const std::set<std::string>& names, const Run& r) {
        return names.count(r.given) ||
               (r.prune_of >= 0 && names.count(runs[size_t(r.prune_of)].given));
    };
    const std::string outcome =
        o.regime_outcome == "flip_rate" ? "measured flip rate" : "measured pruning regime";
    Fitted f;
    for (Run& r : runs) {
        r.role = named(fit, r) ? "fit" : apply.empty() || named(apply, r) ? "apply" : "none";
        if (r.role != "fit" || r.analyze_of >= 0) continue;
        const double x = regime_statistic(r, o);
        const metrics::Regime m = measured_outcome(r, o);
        if (!regime_subject(r) || !std::isfinite(x))
            warnings.push_back(r.path + " has no " + o.regime_statistic +
                               " (no model row in dispersion.csv, or a prune run without "
                               "regime_inputs): left out of fitting");
        else if (m == metrics::Regime::Abstain)
            warnings.push_back(r.path + " has no " + outcome + ": left out of fitting");
        else
            f.points.push_back({x, m});
    }
    f.fitted = !fit.empty();
    f.rf = fit_regime(f.points, o.regime_statistic, f.fitted ? o.regime_min_width : 0.0);
    if (f.fitted && f.points.empty())
        warnings.push_back("no fit run has " + o.regime_statistic + " and a " + outcome +
                           ": the thresholds stay at the defaults 0.2 / 0.5");
    // Fit runs of one measured class leave the rule nothing to separate: any lo = hi that puts
    // them all on their side scores perfectly, so the thresholds say nothing about the other class.
    if (f.points.empty()) return f;
    const metrics::Regime one = f.points.front().measured;
    const bool mixed = std::any_of(f.points.begin(), f.points.end(),
                                   [&](const auto& p) { return p.measured != one; });
    if (!mixed) {
        const bool safe = one == metrics::Regime::ClassicalSafe;
        warnings.push_back(
            "every --fit run is measured " + metrics::regime_name(one) +
            (o.regime_outcome == "flip_rate" ? " (flip rate " + std::string(safe ? "< " : ">= ") +
                                                   io::format_number(metrics::kUnsafeFlipRate) + ")"
                                             : std::string(" by pruning")) +
            ": with no " + (safe ? "classical-unsafe" : "classical-safe") +
            " example the fitted lo = " + console_number(f.rf.lo) + ", hi = " +
            console_number(f.rf.hi) + " are not informed by that class; add a run of it to --fit");
    }
    return f;
}

// compare's tables: models.csv, compare.csv, frames.csv, regime.csv, regime_confusion.csv,
// regime_map.csv, and run.json's list of runs.
struct CompareTables {
    io::Table models{{"run", "model", "checkpoint", "architecture", "n_params", "subcommand",
                      "sink", "inputs_sha256"}};
    io::Table values{{"model", "checkpoint", "n_params", "metric", "param", "value"}};
    io::Table frames{{"run", "model", "checkpoint", "frame", "share_first_mid_late",
                      "mean_reference_count", "mid_late_first_layer", "convention", "rule"}};
    io::Table regime{{"run",
                      "model",
                      "checkpoint",
                      "role",
                      "statistic",
                      "value",
                      "rho",
                      "v_b",
                      "lo",
                      "hi",
                      "predicted",
                      "outcome",
                      "measured",
                      "agreement",
                      "flip_rate",
                      "unsafe_flip_rate",
                      "flip_measured",
                      "flip_agreement",
                      "prune_run",
                      "pruning_measured",
                      "pruning_agreement",
                      "pruning_evidence",
                      "rule"}};
    io::Table confusion{{"predicted", "measured", "count"}};
    io::Table map{{"prune_run", "analyze_run", "model", "checkpoint", "rho", "v_b", "method",
                   "sparsity", "measure", "value", "baseline", "inflation", "random_min",
                   "random_max", "beyond_random"}};
    json run_list = json::array();
};

// The regime map (spec 7): each prune run's points against its model's sink dispersion (the
// joined analyze run's, else the prune run's calibration set's).
void add_map_rows(const std::vector<Run>& runs, io::Table& map) {
    for (const Run& p : runs) {
        if (p.subcommand != "prune") continue;
        const Run* a = p.analyze_of >= 0 ? &runs[size_t(p.analyze_of)] : nullptr;
        const Run& src = a ? *a : p;
        for (const metrics::PrunePoint& x : p.prune_points) {
            metrics::RandomSpread spread{x.sparsity, std::nan(""), std::nan("")};
            for (const metrics::RandomSpread& r : p.prune_random)
                if (r.sparsity == x.sparsity) spread = r;
            const int64_t beyond =
                !std::isfinite(spread.max)
                    ? -1
                    : int64_t(metrics::beyond_random_spread(x.value, spread, p.higher_is_worse()));
            map.add_row({p.path, a ? a->path : std::string(), p.model, p.checkpoint, src.rho,
                         src.v_b, x.method, x.sparsity, p.measure, x.value, p.baseline,
                         x.value / p.baseline, spread.min, spread.max, beyond});
        }
    }
}

CompareTables compare_tables(const std::vector<Run>& runs, const Fitted& f,
                             const CompareOptions& o) {
    CompareTables t;
    const std::vector<std::string> predicted_names = {"classical-safe", "classical-unsafe",
                                                      "abstain"};
    const std::vector<std::string> measured_names = {"classical-safe", "classical-unsafe",
                                                     "unmeasured"};
    std::map<std::pair<std::string, std::string>, int64_t> confusion;
    const std::string rule =
        f.fitted ? std::string("fitted: ") + kRegimeFitRule : "defaults of spec 7 (no --fit)";
    auto measured_name = [](metrics::Regime m) {
        return m == metrics::Regime::Abstain ? std::string("unmeasured") : metrics::regime_name(m);
    };
    for (const Run& r : runs) {
        t.models.add_row({r.path, r.model, r.checkpoint, r.architecture, r.n_params, r.subcommand,
                          r.sink, r.inputs_sha256});
        for (const Value& v : r.values)
            t.values.add_row({r.model, r.checkpoint, r.n_params, v.metric, v.param, v.value});
        if (r.frame.is_object())
            t.frames.add_row({r.path, r.model, r.checkpoint, frame_str(r.frame, "verdict"),
                              frame_num(r.frame, "share_first_mid_late"),
                              frame_num(r.frame, "mean_reference_count"),
                              frame_num(r.frame, "mid_late_first_layer"),
                              frame_str(r.frame, "convention"), frame_str(r.frame, "rule")});
        if (regime_subject(r)) {
            const metrics::Regime p =
                metrics::predict_regime_of(regime_statistic(r, o), f.rf.lo, f.rf.hi);
            const metrics::Regime flip = metrics::measured_regime(r.flip_rate);
            const metrics::Regime m = measured_outcome(r, o);
            const bool has_prune = r.subcommand == "prune" || r.prune_of >= 0;
            t.regime.add_row(
                {r.path,
                 r.model,
                 r.checkpoint,
                 r.role,
                 o.regime_statistic,
                 regime_statistic(r, o),
                 r.rho,
                 r.v_b,
                 f.rf.lo,
                 f.rf.hi,
                 metrics::regime_name(p),
                 o.regime_outcome,
                 measured_name(m),
                 metrics::regime_agreement(p, m),
                 r.flip_rate,
                 metrics::kUnsafeFlipRate,
                 measured_name(flip),
                 metrics::regime_agreement(p, flip),
                 r.subcommand == "prune" ? r.path
                 : r.prune_of >= 0       ? runs[size_t(r.prune_of)].path
                                         : std::string(),
                 measured_name(r.pruning.measured),
                 metrics::regime_agreement(p, r.pruning.measured),
                 has_prune ? r.pruning.reason : std::string("no prune run of this model"),
                 rule});
            if (r.role == "apply") ++confusion[{metrics::regime_name(p), measured_name(m)}];
        }
        t.run_list.push_back({{"path", r.path},
                              {"given", r.given},
                              {"subcommand", r.subcommand},
                              {"model", r.model},
                              {"checkpoint", r.checkpoint},
                              {"role", r.role}});
    }
    for (const auto& p : predicted_names)
        for (const auto& m : measured_names) t.confusion.add_row({p, m, confusion[{p, m}]});
    add_map_rows(runs, t.map);
    return t;
}

// run.json's regime section.
json regime_record(const CompareOptions& o, const Fitted& f) {
    json reg = {{"lo", f.rf.lo},
                {"hi", f.rf.hi},
                {"fitted", f.fitted},
                {"rule", f.fitted ? kRegimeFitRule : "spec 7 defaults (no --fit)"},
                {"statistic", o.regime_statistic},
                {"outcome", o.regime_outcome},
                {"classical_channel", o.regime_channel},
                {"min_width", o.regime_min_width},
                {"pruning_rule",
                 "classical-unsafe when at some sparsity the classical channel's measure is "
                 "beyond the random baseline's spread on the worse side while dA_perp's is "
                 "within it; classical-safe when both were compared at some sparsity and none is "
                 "such; unmeasured otherwise"},
                {"unsafe_flip_rate", metrics::kUnsafeFlipRate},
                {"fit_runs", o.fit},
                {"apply_runs", o.apply.empty() ? json("every run not fitted on") : json(o.apply)}};
    if (f.fitted)
        reg["fit_score"] = {{"n_points", f.points.size()},
                            {"correct", f.rf.n_correct},
                            {"wrong", f.rf.n_wrong},
                            {"abstain", f.rf.n_abstain}};
    return reg;
}

}  // namespace

void run_compare_command(const CompareOptions& o, std::ostream& log) {
    check_compare_options(o);
    if (!o.memory) check_output_dir(o.out, o.overwrite);
    // Read everything first: nothing is written unless every run is complete and consistent.
    std::vector<Run> runs = read_runs(o);
    const std::vector<std::string> diffs = differences(runs);
    if (!diffs.empty() && !o.allow_mixed)
        throw UsageError("compare: " + diffs.front() +
                         (diffs.size() > 1
                              ? " (and " + std::to_string(diffs.size() - 1) + " more differences)"
                              : "") +
                         "; pass --allow-mixed to compare them anyway");
    std::vector<std::string> warnings;
    join_prune_runs(runs, o, warnings);
    if (o.regime_outcome == "pruning" && std::none_of(runs.begin(), runs.end(), [](const Run& r) {
            return regime_subject(r) && r.pruning.measured != metrics::Regime::Abstain;
        }))
        warnings.push_back(
            "no compared model has a measured pruning regime (a prune run of it with the "
            "classical channel, dA_perp and random seeds): every regime outcome is unmeasured; "
            "add `sinkscope prune` runs, or score the flip rate with --regime-outcome flip_rate");
    const Fitted f = fit_roles(runs, o, warnings);
    const CompareTables t = compare_tables(runs, f, o);

    io::RunRecord record(o.command_line, 1);  // reads and writes tables on one thread
    std::optional<OutputDir> out;             // on disk only
    if (!o.memory) out.emplace(o.out, o.overwrite);
    const RunFiles files = o.memory ? *o.memory : RunFiles(out->staging());
    t.models.write(files, "models", false);
    t.values.write(files, "compare", false);
    t.frames.write(files, "frames", false);
    t.regime.write(files, "regime", false);
    t.confusion.write(files, "regime_confusion", false);
    if (t.map.size() > 0) t.map.write(files, "regime_map", false);
    record.set("subcommand", "compare");
    record.set("runs", t.run_list);
    record.set("inputs", o.runs);
    record.set("regime", regime_record(o, f));
    record.set("allow_mixed", o.allow_mixed);
    record.set("mixed", diffs);
    record.set("warnings", warnings);
    record.set("definitions",
               {{"sink_mass", "unweighted mean over the model's heads of heads.csv sink_mass"},
                {"sink_eps", "sink_eps.csv model row (layer and head -1), param = its eps"},
                {"rho", "regime.csv model row (else dispersion.csv): V_b / (V_b + C_perp)"},
                {"v_b", "dispersion.csv model row: variance over the heads of the sink balance"},
                {"inflation", "regime_map.csv: a pruned point's measure / the unpruned measure"},
                {"flip_rate", "regime.csv model row: flips pooled over the classical metrics"},
                {"reversal_rate", "reversal.csv model rows, param = comparison/metric"}});
    record.write(files);
    // Runs without any model-level number (e.g. prune runs only) give no figure: no page then.
    const bool report = out && o.report && report::have_vega_runtime() &&
                        !report::write_report_if_any(out->staging()).empty();
    if (out) out->commit();

    for (const auto& w : warnings) std::cerr << "sinkscope: warning: " << w << "\n";
    if (!diffs.empty())
        log << "compare: " << diffs.size() << " difference(s) between the runs (--allow-mixed), "
            << "listed in run.json\n";
    log << "compare: " << runs.size() << " runs, regime thresholds lo = " << console_number(f.rf.lo)
        << ", hi = " << console_number(f.rf.hi) << (f.fitted ? " (fitted)" : " (defaults)") << "\n";
    if (out && o.report && !report)
        log << (report::have_vega_runtime()
                    ? "report.html not written: the runs hold nothing to plot\n"
                    : "report.html not written: this build has no Vega runtime "
                      "(scripts/install-deps.sh); `sinkscope report --run DIR` writes it later\n");
    if (out) log << "wrote " << o.out.string() << "\n";
}

}  // namespace sinkscope::api
