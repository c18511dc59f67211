"""`sinkscope theorem1` against an independent numpy implementation of the triple family, the
spec 1 metrics and the spec 3 verdicts (docs/metrics.md "theorem1.csv"): the same measures, the
theorem's claim, and the command line's refusals."""

import csv
import json
import os

import numpy as np
import pytest

METRICS = [("cosine", "keep"), ("js", "keep"), ("euclidean", "keep"),
           ("cosine", "drop"), ("js", "drop"), ("euclidean", "drop"),
           ("dA", "keep"), ("dA_perp", "drop"), ("sink_term", "keep")]
COLUMNS = ["metric", "convention", "reversal_measure", "tie_measure", "n_points",
           "closed_form_measure"]


def family(parts, grid, t_max):
    """The rows p(s, t) and p_rev(s, t), [grid_s, grid_t, D], sink at part 0."""
    s = (np.arange(grid) + 0.5) / grid
    t = (np.arange(grid) + 0.5) * t_max / grid
    x = np.arange(parts - 1) / (parts - 2)
    ramp = np.exp(t[:, None] * x[None, :])                          # [t, D-1]
    pi = ramp / ramp.sum(axis=1, keepdims=True)
    def rows(content):
        p = np.empty((grid, grid, parts))
        p[:, :, 0] = s[:, None]
        p[:, :, 1:] = (1 - s)[:, None, None] * content[None, :, :]
        return p
    return s, t, rows(pi), rows(pi[:, ::-1])


def closure(x):
    return x / x.sum(axis=-1, keepdims=True)


def clr(x):
    lx = np.log(x)
    return lx - lx.mean(axis=-1, keepdims=True)


def distance(name, x, y):
    if name == "cosine":
        return 1 - (x * y).sum(-1) / np.sqrt((x * x).sum(-1) * (y * y).sum(-1))
    if name == "js":
        m = (x + y) / 2
        return np.maximum(0, 0.5 * (x * np.log(x / m) + y * np.log(y / m)).sum(-1))
    if name in ("euclidean", "dA", "dA_perp"):
        if name != "euclidean":
            x, y = clr(x), clr(y)
        return np.sqrt(((x - y) ** 2).sum(-1))
    if name == "sink_term":
        def balance(p):  # sqrt((D-1)/D) ln(p_s / g(p_{-s}))
            d = p.shape[-1]
            return np.sqrt((d - 1) / d) * (np.log(p[..., 0]) - np.log(p[..., 1:]).mean(-1))
        return np.abs(balance(x) - balance(y))
    raise ValueError(name)


def reference(parts, grid, t_max):
    """Per metric: points whose verdict is surely a reversal, surely not, and too close to call
    (|d(a,b) - d(a,c)| within 1e-9 relative + 1e-13, where rounding may decide); and the count of
    the dA closed form."""
    s, t, p, p_rev = family(parts, grid, t_max)
    # [s_a, s_b, t, D]: a = p[s_a, t], b = p[s_b, t], c = p_rev[s_a, t]
    a = np.broadcast_to(p[:, None, :, :], (grid, grid, grid, parts))
    b = np.broadcast_to(p[None, :, :, :], (grid, grid, grid, parts))
    c = np.broadcast_to(p_rev[:, None, :, :], (grid, grid, grid, parts))
    out = {}
    for name, conv in METRICS:
        if conv == "drop" or name == "dA_perp":
            x, y, z = closure(a[..., 1:]), closure(b[..., 1:]), closure(c[..., 1:])
        else:
            x, y, z = a, b, c
        d_ab, d_ac = distance(name, x, y), distance(name, x, z)
        diff = d_ab - d_ac
        tol = 1e-9 * np.maximum(np.abs(d_ab), np.abs(d_ac)) + 1e-13
        out[(name, conv)] = (int((diff > tol).sum()), int((diff < -tol).sum()),
                             int((np.abs(diff) <= tol).sum()))
    # Closed form: |b(a) - b(b)| > dA_perp(pi, pi_rev), each from its definition on the rows.
    sink_gap = distance("sink_term", a, b)
    content_gap = distance("dA", closure(a[..., 1:]), closure(c[..., 1:]))
    closed = int((sink_gap > content_gap).sum())
    margin = np.abs(sink_gap - content_gap) / np.maximum(sink_gap, content_gap)
    return out, closed, float(margin.min())


