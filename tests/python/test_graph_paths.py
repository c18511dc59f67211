"""Path length and clustering of the thresholded graphs in graphs.csv against networkx: per input,
layer (head average, and each head with per_head) and threshold, the undirected graph of
W = (B + B^T)/2 without self-loops, B = 1[A > tau], built here from the same attention the
analysis saw; networkx.average_shortest_path_length (connected graphs; on a disconnected one the
table's convention, the mean over the reachable pairs, from networkx's all-pairs lengths),
networkx.average_clustering, and their means over the inputs. Under --compat ruscio2025 the
same against laplacian.ipynb's construction (n <= 30, largest component, 10.r skips)."""

import math

import networkx as nx
import numpy as np
import pytest

import sinkscope

# Per input the values are equal, not close: the path sums are integers and each mean one
# correctly rounded division on both sides; each clustering term is t / (d (d - 1)) of integers,
# summed in node order. The table's mean over at most 8 inputs (values <= n - 1 = 15 here, and
# <= 99 for the 100-token case) is summed in another order than numpy's: at most
# 8 * 2^-53 * 8 * 99 ~ 7e-13 apart. 1e-11 is within the 1e-10 and far below any real
# difference (a graph with one edge more or less moves these by > 1e-4).
TOL = 1e-11
# The graphs must be the same: no entry of the matrices may lie so close to a threshold that the
# analysis's head average (another summation order, a few ulps apart) could fall on the other
# side. Checked on every matrix below.
MARGIN = 1e-12


def principled_matrices(a, n, per_head):
    """{head: [L, n, n]}: rows renormalised to sum 1 (the principled reading), head -1 their
    mean over the heads."""
    x = a[:, :, :n, :n].astype(np.float64)
    x = x / x.sum(axis=-1, keepdims=True)
    out = {-1: x.mean(axis=1)}
    if per_head:
        for h in range(x.shape[1]):
            out[h] = x[:, h]
    return out


def compat_matrices(a, n):
    return {-1: a[:, :, :n, :n].astype(np.float64).mean(axis=1)}


def undirected(m, tau):
    b = m > tau
    u = (b | b.T) & ~np.eye(len(m), dtype=bool)
    g = nx.Graph()
    g.add_nodes_from(range(len(m)))
    g.add_edges_from(zip(*np.nonzero(np.triu(u))))
    return g


def principled_reference(g):
    """(avg_shortest_path, reachable_pair_share, clustering) under the table's conventions."""
    n = g.number_of_nodes()
    clustering = nx.average_clustering(g)
    if nx.is_connected(g) and n > 1:
        return nx.average_shortest_path_length(g), 1.0, clustering
    total, pairs = 0, 0
    for _, lengths in nx.all_pairs_shortest_path_length(g):
        total += sum(lengths.values())
        pairs += len(lengths) - 1
    asp = total / pairs if pairs else math.nan
    return asp, pairs / (n * (n - 1)), clustering


def notebook_reference(m, tau, layer):
    """laplacian.ipynb's (avg_shortest_path, clustering) of one matrix, None where it has none."""
    adj = (m > tau).astype(float)
    density = adj.sum() / adj.size
    if not 0.05 <= density <= 0.95 and layer % 4 != 0:  # 10.r
        return None, None
    if adj.sum() < 2 or len(m) > 30:
        return None, None
    g = nx.from_numpy_array((adj + adj.T) / 2.0)
    if nx.is_connected(g):
        asp = nx.average_shortest_path_length(g)
    else:
        largest = max(nx.connected_components(g), key=len)
        asp = nx.average_shortest_path_length(g.subgraph(largest)) if len(largest) > 1 else None
    return asp, nx.average_clustering(g)


def table(t):
    out = {}
    cols = [t[c] for c in ("layer", "head", "metric", "param", "value", "n")]
    skipped = t["n_skipped"] if "n_skipped" in t else [0] * len(cols[0])
    for layer, head, metric, param, value, n, s in zip(*cols, skipped):
        out[(int(layer), int(head), str(metric), str(param))] = (float(value), int(n), int(s))
    return out


def check_margin(mats, taus):
    for m in mats.values():
        for tau in taus:
            assert np.min(np.abs(m - tau)) > MARGIN, tau


