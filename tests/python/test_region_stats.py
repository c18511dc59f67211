"""regions.csv against scipy.stats: for every per-layer quantity (head -1) of the reference-frame
tables, the region means with their Student-t intervals (t.interval), the one-sample t-tests
against 0 (ttest_1samp), the Welch tests between regions (ttest_ind, equal_var=False), the
Spearman trend (spearmanr), the peak and fold ratios, the fold change's paired test over the
inputs (ttest_rel of the last layer's against the first layer's per-input values) and Fisher's
method over the layers' one-sample tests (combine_pvalues, method='fisher'), all recomputed here
from the run's own tables (per-layer values) and --per-input rows."""

import math

import numpy as np
import pytest
from scipy import optimize, special, stats

import sinkscope

ANALYSES = ["graphs", "topology", "kl", "spectra", "entropy", "tokens", "attention_stats"]
LEVEL = 0.95
N_LAYERS = 9  # thirds: early 0-2, middle 3-5, late 6-8


def attention(seed, n_inputs=6, n_layers=N_LAYERS, heads=3, tokens=12):
    """Softmax rows of random logits, with a sink column that grows with depth."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n_inputs, n_layers, heads, tokens, tokens))
    logits[..., 0] += np.linspace(0.0, 3.0, n_layers)[None, :, None, None]
    a = np.exp(logits)
    return (a / a.sum(axis=-1, keepdims=True)).astype(np.float32)


def close(ours, want, tol=1e-10):
    """Both NaN, or equal to `tol` relative to max(1, |want|): the same statistic of the same
    doubles differs only by the rounding of a few dozen operations (~1e-14 relative); the
    p-values go through the incomplete beta function, ~1e-14 too. 1e-10 is the issue's bound."""
    if (math.isnan(want) and math.isnan(ours)) or (math.isinf(want) and ours == want):
        return True
    return abs(ours - want) <= tol * max(1.0, abs(want))


@pytest.fixture(scope="module")
def run():
    x = attention(7)
    r = sinkscope.metrics.analyze(x, masking="bidirectional", analyses=ANALYSES, per_input=True)
    return r


def series(table):
    """(metric, param) -> {layer: value} of the head-average rows."""
    out = {}
    for layer, head, metric, param, value in zip(table["layer"], table["head"], table["metric"],
                                                 table["param"], table["value"]):
        if head == -1 and layer >= 0:
            out.setdefault((metric, param), {})[int(layer)] = float(value)
    return out


def pkey(param):
    """A param as both tables give it: text in the summary table, a number (NaN for an empty
    cell) where the per-input CSV was read back."""
    try:
        v = float(param)
    except ValueError:
        return str(param)
    return "" if math.isnan(v) else repr(v)


def per_input(stream):
    """(metric, param) -> {layer: {input: value}}."""
    out = {}
    for inp, layer, head, metric, param, value in zip(stream["input"], stream["layer"],
                                                      stream["head"], stream["metric"],
                                                      stream["param"], stream["value"]):
        if head == -1 and layer >= 0:
            out.setdefault((metric, pkey(param)), {}).setdefault(int(layer), {})[int(inp)] = \
                float(value)
    return out


def region_rows(regions):
    out = {}
    for t, m, p, reg, stat, v in zip(regions["table"], regions["metric"], regions["param"],
                                     regions["region"], regions["statistic"], regions["value"]):
        key = (t, m, p, reg, stat)
        assert key not in out, key
        out[key] = float(v)
    return out


def interval(xs):
    """The Student-t interval mean -+ t_q sem with t_q scipy's t distribution inverted to double
    precision: the root of stdtr(df, -t) = (1 - level) / 2 (brentq, xtol 1e-14)."""
    df, mean, sem = len(xs) - 1, np.mean(xs), stats.sem(xs)
    tail = 1 - (1 + LEVEL) / 2
    tq = optimize.brentq(lambda t: special.stdtr(df, -t) - tail, 0, 1e4, xtol=1e-14,
                         rtol=1e-15)
    return mean - tq * sem, mean + tq * sem


