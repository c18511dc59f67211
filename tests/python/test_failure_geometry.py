"""failure_geometry.csv against numpy: every head pair's distance (distances/<name>.npy) binned
by the pair's sink mass (the mean of the two heads' heads.csv sink_mass), with the quantiles
numpy.percentile gives; in both head scopes."""

import numpy as np
import pytest

import sinkscope

MATRICES = ["cosine_keep", "cosine_drop", "js_keep", "js_drop", "euclidean_keep",
            "euclidean_drop", "dA", "dA_perp"]


@pytest.mark.parametrize("scope,bins", [("model", 10), ("layer", 4)])
def test_bands_are_numpys(scope, bins):
    x = sinkscope.metrics.example_attention()
    r = sinkscope.metrics.analyze(x, analyses=["compositional", "failure_geometry"], scope=scope,
                                  failure_bins=bins)
    heads = r["heads"]
    n_heads = x.shape[2]
    mass = np.full(x.shape[1] * n_heads, np.nan)
    for layer, head, metric, value in zip(heads["layer"], heads["head"], heads["metric"],
                                          heads["value"]):
        if metric == "sink_mass" and layer >= 0 and head >= 0:
            mass[int(layer) * n_heads + int(head)] = value
    assert np.isfinite(mass).all()
    table = r["failure_geometry"]
    assert list(table["matrix"]) == [m for m in MATRICES for _ in range(bins)]
    i = 0
    for m in MATRICES:
        d = r.arrays["distances/" + m]
        a, b = np.triu_indices(d.shape[0], 1)
        v, s = d[a, b], 0.5 * (mass[a] + mass[b])
        keep = np.isfinite(v)
        v, s = v[keep], s[keep]
        if scope == "layer":  # pairs across layers are not compared
            assert len(v) == x.shape[1] * n_heads * (n_heads - 1) // 2
        k = np.minimum((s * bins).astype(int), bins - 1)
        for j in range(bins):
            assert table["bin_lo"][i] == pytest.approx(j / bins, abs=0)
            got = v[k == j]
            assert table["n_pairs"][i] == len(got), (m, j)
            if len(got):
                want = np.percentile(got, [0, 5, 25, 50, 75, 95, 100])
                ours = [table[c][i] for c in ("min", "q05", "q25", "median", "q75", "q95",
                                              "max")]
                # the same order statistics, interpolated by the same formula: a few ulps
                assert ours == pytest.approx(want, rel=4e-16, abs=1e-300), (m, j)
            i += 1


def test_bins_out_of_range_are_refused():
    x = sinkscope.metrics.example_attention()
    with pytest.raises(ValueError, match="--failure-bins must be in 1..1000, got 0"):
        sinkscope.metrics.analyze(x, analyses=["compositional", "failure_geometry"],
                                  failure_bins=0)
