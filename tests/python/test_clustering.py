"""Head clustering (spec 4) against independent computations: every linkage's flat clusters in
clusters.csv are the partition scipy.cluster.hierarchy gives on the same distance matrix, and
ari.csv holds the adjusted Rand index computed here from its contingency-table definition
(Hubert & Arabie 1985)."""

import numpy as np
import pytest
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform

import sinkscope
from conftest import adjusted_rand_index as ari

K = 4




@pytest.fixture(scope="module")
def example():
    return sinkscope.metrics.example_attention()


@pytest.mark.parametrize("method", ["average", "complete", "single", "ward"])
def test_every_linkage_is_scipys(example, method):
    r = sinkscope.metrics.analyze(example, analyses=["compositional", "heads"], linkage=method,
                                  k=K)
    assert r.record["head_analyses"]["clustering"] == method + " linkage"
    clusters = r["clusters"]
    n_heads = example.shape[2]
    matrices = sorted(set(clusters["matrix"]))
    assert len(matrices) >= 8
    labels = {}
    for matrix in matrices:
        d = r.arrays["distances/" + matrix]
        rows = [i for i, m in enumerate(clusters["matrix"]) if m == matrix]
        ours = np.empty(d.shape[0], dtype=np.int64)
        for i in rows:
            ours[int(clusters["layer"][i]) * n_heads + int(clusters["head"][i])] = \
                int(clusters["cluster"][i])
        z = linkage(squareform(d, checks=False), method)
        theirs = fcluster(z, K, criterion="maxclust")
        assert len(set(theirs)) == K, f"{matrix}: scipy cut has ties"
        # the same partition: the labels are names, so compare the ARI (1 iff identical)
        assert ari(ours, theirs) == pytest.approx(1.0, abs=1e-12), matrix
        labels[matrix] = ours
    table = r["ari"]
    assert len(table["first"]) == len(matrices) * (len(matrices) - 1) // 2
    for first, second, value in zip(table["first"], table["second"], table["ari"]):
        # a handful of float64 operations on pair counts <= C(16, 2): within a few ulps
        assert value == pytest.approx(ari(labels[first], labels[second]), abs=1e-14)


def test_a_linkage_outside_the_four_is_refused(example):
    with pytest.raises(ValueError, match="--linkage must be average, complete, single or ward"):
        sinkscope.metrics.analyze(example, analyses=["compositional", "heads"],
                                  linkage="centroid")


def test_any_two_clusterings_by_name(example):
    """sinkscope.metrics.cluster and adjusted_rand_index on arrays: the clusterings of two runs
    (here: two linkages) compared by ARI, as scipy and the formula written here give it."""
    runs = {m: sinkscope.metrics.analyze(example, analyses=["compositional", "heads"], k=K,
                                         linkage=m) for m in ("average", "ward")}
    d = runs["average"].arrays["distances/js_keep"]
    for method in ("average", "ward"):
        ours = sinkscope.metrics.cluster(d, K, method)
        theirs = fcluster(linkage(squareform(d, checks=False), method), K, criterion="maxclust")
        assert ari(ours, theirs) == pytest.approx(1.0, abs=1e-12)
    a = [c for m, c in zip(runs["average"]["clusters"]["matrix"],
                           runs["average"]["clusters"]["cluster"]) if m == "js_keep"]
    b = [c for m, c in zip(runs["ward"]["clusters"]["matrix"],
                           runs["ward"]["clusters"]["cluster"]) if m == "js_keep"]
    assert sinkscope.metrics.adjusted_rand_index(a, b) == pytest.approx(ari(a, b), abs=1e-14)
    # label names do not matter
    assert sinkscope.metrics.adjusted_rand_index(a, [7 * x + 100 for x in a]) == 1.0
    with pytest.raises(ValueError, match="k must be in 1..16"):
        sinkscope.metrics.cluster(d, 0)
    with pytest.raises(ValueError, match="linkage must be average"):
        sinkscope.metrics.cluster(d, 2, "centroid")
    with pytest.raises(ValueError, match="labelings have 16 and 3 items"):
        sinkscope.metrics.adjusted_rand_index(a, [0, 1, 2])
