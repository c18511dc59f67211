"""Spec section 8 (the analyses of `sinkscope metrics` computed from attention alone) written with
numpy/scipy/networkx/gudhi the way a careful researcher would, and readers of sinkscope's
section 8 outputs, for bench/compare_python.py.

Every function reads the (N, L, H, T, T) float32 attention file itself, closes each row over its
visible keys in float64 (spec 10.a; causal rows: keys j <= i) and returns a dict
key -> result, where a key names one output cell of sinkscope (table, metric, param, layer, head,
and the column: `value` / `std` over inputs, `n` / `n_nonfinite` integer counts). The summary over
inputs is the one of docs/metrics.md: mean and population std of the finite per-input values.

Not covered (they need a model): value space, the transformation magnitude and the
geometric-semantic alignment (hidden states), Fisher, token strings (tokens are keyed by
position `#j`, as `sinkscope metrics` does for an attention file without strings).
"""

import collections
import csv
import json
import math
import os
import warnings

import networkx as nx
import numpy as np
import scipy.integrate
import scipy.linalg
import scipy.special
import scipy.stats

# networkx 2.8: laplacian_matrix's future return type; the dense spectrum is unaffected
warnings.filterwarnings("ignore", category=FutureWarning, module="networkx")

# spec 8 / 10.i-10.n defaults (include/sinkscope/metrics/*.hpp hold the same numbers)
GRAPH_THRESHOLDS = [0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2]
EFFECTIVE_LO, EFFECTIVE_HI = 0.05, 0.95
SINK_PERCENTILES = [0.8, 0.9, 0.95]
LONG_BAR = 0.05
BETTI_GRID = [g / 100 for g in range(101)]
SPECIALISED_SHARE, SPECIALISED_MIN_INPUTS = 0.3, 5
CENTRALIZED_SHARE_FIRST, CENTRALIZED_MAX_REFERENCE_COUNT = 0.9, 1.2

# Metrics whose per-input values are integers: their `value` (a mean over inputs) must agree
# exactly, so they count as mismatches rather than as a float difference.
INTEGER_METRICS = {"n_nodes", "effective", "n_bars_dim0", "n_bars_dim1", "n_essential_dim0",
                   "n_essential_dim1", "n_long_dim0", "n_long_dim1", "betti0", "betti1",
                   "n_sinks", "rows_excluded", "specialised"}

# What the comparison found beyond rounding, printed under the table (bench/README.md).
NOTES = [
    "kl: rows without a visible non-sink key are left out of kl_before as well as kl_after "
    "(sinkscope's default --kl-rows paired; the Python side does the same, a paired "
    "difference); spec 8 read literally ('KL_h = mean over rows') is --kl-rows all, where "
    "kl_reduction is ~12% lower here (layer 5 of input 0, t = 0.8: 0.071 instead of 0.081). On "
    "causal rows the received mass summed over rows favours early keys: S_t is mostly the "
    "prefix 0..k-1, whose k rows are excluded",
]

SECTION8 = ["graphs", "topology", "kl", "spectra", "entropy", "tokens", "frame"]
NOT_COVERED = ("value space (`value`: hidden states), transformation magnitude and alignment, "
               "Fisher, token strings (tokens keyed by position here), compat ruscio2025, "
               "--per-head, the statistics analysis")


def param_key(p):
    """sinkscope writes params with std::to_chars (shortest round trip) = Python's repr."""
    return repr(float(p)) if isinstance(p, float) else str(p)


def closed_layer(att, inp, layer):
    """[H, T, T] float64 rows closed over their visible keys j <= i (10.a), zeros above."""
    a = np.tril(np.asarray(att[inp, layer], dtype=np.float64))
    return a / a.sum(-1, keepdims=True)