def run_principled(a, lengths=None, per_head=True):
    kw = {} if lengths is None else {"lengths": lengths}
    got = table(sinkscope.metrics.analyze(a, analyses=["graphs"], per_head=per_head,
                                          **kw)["graphs"])
    taus = sorted({p for (_, _, m, p) in got if m == "avg_shortest_path"}, key=float)
    assert len(taus) == 7
    n_inputs, n_layers = a.shape[0], a.shape[1]
    lengths = [a.shape[-1]] * n_inputs if lengths is None else lengths
    want = {}  # (layer, head, metric, tau) -> values over inputs
    for i in range(n_inputs):
        mats = principled_matrices(a[i], lengths[i], per_head)
        check_margin(mats, [float(t) for t in taus])
        for head, per_layer in mats.items():
            for layer in range(n_layers):
                for tau in taus:
                    vals = principled_reference(undirected(per_layer[layer], float(tau)))
                    for metric, v in zip(["avg_shortest_path", "reachable_pair_share",
                                          "clustering"], vals):
                        want.setdefault((layer, head, metric, tau), []).append(v)
    for key, vals in want.items():
        finite = [v for v in vals if math.isfinite(v)]
        value, n, _ = got[key]
        assert n == len(finite), key
        if finite:
            assert abs(value - np.mean(finite)) <= TOL, (key, value, np.mean(finite))
        else:
            assert math.isnan(value), key
    return got, want


def test_example_equals_networkx():
    a = sinkscope.metrics.example_attention()
    got, want = run_principled(a)
    # Not vacuous: disconnected and connected graphs, and clustering that varies.
    shares = [v for (l, h, m, t), vals in want.items() if m == "reachable_pair_share"
              for v in vals]
    assert min(shares) < 1 and max(shares) == 1
    clus = [got[k][0] for k in got if k[2] == "clustering"]
    assert max(clus) - min(clus) > 0.1


def test_larger_graphs_and_own_lengths():
    # 100 tokens (two words a bitset row, nodes with short and long neighbour lists), peaked
    # causal rows, inputs of their own lengths.
    a = peaked_causal(np.random.default_rng(51), (3, 2, 2, 100, 100), 3.0)
    lengths = np.array([100, 63, 81], dtype=np.int64)
    for i, m in enumerate(lengths):
        a[i, :, :, m:, :] = 0
        a[i, :, :, :m, :m] /= a[i, :, :, :m, :m].sum(axis=-1, keepdims=True)
    _, want = run_principled(a, lengths)
    asp = [v for k, vals in want.items() if k[2] == "avg_shortest_path" for v in vals]
    assert max(v for v in asp if math.isfinite(v)) > 2  # paths longer than the star's


def test_threads_do_not_change_the_values():
    a = sinkscope.metrics.example_attention()
    one = sinkscope.metrics.analyze(a, analyses=["graphs"], per_head=True, threads=1)["graphs"]
    two = sinkscope.metrics.analyze(a, analyses=["graphs"], per_head=True, threads=2)["graphs"]
    assert np.array_equal(np.asarray(one["value"]), np.asarray(two["value"]), equal_nan=True)


def peaked_causal(rng, shape, scale, sink=2.0):
    """Causal softmax attention of random scores (a sink on key 0), float32."""
    n = shape[-1]
    z = rng.standard_normal(shape) * scale
    z[..., 0] += sink
    z = np.where(np.tril(np.ones((n, n), dtype=bool)), z, -np.inf)
    a = np.exp(z - z.max(axis=-1, keepdims=True))
    return (a / a.sum(axis=-1, keepdims=True)).astype(np.float32)