def well_conditioned(xs):
    """Whether a t statistic of `xs` is determined to ~1e-12 by the doubles: its relative
    rounding error is ~ n eps |mean| / sd (see the Fisher comparison below)."""
    sd = np.std(xs, ddof=1)
    return sd > 0 and abs(np.mean(xs)) / sd <= 1e4


def region_of(layer, lo=N_LAYERS // 3, hi=2 * N_LAYERS // 3):
    return "early" if layer < lo else "middle" if layer < hi else "late"


def test_regions_equal_scipy(run):
    got = region_rows(run["regions"])
    assert run.record["regions"]["early"] == "0-2"
    assert run.record["regions"]["late"] == "6-8"
    checked = {}

    def check(key, want):
        ours = got[key]
        if not math.isfinite(want) and math.isnan(ours):
            # Degenerate data (no variance): scipy gives +-inf where sinkscope's convention is
            # NaN (metrics/statistics.hpp, welch_t_test); counted apart.
            checked["degenerate"] = checked.get("degenerate", 0) + 1
            return
        assert close(ours, want), (key, ours, want)
        checked[key[4]] = checked.get(key[4], 0) + 1

    for table in ANALYSES:
        values = series(run[table])
        inputs = per_input(run[table + "_per_input"])
        for (metric, param), by_layer in values.items():
            finite = {l: v for l, v in by_layer.items() if math.isfinite(v)}
            groups = {"early": [], "middle": [], "late": []}
            layer_p = {"early": [], "middle": [], "late": []}
            ill = {}
            for l in sorted(by_layer):
                if l in finite:
                    groups[region_of(l)].append(finite[l])
                if (metric, pkey(param)) not in inputs:
                    continue  # derived at the end (graphs' `effective`): no per-input values
                xs = list(inputs[(metric, pkey(param))][l].values())
                xs = [v for v in xs if math.isfinite(v)]
                if len(xs) >= 2:
                    # Inputs that all agree on a non-zero value: t = +-inf, p = 0 (scipy's and
                    # sinkscope's convention); all zero: NaN, left out of Fisher's method.
                    p = stats.ttest_1samp(xs, 0).pvalue
                    if not math.isnan(p):
                        layer_p[region_of(l)].append(p)
                    # A layer whose inputs agree to many digits: t = mean sqrt(n) / sd has a
                    # relative rounding error ~ n eps |mean| / sd in any implementation (sd
                    # from differences of values rounded to eps |mean|), and ln p ~ -df ln t
                    # passes it on times df; beyond |mean| / sd = 1e4 the two implementations'
                    # chi2 may differ by more than 1e-10 relative, so Fisher's X^2 and p are
                    # not compared there (its k still is).
                    if np.std(xs, ddof=1) > 0 and not well_conditioned(xs):
                        ill[region_of(l)] = True
            groups["all"] = [finite[l] for l in sorted(finite)]
            layer_p["all"] = sum((layer_p[r] for r in ("early", "middle", "late")), [])
            for region, xs in groups.items():
                k = (table, metric, param, region)
                check(k + ("n",), len(xs))
                if len(xs) >= 2 and np.ptp(xs) > 0:
                    mean, sem = np.mean(xs), stats.sem(xs)
                    check(k + ("mean",), mean)
                    check(k + ("sd",), np.std(xs, ddof=1))
                    lo, hi = interval(xs)
                    check(k + ("ci_lo",), lo)
                    check(k + ("ci_hi",), hi)
                    # scipy's own t.interval: its t.ppf is off by up to ~4e-11 relative at small
                    # df (df = 2: 4.302652729911275 where the closed form (2q - 1) /
                    # sqrt(2 q (1 - q)) gives 4.30265272974946), so 1e-9 here.
                    want = stats.t.interval(LEVEL, len(xs) - 1, loc=mean, scale=sem)
                    assert close(got[k + ("ci_lo",)], want[0], 1e-9)
                    assert close(got[k + ("ci_hi",)], want[1], 1e-9)
                    if well_conditioned(xs):
                        t = stats.ttest_1samp(xs, 0)
                        check(k + ("t_vs_0",), t.statistic)
                        check(k + ("p_vs_0",), t.pvalue)
                if layer_p[region]:
                    f = stats.combine_pvalues(layer_p[region], method="fisher")
                    check(k + ("fisher_k",), len(layer_p[region]))
                    if not (ill.get(region) or (region == "all" and ill)):
                        check(k + ("fisher_chi2",), f.statistic)
                        check(k + ("fisher_p",), f.pvalue)
            for a, b in [("early", "middle"), ("early", "late"), ("middle", "late")]:
                x, y = groups[a], groups[b]
                # No variance on either side: scipy gives +-inf and p = 0 (or NaN), sinkscope
                # NaN (metrics/statistics.hpp, welch_t_test): not compared.
                if len(x) >= 2 and len(y) >= 2 and (np.ptp(x) > 0 or np.ptp(y) > 0):
                    w = stats.ttest_ind(x, y, equal_var=False)
                    k = (table, metric, param, f"{a}-{b}")
                    check(k + ("welch_t",), w.statistic)
                    check(k + ("welch_p",), w.pvalue)
                    check(k + ("mean_difference",), np.mean(x) - np.mean(y))
            if groups["early"] and groups["middle"] and np.mean(groups["early"]) != 0:
                check((table, metric, param, "middle/early", "peak_ratio"),
                      np.mean(groups["middle"]) / np.mean(groups["early"]))
            layers = sorted(finite)
            if len(layers) >= 3 and np.ptp(groups["all"]) > 0:
                rho = stats.spearmanr(layers, groups["all"])
                check((table, metric, param, "all", "spearman_rho"), rho.correlation)
                check((table, metric, param, "all", "spearman_p"), rho.pvalue)
            if len(layers) >= 2:
                first, last = layers[0], layers[-1]
                k = (table, metric, param, "first-last")
                check(k + ("first_layer",), first)
                check(k + ("last_layer",), last)
                if finite[first] != 0:
                    check(k + ("fold_change",), finite[last] / finite[first])
                if (metric, pkey(param)) not in inputs:
                    check(k + ("fold_n",), 0)
                    check((table, metric, param, "all", "fisher_k"), 0)
                    continue
                a = inputs[(metric, pkey(param))][first]
                b = inputs[(metric, pkey(param))][last]
                both = [i for i in a if i in b and math.isfinite(a[i]) and math.isfinite(b[i])]
                d = [b[i] - a[i] for i in both]
                if len(d) >= 2 and np.ptp(d) > 0 and well_conditioned(d):
                    t = stats.ttest_rel([b[i] for i in both], [a[i] for i in both])
                    check(k + ("fold_n",), len(both))
                    check(k + ("fold_t",), t.statistic)
                    check(k + ("fold_p",), t.pvalue)
    # Every statistic was compared on many series (each a failure if the code were wrong).
    for stat in ["mean", "ci_lo", "t_vs_0", "p_vs_0", "fisher_p", "welch_p", "peak_ratio",
                 "spearman_rho", "spearman_p", "fold_change", "fold_t", "fold_p"]:
        assert checked.get(stat, 0) >= 20, (stat, checked.get(stat, 0))


def test_region_bounds_option(run):
    x = attention(7)
    r = sinkscope.metrics.analyze(x, masking="bidirectional", analyses=["entropy"],
                                  region_bounds="2,7")
    got = region_rows(r["regions"])
    assert r.record["regions"]["early"] == "0-1"
    assert r.record["regions"]["middle"] == "2-6"
    assert r.record["regions"]["late"] == "7-8"
    values = series(r["entropy"])[("entropy_all_rows", "")]
    want = np.mean([values[l] for l in (2, 3, 4, 5, 6)])
    assert close(got[("entropy", "entropy_all_rows", "", "middle", "mean")], want)
    # The group's tables are unchanged by the option; only regions.csv differs.
    default = sinkscope.metrics.analyze(x, masking="bidirectional", analyses=["entropy"])
    for col in default["entropy"]:
        assert list(default["entropy"][col]) == list(r["entropy"][col])
    with pytest.raises(Exception, match="region-bounds"):
        sinkscope.metrics.analyze(x, analyses=["entropy"], region_bounds="5,2")
