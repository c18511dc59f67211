"""The clark2019 analysis against Clark et al.'s pipeline written out here in numpy: head
distances = JS of rows smoothed 0.001/T + 0.999 p over all T key positions (masked ones too),
summed over inputs and query rows (their head_distances.py); the drop variant on the content
composition (sink key removed, renormalised, smoothed over T - 1); the clusterings are scipy's
and the ARI is the contingency-table formula."""

import numpy as np
import pytest
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform

import sinkscope
from conftest import adjusted_rand_index as ari


def js_sum(rows):
    """[N, heads, T, K] smoothed rows -> [heads, heads] sum of JS (nats) over N and T."""
    n = rows.shape[1]
    out = np.zeros((n, n))
    for a in range(n):
        p = rows[:, a:a + 1]
        m = 0.5 * (p + rows)
        js = 0.5 * (p * np.log(p / m) + rows * np.log(rows / m))
        out[a] = js.sum(axis=(0, 2, 3))
    return out




def test_distances_clusters_and_ari_are_clarks():
    x = sinkscope.metrics.example_attention()  # [N, L, H, T, T], causal, sink at position 0
    n_in, n_layers, n_heads, t, _ = x.shape
    r = sinkscope.metrics.analyze(x, analyses=["clark2019"], k=3, linkage="average")
    flat = x.astype(np.float64).reshape(n_in, n_layers * n_heads, t, t)  # as sinkscope reads it
    keep = js_sum(0.001 / t + 0.999 * flat)
    # drop: rows that see the sink (position 0) and another key, i.e. query rows 1..T-1
    content = flat[:, :, 1:, 1:]
    content = content / content.sum(-1, keepdims=True)
    drop = js_sum(0.001 / (t - 1) + 0.999 * content)
    # sums of N * T = 128 row divergences, each a difference of terms up to ~20 nats computed
    # with a vectorised logarithm (<= 4 ulp + 3.1e-15 absolute per term, 16 terms a row): within
    # 128 * 16 * 20 * 1e-15 ~ 4e-11 absolute; numpy's own rounding is of the same order
    for name, want in (("js_keep", keep), ("js_drop", drop)):
        got = r.arrays["clark2019/" + name]
        assert got.shape == want.shape
        assert np.allclose(got, want, rtol=0, atol=1e-10), name
        assert np.all(np.diag(got) == 0)
    table = r["clark2019"]
    labels = {}
    for name, d in (("js_keep", keep), ("js_drop", drop)):
        ours = np.array([c for m, c in zip(table["matrix"], table["cluster"]) if m == name])
        theirs = fcluster(linkage(squareform(d, checks=False), "average"), 3, "maxclust")
        assert ari(ours, theirs) == pytest.approx(1.0, abs=1e-12), name
        labels[name] = ours
    assert r["clark2019_ari"]["ari"][0] == pytest.approx(ari(labels["js_keep"],
                                                              labels["js_drop"]), abs=1e-14)
    rec = r.record["clark2019"]
    assert rec["rows_keep"] == n_in * t and rec["rows_drop"] == n_in * (t - 1)
