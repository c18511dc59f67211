"""`sinkscope tables` writes the reference-frame paper's (P2) tables from a `metrics --example`
run: every number of p2_topology, p2_spectral, p2_kl_reduction, p2_sink_concentration and
p2_tokens is the run's own regions.csv value (the CSV copies it; compared exactly), the
correlation-flip table is graphs.csv's r_lambda2_* / p_lambda2_* / sign_flip_lambda2_* rows, and
a value-space style long table gets its regions from the same statistics as regions.csv
(scipy's, recomputed here)."""

import csv
import math
import os

import numpy as np
import pytest
from scipy import stats

import sinkscope


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def num(s):
    return float(s) if s != "" else math.nan


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


REGION_STATS = {"early": ("early", "mean"), "early_lo": ("early", "ci_lo"),
                "early_hi": ("early", "ci_hi"), "middle": ("middle", "mean"),
                "middle_lo": ("middle", "ci_lo"), "middle_hi": ("middle", "ci_hi"),
                "late": ("late", "mean"), "late_lo": ("late", "ci_lo"),
                "late_hi": ("late", "ci_hi"), "peak_ratio": ("middle/early", "peak_ratio"),
                "welch_p_early_late": ("early-late", "welch_p"),
                "spearman_rho": ("all", "spearman_rho"), "spearman_p": ("all", "spearman_p"),
                "fold_change": ("first-last", "fold_change"), "fold_p": ("first-last", "fold_p")}

FAMILIES = {"p2_topology": lambda t, m, p: t == "topology",
            "p2_spectral": lambda t, m, p: t == "spectra",
            "p2_kl_reduction": lambda t, m, p: t == "kl" and m == "kl_reduction",
            "p2_sink_concentration": lambda t, m, p: t == "kl" and m == "sink_concentration"
            and p in ("0.8", "0.95"),
            "p2_tokens": lambda t, m, p: t == "tokens"}


@pytest.fixture(scope="module")
def tables(cli, tmp_path_factory):
    """The example (4 layers: one-layer early and middle regions) and a 9-layer run, so that
    every column has finite values somewhere."""
    tmp = tmp_path_factory.mktemp("p2")
    run = tmp / "run"
    cli("metrics", "--example", "--analyses", "all,attention_stats", "--out", run)
    deep = tmp / "deep"
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(5, 9, 2, 10, 10))
    logits[..., 0] += np.linspace(0.0, 3.0, 9)[None, :, None, None]
    a = np.exp(logits)
    sinkscope.metrics.analyze((a / a.sum(axis=-1, keepdims=True)).astype(np.float32),
                              masking="bidirectional", name="deep", out=deep, report=False,
                              analyses=["graphs", "topology", "kl", "spectra", "tokens"])
    out = tmp / "t"
    r = cli("tables", run, deep, "--out", out)
    return {"run": run, "deep": deep}, out, r.stdout


def test_region_tables_are_the_runs_regions(tables):
    runs, out, log = tables
    checked, finite = 0, 0
    for name, keep in FAMILIES.items():
        rows = read(out / f"{name}.csv")
        n_rows = 0
        for model, run in runs.items():
            regions = {}
            for row in read(run / "regions.csv"):
                regions[(row["table"], row["metric"], row["param"], row["region"],
                         row["statistic"])] = num(row["value"])
            want = sorted({(t, m, p) for (t, m, p, _, _) in regions if keep(t, m, p)})
            assert want, name
            mine = [r for r in rows if r["model"] == model]
            assert [(r["metric"], r["param"]) for r in mine] == [(m, p) for (_, m, p) in want]
            n_rows += len(mine)
            for r, (t, m, p) in zip(mine, want):
                for column, (region, statistic) in REGION_STATS.items():
                    assert same(num(r[column]), regions[(t, m, p, region, statistic)]), \
                        (name, model, m, p, column)
                    checked += 1
                    finite += math.isfinite(num(r[column]))
        assert f"{name}: {n_rows} rows from 2 runs" in log
        text = (out / f"{name}.md").read_text()
        assert text.startswith("Table: ") and "early [early\\_lo, early\\_hi]" in text
        assert "\\label{tab:" + name.replace("_", "\\_") in (out / f"{name}.tex").read_text() \
            or "\\label{tab:" + name + "}" in (out / f"{name}.tex").read_text()
    assert checked > 500 and finite > 400
    assert "p2_fisher: not written" in log