class Summary:
    """Per-input values of every cell, summarised as docs/metrics.md says: mean and ddof-0 std
    of the finite values, n = finite inputs, n_nonfinite the others."""

    def __init__(self):
        self.values = collections.defaultdict(list)

    def put(self, table, layer, head, metric, param, v):
        self.values[(table, layer, head, metric, param_key(param))].append(float(v))

    def results(self):
        out = {}
        for key, vs in self.values.items():
            v = np.asarray(vs)
            fin = v[np.isfinite(v)]
            name = "/".join(map(str, key))
            out[name + "/value"] = fin.mean() if fin.size else math.nan
            out[name + "/std"] = fin.std() if fin.size else math.nan
            out[name + "/n"] = np.int64(fin.size)
            out[name + "/n_nonfinite"] = np.int64(v.size - fin.size)
        return out


# ---- graphs (spec 8 "Thresholded graphs", 10.i) ------------------------------------------------

def gini_mean_difference(x):
    """Gini as the mean absolute difference over twice the mean (0 when all are 0)."""
    x = np.asarray(x, dtype=np.float64)
    if x.sum() <= 0:
        return 0.0
    return np.abs(x[:, None] - x[None, :]).sum() / (2 * len(x) ** 2 * x.mean())


def graph_metrics(avg, tau):
    n = len(avg)
    b = (avg > tau).astype(np.float64)  # with self-loops
    density = b.sum() / n ** 2
    # Laplacian spectrum of W = (B + B^T)/2 (one-way edge 1/2, two-way 1); self-loops dropped,
    # they cancel in L = D - W anyway.
    w = 0.5 * (b + b.T)
    np.fill_diagonal(w, 0.0)
    undirected = nx.from_numpy_array(w)
    ev = np.sort(nx.laplacian_spectrum(undirected, weight="weight"))
    # in-degrees without self-loops (10.i)
    directed = nx.from_numpy_array(b, create_using=nx.DiGraph)
    directed.remove_edges_from(list(nx.selfloop_edges(directed)))
    deg = np.array([d for _, d in sorted(directed.in_degree())], dtype=np.float64)
    d_max = deg.max()
    star = d_max / max(1, n - 1)
    g = gini_mean_difference(deg)
    return {"density": density, "lambda2": ev[1], "laplacian_gap": ev[2] - ev[1],
            "star_basic": star, "star_combined": 0.3 * star + 0.7 * g, "gini": g,
            "centralization": (d_max - deg).sum() / (n - 1) ** 2 if n > 1 else 0.0,
            "degree_variance": deg.var(), "n_nodes": n}


def graphs(path):
    att = np.load(path, mmap_mode="r")
    n_inputs, n_layers = att.shape[:2]
    s = Summary()
    density = collections.defaultdict(list)
    for inp in range(n_inputs):
        for l in range(n_layers):
            avg = closed_layer(att, inp, l).mean(0)
            for tau in GRAPH_THRESHOLDS:
                for metric, v in graph_metrics(avg, tau).items():
                    s.put("graphs", l, -1, metric, tau, v)
                    if metric == "density":
                        density[(l, tau)].append(v)
    # effective on the density averaged over inputs (10.i); the score = share of layers
    for tau in GRAPH_THRESHOLDS:
        eff = [EFFECTIVE_LO <= np.mean(density[(l, tau)]) <= EFFECTIVE_HI for l in range(n_layers)]
        for l in range(n_layers):
            s.put("graphs", l, -1, "effective", tau, float(eff[l]))
        s.put("graphs", -1, -1, "effectiveness_score", tau, np.mean(eff))
    return s.results()


# ---- topology (spec 8 "Persistent homology", 10.j) ---------------------------------------------

def rips_diagram(avg):
    """Vietoris-Rips persistence of d = 1 - max(A_ij, A_ji), zero diagonal, dimensions 0 and 1
    over Z/2 with GUDHI; zero-length bars dropped (min_persistence 0). Rows (dim, birth, death)
    sorted."""
    import gudhi
    d = 1.0 - np.maximum(avg, avg.T)
    np.fill_diagonal(d, 0.0)
    st = gudhi.RipsComplex(distance_matrix=d).create_simplex_tree(max_dimension=2)
    st.compute_persistence(homology_coeff_field=2, min_persistence=0.0)
    bars = [(dim, b, e) for dim in (0, 1) for b, e in st.persistence_intervals_in_dimension(dim)]
    return np.array(sorted(bars), dtype=np.float64).reshape(-1, 3)