def read_table(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == COLUMNS
    return {(r[0], r[1]): r for r in rows[1:]}


def run_theorem1(cli, out, *args):
    r = cli("theorem1", "--out", out, *args)
    return read_table(os.path.join(out, "theorem1.csv")), r


@pytest.mark.parametrize("parts,grid,t_max", [(8, 64, 4.0), (3, 20, 2.0), (12, 16, 9.0),
                                              (5, 9, 0.5)])
def test_measures_equal_the_numpy_reference(tmp_path, cli, parts, grid, t_max):
    args = [] if (parts, grid, t_max) == (8, 64, 4.0) else [
        "--parts", parts, "--grid", grid, "--t-max", t_max]
    table, _ = run_theorem1(cli, tmp_path / "out", *args)
    ref, closed, margin = reference(parts, grid, t_max)
    n = grid ** 3
    assert [k for k in table] == METRICS
    for key in METRICS:
        row = table[key]
        assert int(row[4]) == n
        reversed_, tied = round(float(row[2]) * n), round(float(row[3]) * n)
        assert float(row[2]) == reversed_ / n and float(row[3]) == tied / n
        sure_rev, sure_not, unclear = ref[key]
        assert sure_rev + sure_not + unclear == n
        # Exact wherever the reference's verdict is clear; unclear points may go either way.
        assert sure_rev <= reversed_ <= sure_rev + unclear, key
        assert tied <= unclear, key
        if key != ("sink_term", "keep"):
            assert unclear == 0, key  # so the check above is an equality
    # Theorem 1: every keep metric and dA reverse on a set of positive measure, dA_perp and every
    # drop metric on none (and without ties).
    for key, row in table.items():
        if key[1] == "keep":
            assert float(row[2]) > 0, key
        else:
            assert float(row[2]) == 0 and float(row[3]) == 0, key
    # dA equals its closed form, counted independently here, exactly.
    assert margin > 1e-9
    assert float(table[("dA", "keep")][5]) == closed / n
    assert float(table[("dA", "keep")][2]) == closed / n
    for key, row in table.items():
        if key != ("dA", "keep"):
            assert row[5] == "nan", key
    # The sink term reverses at every point off the diagonal s_a = s_b.
    assert float(table[("sink_term", "keep")][2]) == (n - grid * grid) / n


def test_console_and_run_json(tmp_path, cli):
    table, r = run_theorem1(cli, tmp_path / "out", "--grid", 8)
    lines = r.stdout.splitlines()
    for name, conv in METRICS:
        line = next(l for l in lines if l.split()[:2] == [name, conv])
        assert f"{float(table[(name, conv)][2]):.6f}" in line
    assert lines[-1] == f"wrote {tmp_path / 'out'}"
    record = json.load(open(tmp_path / "out" / "run.json"))
    assert record["options"] == {"parts": 8, "grid": 8, "t_max": 4.0}
    assert record["theorem1"]["n_points"] == 512


def test_existing_output_is_refused_or_replaced_keeping_foreign_files(tmp_path, cli):
    out = tmp_path / "out"
    run_theorem1(cli, out, "--grid", 4)
    (out / "notes.txt").write_text("mine")
    r = cli("theorem1", "--grid", 4, "--out", out, check=False)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    table, _ = run_theorem1(cli, out, "--grid", 6, "--overwrite")
    assert int(table[("dA", "keep")][4]) == 216
    assert (out / "notes.txt").read_text() == "mine"
    other = tmp_path / "other"
    other.mkdir()
    (other / "data.csv").write_text("x")
    r = cli("theorem1", "--grid", 4, "--out", other, "--overwrite", check=False)
    assert r.returncode == 2 and (other / "data.csv").read_text() == "x"
    assert sorted(os.listdir(other)) == ["data.csv"]


@pytest.mark.parametrize("args", [["--parts", "2"], ["--parts", "x"], ["--grid", "0"],
                                  ["--grid", "-4"], ["--t-max", "0"], ["--t-max", "-1"],
                                  ["--t-max", "nan"], ["--t-max", "inf"], ["--bogus"]])
def test_bad_options_are_one_line_usage_errors(tmp_path, cli, args):
    r = cli("theorem1", "--out", tmp_path / "out", *args, check=False)
    assert r.returncode == 2, (args, r.stderr)
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("sinkscope: error:"), r.stderr
    assert not (tmp_path / "out").exists()