def test_correlation_flips_are_graphs_rows(tables):
    runs, out, _ = tables
    run = runs["run"]
    model = {(r["metric"], r["param"]): num(r["value"]) for r in read(run / "graphs.csv")
             if r["layer"] == "-1" and r["head"] == "-1"}
    rows = [r for r in read(out / "p2_correlation_flips.csv") if r["model"] == "run"]
    assert len(rows) == 4 * 7  # four partners, seven thresholds
    flips = 0
    for r in rows:
        tau = r["tau"]
        assert same(num(r["r"]), model[("r_lambda2_" + r["partner"], tau)])
        assert same(num(r["p"]), model[("p_lambda2_" + r["partner"], tau)])
        if r["sign_flip"]:
            a, b = r["sign_flip"].split("->")
            assert b == tau
            assert model[("sign_flip_lambda2_" + r["partner"], r["sign_flip"])] == float(tau)
            flips += 1
    assert flips == sum(1 for (m, _) in model if m.startswith("sign_flip_lambda2_"))


@pytest.mark.parametrize("kind", ["value_space", "fisher"])
def test_long_table_regions_equal_scipy(cli, tmp_path, kind):
    """p2_value_space from a run folder holding a value_space.csv (the long format of analyze
    runs; written here, since value space needs a model), p2_fisher from a fisher run's
    fisher.csv (the same format): the region means and intervals, the Welch p, the trend and
    the fold change are scipy's on the per-layer rows."""
    run = tmp_path / "run"
    if kind == "value_space":
        cli("metrics", "--example", "--analyses", "entropy", "--out", run)
    else:
        os.makedirs(run)
        (run / "run.json").write_text('{"tool": {"name": "sinkscope"}, "subcommand": "fisher", '
                                       '"model": {"name": "m"}}\n')
    rng = np.random.default_rng(3)
    layers = list(range(9))
    values = {"relative_magnitude": rng.uniform(0.1, 0.9, 9),
              "alignment": np.linspace(0.1, 0.5, 9) + rng.normal(0, 0.05, 9)}
    with open(run / f"{kind}.csv", "w", encoding="utf-8") as f:
        f.write("model,checkpoint,layer,head,metric,convention,value\n")
        for m, vs in values.items():
            for l, v in zip(layers, vs):
                f.write(f"m,,{l},-1,{m},principled,{v!r}\n")
            f.write(f"m,,-1,-1,{m},principled,0.5\n")  # the model row: left out
    out = tmp_path / "t"
    cli("tables", run, "--out", out)
    rows = {r["metric"]: r for r in read(out / f"p2_{kind}.csv")}
    assert sorted(rows) == sorted(values)
    for m, vs in values.items():
        r = rows[m]
        early, middle, late = vs[:3], vs[3:6], vs[6:]
        for name, xs in (("early", early), ("middle", middle), ("late", late)):
            lo, hi = stats.t.interval(0.95, 2, loc=np.mean(xs), scale=stats.sem(xs))
            assert num(r[name]) == pytest.approx(np.mean(xs), abs=1e-10)
            assert num(r[name + "_lo"]) == pytest.approx(lo, abs=1e-10)
            assert num(r[name + "_hi"]) == pytest.approx(hi, abs=1e-10)
        assert num(r["peak_ratio"]) == pytest.approx(np.mean(middle) / np.mean(early), abs=1e-10)
        assert num(r["welch_p_early_late"]) == pytest.approx(
            stats.ttest_ind(early, late, equal_var=False).pvalue, abs=1e-10)
        rho = stats.spearmanr(layers, vs)
        assert num(r["spearman_rho"]) == pytest.approx(rho.correlation, abs=1e-10)
        assert num(r["spearman_p"]) == pytest.approx(rho.pvalue, abs=1e-10)
        assert num(r["fold_change"]) == pytest.approx(vs[-1] / vs[0], abs=1e-10)
        assert math.isnan(num(r["fold_p"]))