def topology(path):
    att = np.load(path, mmap_mode="r")
    n_inputs, n_layers = att.shape[:2]
    s = Summary()
    out = {}
    for inp in range(n_inputs):
        for l in range(n_layers):
            bars = rips_diagram(closed_layer(att, inp, l).mean(0))
            out["diagram/%d/%d" % (inp, l)] = bars
            for dim in (0, 1):
                bd = bars[bars[:, 0] == dim]
                finite = bd[np.isfinite(bd[:, 2])]
                pers = finite[:, 2] - finite[:, 1]
                sfx = "_dim%d" % dim
                # n_bars = len(diagram), finite + essential bars (docs/metrics.md, topology.hpp;
                # the compat Betti numbers of PAPERS.md B.3).
                s.put("topology", l, -1, "n_bars" + sfx, "", len(bd))
                s.put("topology", l, -1, "n_essential" + sfx, "", len(bd) - len(finite))
                s.put("topology", l, -1, "total_persistence" + sfx, "", pers.sum())
                s.put("topology", l, -1, "n_long" + sfx, "", np.count_nonzero(pers > LONG_BAR))
                s.put("topology", l, -1, "mean_persistence" + sfx, "",
                      pers.mean() if pers.size else math.nan)
                s.put("topology", l, -1, "max_persistence" + sfx, "",
                      pers.max() if pers.size else math.nan)
                for eps in BETTI_GRID:  # birth <= eps < death, infinite bars alive (10.j)
                    s.put("betti", l, -1, "betti%d" % dim, eps,
                          np.count_nonzero((bd[:, 1] <= eps) & (eps < bd[:, 2])))
    out.update(s.results())
    return out


# ---- kl (spec 8 "Sink removal KL", 10.k) -------------------------------------------------------

def kl_layer(a, t):
    """a: [H, T, T] closed causal rows. Sink set S_t = keys whose received mass (over heads and
    rows) is >= the t-percentile (numpy linear); rows that keep no visible key outside S_t are
    excluded from both KL means (a paired difference over the same rows)."""
    n_heads, n, _ = a.shape
    incoming = a.sum((0, 1))
    sink = incoming >= np.percentile(incoming, 100 * t)
    visible = np.tril(np.ones((n, n), dtype=bool))
    free = visible & ~sink[None, :]  # [T, T]
    n_free = free.sum(1)
    used = n_free > 0
    before = scipy.special.rel_entr(a, a.mean(0)[None]).sum(-1)  # [H, T]
    cut = np.where(free[None], a, 0.0)
    rest = cut.sum(-1, keepdims=True)
    uniform = free / np.maximum(n_free, 1)[:, None]
    p = np.where(rest > 0, cut / np.where(rest > 0, rest, 1.0), uniform[None])
    after = scipy.special.rel_entr(p, p.mean(0)[None]).sum(-1)
    kb, ka = before[:, used].mean(), after[:, used].mean()
    return {"kl_before": kb, "kl_after": ka, "kl_reduction": kb - ka,
            "sink_concentration": a[:, :, sink].sum(-1).mean(), "n_sinks": sink.sum(),
            "rows_excluded": np.count_nonzero(~used)}


def kl(path):
    att = np.load(path, mmap_mode="r")
    n_inputs, n_layers = att.shape[:2]
    s = Summary()
    for inp in range(n_inputs):
        for l in range(n_layers):
            a = closed_layer(att, inp, l)
            for t in SINK_PERCENTILES:
                for metric, v in kl_layer(a, t).items():
                    s.put("kl", l, -1, metric, t, v)
            # direct sink mass on s = key 0 (`--sink first`, the decoder default): every row
            # sees it (10.k)
            s.put("kl", l, -1, "sink_mass_all_rows", "0", a[:, :, 0].mean())
    return s.results()