def compat_check(a):
    """The table against the notebook on `a`; returns (inputs skipped somewhere, a graph was
    disconnected where the notebook measured it)."""
    got = table(sinkscope.metrics.analyze(a, analyses=["graphs"], compat="ruscio2025")["graphs"])
    assert not any(m == "reachable_pair_share" for (_, _, m, _) in got)
    taus = sorted({p for (_, _, m, p) in got if m == "density"}, key=float)
    n = a.shape[-1]
    want, disconnected = {}, False
    for i in range(a.shape[0]):
        mats = compat_matrices(a[i], n)
        check_margin(mats, [float(t) for t in taus])
        for layer in range(a.shape[1]):
            for tau in taus:
                m = mats[-1][layer]
                asp, clus = notebook_reference(m, float(tau), layer)
                want.setdefault((layer, "avg_shortest_path", tau), []).append(asp)
                want.setdefault((layer, "clustering", tau), []).append(clus)
                if asp is not None and not nx.is_connected(undirected(m, float(tau))):
                    disconnected = True
    skipped_somewhere = False
    for (layer, metric, tau), vals in want.items():
        present = [v for v in vals if v is not None]
        value, cnt, skipped = got[(layer, -1, metric, tau)]
        assert cnt == len(present) and skipped == len(vals) - len(present), (layer, metric, tau)
        skipped_somewhere |= skipped > 0
        if present:
            assert abs(value - np.mean(present)) <= TOL, (layer, metric, tau, value)
        else:
            assert math.isnan(value)
    return skipped_somewhere, disconnected


def test_compat_is_the_notebooks():
    compat_check(sinkscope.metrics.example_attention())
    # Peaked rows over 30 tokens (the notebook's largest n) and 6 layers: cells it skips (10.r:
    # not effective, layer % 4 != 0) and disconnected graphs measured on their largest component.
    skipped, disconnected = compat_check(peaked_causal(np.random.default_rng(7),
                                                       (4, 6, 2, 30, 30), 3.0, sink=4.0))
    assert skipped and disconnected


def two_components():
    """One bidirectional input of 11 tokens: tokens 0-6 attend to their path neighbours (a path
    P7 at every threshold below 0.5), tokens 7-10 uniformly to each other (K4)."""
    a = np.zeros((1, 1, 1, 11, 11), dtype=np.float32)
    for i in range(7):
        nb = [j for j in (i - 1, i + 1) if 0 <= j < 7]
        for j in nb:
            a[0, 0, 0, i, j] = 1.0 / len(nb)
    a[0, 0, 0, 7:, 7:] = 0.25
    return a


def test_two_components_of_more_than_one_token():
    # Closed forms: P7's mean distance (7 + 1) / 3, K4's 1. Principled: the mean over the
    # reachable pairs, (42 * 8/3 + 12 * 1) / (42 + 12), and 54 of 110 pairs; compat: the largest
    # component's 8/3 (a component of one token would give the same either way).
    a = two_components()
    got = table(sinkscope.metrics.analyze(a, analyses=["graphs"])["graphs"])
    assert got[(0, -1, "avg_shortest_path", "0.1")][0] == pytest.approx(124 / 54, abs=TOL)
    assert got[(0, -1, "reachable_pair_share", "0.1")][0] == pytest.approx(54 / 110, abs=TOL)
    # clustering: 0 on the path, 1 on K4
    assert got[(0, -1, "clustering", "0.1")][0] == pytest.approx(4 / 11, abs=TOL)
    compat = table(sinkscope.metrics.analyze(a, analyses=["graphs"],
                                             compat="ruscio2025")["graphs"])
    assert compat[(0, -1, "avg_shortest_path", "0.1")][0] == pytest.approx(8 / 3, abs=TOL)
    compat_check(a)


def test_compat_has_none_above_30_tokens():
    a = np.zeros((2, 2, 1, 31, 31), dtype=np.float32)
    a[..., 0] = 1.0  # every row on key 0: a connected star
    got = table(sinkscope.metrics.analyze(a, analyses=["graphs"], compat="ruscio2025")["graphs"])
    rows = [v for (l, h, m, p), v in got.items() if m in ("avg_shortest_path", "clustering")]
    assert rows and all(n == 0 and s == 2 and math.isnan(v) for v, n, s in rows)
    # Principled: the star's mean distance 2 (n - 1) / n, no triangle.
    star = table(sinkscope.metrics.analyze(a, analyses=["graphs"])["graphs"])
    assert star[(0, -1, "avg_shortest_path", "0.2")][0] == pytest.approx(2 * 30 / 31, abs=TOL)
    assert star[(0, -1, "clustering", "0.2")][0] == 0
