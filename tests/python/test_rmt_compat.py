"""rmt.ipynb's sink concentration and row entropy (--compat ruscio2025, spectra.csv) against a
numpy re-implementation of the notebook's formulas (PAPERS.md B.9, analyze_attention_matrix):

    col_sums = np.sum(A, axis=0)
    sink_indices = np.where(col_sums >= np.percentile(col_sums, 90))[0]
    sink_concentration = col_sums[sink_indices].sum() / col_sums.sum()   (0 when the sum is 0)
    entropy = mean over rows i of -np.sum(A[i] * np.log2(A[i] + 1e-10))

on each head's matrix and on their mean over the heads (rows as stored: compat does not
renormalise), per input, then the mean over inputs."""

import math

import numpy as np
import pytest

import sinkscope

# Per input: a concentration is a ratio of sums of at most n^2 = 256 non-negative terms <= 1,
# summed in another order than numpy's (relative error <= 256 * 2^-53 ~ 3e-14 each); an entropy
# is a mean of row sums of 16 terms <= 0.6 bits with log2 within an ulp of numpy's (<= 16 * 4 *
# 2^-52 * 0.6 ~ 1e-14). The mean over 8 inputs adds ~8 * 2^-53 * 8 * 4 ~ 3e-14. 1e-12 is well
# within the 1e-10 acceptance and far below any formula difference (renormalising, nats instead
# of bits, dropping the 1e-10 or the ties change these by > 1e-6).
TOL = 1e-12
# The sink set must be the same: no column sum may lie within this of the percentile (the
# analysis's column sums are a few ulps from numpy's).
MARGIN = 1e-12


def notebook(a):
    col_sums = np.sum(a, axis=0)
    threshold = np.percentile(col_sums, 90)
    assert np.all((np.abs(col_sums - threshold) > MARGIN) | (col_sums == threshold)), \
        "a column sum next to the percentile"
    sinks = np.where(col_sums >= threshold)[0]
    total = np.sum(col_sums)
    conc = np.sum(col_sums[sinks]) / total if total > 0 else 0.0
    ent = np.mean([-np.sum(row * np.log2(row + 1e-10)) for row in a])
    return conc, ent


def rmt_rows(a, per_head):
    t = sinkscope.metrics.analyze(a, analyses=["spectra"], compat="ruscio2025",
                                  per_head=per_head)["spectra"]
    out = {}
    for layer, head, metric, value, n in zip(t["layer"], t["head"], t["metric"], t["value"],
                                             t["n"]):
        if str(metric) in ("rmt_sink_concentration", "rmt_row_entropy_bits"):
            out[(int(layer), int(head), str(metric))] = (float(value), int(n))
    return out


def reference(a, per_head):
    x = a.astype(np.float64)
    want = {}
    for i in range(x.shape[0]):
        for layer in range(x.shape[1]):
            mats = {-1: x[i, layer].mean(axis=0)}
            if per_head:
                mats.update({h: x[i, layer, h] for h in range(x.shape[2])})
            for head, m in mats.items():
                conc, ent = notebook(m)
                want.setdefault((layer, head, "rmt_sink_concentration"), []).append(conc)
                want.setdefault((layer, head, "rmt_row_entropy_bits"), []).append(ent)
    return {k: np.mean(v) for k, v in want.items()}


@pytest.mark.parametrize("per_head", [False, True])
def test_example_equals_the_notebook(per_head):
    a = sinkscope.metrics.example_attention()
    got, want = rmt_rows(a, per_head), reference(a, per_head)
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        assert abs(got[key][0] - value) <= TOL, (key, got[key][0], value)
        assert got[key][1] == a.shape[0]
    # Not vacuous: the values differ across layers and heads.
    conc = [v for (l, h, m), (v, n) in got.items() if m == "rmt_sink_concentration"]
    assert max(conc) - min(conc) > 1e-2


def test_ties_join_the_sink_set():
    # Uniform bidirectional rows: every column sum is 1, the percentile is 1, every key is a
    # "sink" and the concentration is 1, not 0.1. The entropy is log2 16 less the 1e-10's share.
    a = np.full((2, 1, 2, 16, 16), 1.0 / 16, dtype=np.float32)
    got = rmt_rows(a, False)
    assert got[(0, -1, "rmt_sink_concentration")][0] == 1.0
    want = -16 * (1 / 16) * math.log2(1 / 16 + 1e-10)
    assert abs(got[(0, -1, "rmt_row_entropy_bits")][0] - want) <= TOL


def test_default_mode_has_no_rmt_rows():
    a = sinkscope.metrics.example_attention()
    t = sinkscope.metrics.analyze(a, analyses=["spectra"])["spectra"]
    assert not {"rmt_sink_concentration", "rmt_row_entropy_bits"} & set(map(str, t["metric"]))