# ---- spectra (spec 8 "Random-matrix spectra", 10.l) --------------------------------------------

def mp_cdf(x):
    """Marchenko-Pastur CDF, gamma = 1 (density sqrt((4 - x) x) / (2 pi x) on [0, 4]): with
    x = 4 sin^2(theta) the integral is (2 theta + sin 2 theta) / pi."""
    x = np.clip(np.asarray(x, dtype=np.float64), 0.0, 4.0)
    theta = np.arcsin(np.sqrt(x / 4))
    return (2 * theta + np.sin(2 * theta)) / np.pi


def _check_mp_cdf():
    for x in (0.01, 0.5, 1.0, 2.0, 3.9):
        q = scipy.integrate.quad(lambda u: np.sqrt((4 - u) * u) / (2 * np.pi * u), 0, x)[0]
        assert abs(q - mp_cdf(x)) < 1e-8, (x, q, mp_cdf(x))


def spectra(path):
    _check_mp_cdf()
    att = np.load(path, mmap_mode="r")
    n_inputs, n_layers = att.shape[:2]
    s = Summary()
    for inp in range(n_inputs):
        for l in range(n_layers):
            sv2 = scipy.linalg.svdvals(closed_layer(att, inp, l).mean(0)) ** 2  # descending
            s.put("spectra", l, -1, "sigma1_sq", "", sv2[0])
            s.put("spectra", l, -1, "stable_rank", "", sv2.sum() / sv2[0])
            s.put("spectra", l, -1, "participation_ratio", "", sv2.sum() ** 2 / (sv2 ** 2).sum())
            bulk = sv2[1:]
            ks = (scipy.stats.kstest(bulk / bulk.mean(), mp_cdf).statistic
                  if bulk.mean() > 0 else math.nan)
            s.put("spectra", l, -1, "mp_ks", "", ks)
    return s.results()


# ---- entropy (spec 8 "Attention entropy", 10.m) ------------------------------------------------

def entropy(path):
    att = np.load(path, mmap_mode="r")
    n_inputs, n_layers, n_heads = att.shape[:3]
    s = Summary()
    for inp in range(n_inputs):
        for l in range(n_layers):
            a = closed_layer(att, inp, l)
            per_head = scipy.stats.entropy(a, axis=-1).mean(-1)  # nats, mean over all T rows
            for h in range(n_heads):
                s.put("entropy", l, h, "entropy_all_rows", "", per_head[h])
            s.put("entropy", l, -1, "entropy_all_rows", "",
                  scipy.stats.entropy(a.mean(0), axis=-1).mean())
    return s.results()


# ---- tokens and frame (spec 8 "Token specialisation", "Reference-frame type", 10.m, 10.n) ------

def top_keys(path):
    """[N, L, H] key with the largest column mean over all T rows (first maximum)."""
    att = np.load(path, mmap_mode="r")
    n_inputs, n_layers = att.shape[:2]
    return np.array([[closed_layer(att, inp, l).mean(1).argmax(-1) for l in range(n_layers)]
                     for inp in range(n_inputs)])


def position_class(j, n):
    return "first" if j == 0 else "last" if j == n - 1 else "other"


def tokens(path):
    att = np.load(path, mmap_mode="r")
    n_inputs, n_layers, n_heads, n = att.shape[:4]
    top = top_keys(path)
    s = Summary()
    out = {}
    modal = collections.defaultdict(collections.Counter)  # layer -> modal key -> heads
    for l in range(n_layers):
        for h in range(n_heads):
            for inp in range(n_inputs):
                cls = position_class(top[inp, l, h], n)
                for c in ("first", "last", "other"):
                    s.put("tokens", l, h, "share_" + c, "", float(cls == c))
            counts = collections.Counter("#%d" % j for j in top[:, l, h])
            for key, cnt in counts.items():
                out["token_keys/%d/%d/%s/count" % (l, h, key)] = np.int64(cnt)
                out["token_keys/%d/%d/%s/share" % (l, h, key)] = cnt / n_inputs
            # the modal key: most inputs, ties to the lexicographically smallest key string
            key = min(counts, key=lambda k: (-counts[k], k))
            consistency = counts[key] / n_inputs
            s.put("tokens", l, h, "consistency", key, consistency)
            s.put("tokens", l, h, "specialised", "", float(
                consistency >= SPECIALISED_SHARE and n_inputs >= SPECIALISED_MIN_INPUTS))
            modal[l][key] += 1
        for key, cnt in modal[l].items():
            s.put("tokens", l, -1, "heads_modal_share", key, cnt / n_heads)
    out.update(s.results())
    return out


def reference_count(avg):
    """Value-space reference set size on the closed head average (spec 8 "Value space"):
    keys with column mean > 0.1, else the top 10% (at least 1), at most 30% of n."""
    n = len(avg)
    closed = avg / avg.sum(1, keepdims=True)
    count = int(np.count_nonzero(closed.mean(0) > 0.1))
    if count == 0:
        count = max(1, int(0.1 * n))
    return min(count, max(1, int(0.3 * n)))


def frame(path):
    att = np.load(path, mmap_mode="r")
    n_inputs, n_layers, n_heads, n = att.shape[:4]
    top = top_keys(path)
    mid = n_layers // 3  # middle and late layers (10.n)
    counts = np.zeros((n_layers, 3), dtype=np.int64)  # first, last, other
    classes = ["first", "last", "other"]
    for inp in range(n_inputs):
        for l in range(n_layers):
            for h in range(n_heads):
                counts[l, classes.index(position_class(top[inp, l, h], n))] += 1
    refs = [reference_count(closed_layer(att, inp, l).mean(0))
            for inp in range(n_inputs) for l in range(mid, n_layers)]
    share = counts[mid:, 0].sum() / counts[mid:].sum()
    mean_ref = float(np.mean(refs))
    modal = [classes[int(np.argmax(c))] for c in counts]  # ties: first < last < other
    if share >= CENTRALIZED_SHARE_FIRST and mean_ref < CENTRALIZED_MAX_REFERENCE_COUNT:
        verdict = "centralized"
    elif "first" in modal and "last" in modal:
        verdict = "bidirectional"
    else:
        verdict = "distributed"
    out = {"frame/verdict": verdict, "frame/share_first_mid_late": share,
           "frame/mean_reference_count": mean_ref, "frame/mid_late_first_layer": np.int64(mid)}
    for l in range(n_layers):
        for k, c in enumerate(classes):
            out["frame/layer/%d/%s" % (l, c)] = counts[l, k]
        out["frame/layer/%d/modal" % l] = modal[l]
    return out


PYTHON = {"graphs": graphs, "topology": topology, "kl": kl, "spectra": spectra,
          "entropy": entropy, "tokens": tokens, "frame": frame}


# ---- sinkscope's outputs -----------------------------------------------------------------------

def read_sinkscope(out_dir, analysis):
    """The cells of sinkscope's tables for one reference-frame analysis, keyed like Summary."""
    res = {}
    tables = {"topology": ["topology", "betti"]}.get(analysis, [analysis])
    if analysis == "frame":
        with open(os.path.join(out_dir, "frame.json")) as f:
            j = json.load(f)
        res["frame/verdict"] = j["verdict"]
        res["frame/share_first_mid_late"] = float(j["share_first_mid_late"])
        res["frame/mean_reference_count"] = float(j["mean_reference_count"])
        res["frame/mid_late_first_layer"] = np.int64(j["mid_late_first_layer"])
        for row in j["layers"]:
            for c in ("first", "last", "other"):
                res["frame/layer/%d/%s" % (row["layer"], c)] = np.int64(row[c])
            res["frame/layer/%d/modal" % row["layer"]] = row["modal"]
        return res
    for table in tables:
        with open(os.path.join(out_dir, table + ".csv"), newline="") as f:
            for row in csv.DictReader(f):
                p = row["param"]
                try:
                    p = float(p) if not p.startswith("#") and p != "" else p
                except ValueError:
                    pass
                if row["metric"] == "sink_mass_all_rows":
                    p = row["param"]
                name = "/".join(map(str, (table, int(row["layer"]), int(row["head"]),
                                          row["metric"], param_key(p))))
                res[name + "/value"] = float(row["value"])
                res[name + "/std"] = float(row["std"])
                res[name + "/n"] = np.int64(row["n"])
                res[name + "/n_nonfinite"] = np.int64(row["n_nonfinite"])
    if analysis == "tokens":
        with open(os.path.join(out_dir, "token_keys.csv"), newline="") as f:
            for row in csv.DictReader(f):
                k = "token_keys/%s/%s/%s" % (row["layer"], row["head"], row["key"])
                res[k + "/count"] = np.int64(row["count"])
                res[k + "/share"] = float(row["share"])
    if analysis == "topology":
        folder = os.path.join(out_dir, "diagrams")
        for name in os.listdir(folder):
            # input<i>_layer<l>_avg.npy: [k, 3] dim, birth, death
            parts = name[:-len(".npy")].split("_")
            if parts[2] != "avg":
                continue
            bars = np.load(os.path.join(folder, name))
            res["diagram/%s/%s" % (parts[0][5:], parts[1][5:])] = np.array(
                sorted(map(tuple, bars)), dtype=np.float64).reshape(-1, 3)
    return res


def compare(ours, theirs):
    """(max |difference| of real results but the std column, where, the same over the std
    column, where, integer/string mismatches, which metrics mismatch, cells compared). A cell
    on one side only counts as a mismatch. Integer-valued metrics (INTEGER_METRICS) compare
    their `value` exactly; NaN equals NaN."""
    worst, worst_key, bad, bad_metrics, cells = 0.0, "", 0, collections.Counter(), 0
    worst_std, worst_std_key = 0.0, ""
    for key in sorted(set(ours) | set(theirs)):
        cells += 1
        metric = key.split("/")[3] if key.count("/") >= 4 else key.split("/")[0]
        if key not in ours or key not in theirs:
            bad += 1
            bad_metrics[("missing in sinkscope: " if key not in ours else
                         "missing in Python: ") + key] += 1
            continue
        a, b = ours[key], theirs[key]
        if isinstance(a, str) or isinstance(b, str):
            if a != b:
                bad += 1
                bad_metrics[key] += 1
            continue
        a, b = np.asarray(a), np.asarray(b)
        exact = (a.dtype.kind in "iu" and b.dtype.kind in "iu") or (
            metric in INTEGER_METRICS and key.endswith("/value"))
        if a.shape != b.shape:
            bad += 1
            bad_metrics["shape " + key.rsplit("/", 2)[0]] += 1
            continue
        a, b = a.astype(np.float64), b.astype(np.float64)
        with np.errstate(invalid="ignore"):  # inf - inf
            diff = np.abs(a - b)
        diff = np.where((np.isnan(a) & np.isnan(b)) | (a == b), 0.0, diff)
        if np.any(np.isnan(diff)):
            diff = np.where(np.isnan(diff), np.inf, diff)
        if exact:
            n = int(np.count_nonzero(diff > 1e-9))
            if n:
                bad += n
                bad_metrics[metric] += n
        elif diff.size and key.endswith("/std"):
            d = float(diff.max())
            if d > worst_std:
                worst_std, worst_std_key = d, key
        elif diff.size:
            d = float(diff.max())
            if d > worst:
                worst, worst_key = d, key
    return worst, worst_key, worst_std, worst_std_key, bad, bad_metrics, cells
