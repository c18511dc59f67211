"""The threshold correlation map of graphs.csv against scipy: at every threshold, Pearson's r
and p across the layers between lambda2 and each structure metric, computed by
scipy.stats.pearsonr from the same table's per-layer rows; the sign flips found here by walking
the thresholds in order."""

import math

import numpy as np
import pytest
from scipy import stats

import sinkscope

PARTNERS = ["centralization", "star_combined", "density", "degree_variance"]


def test_correlation_map_is_scipys():
    x = sinkscope.metrics.example_attention()
    g = sinkscope.metrics.analyze(x, analyses=["graphs"])["graphs"]
    rows = list(zip(g["layer"], g["head"], g["metric"], g["param"], g["value"]))
    per_layer = {}
    for layer, head, metric, param, value in rows:
        if head == -1 and layer >= 0:
            per_layer.setdefault((metric, param), {})[int(layer)] = value
    model = {(m, p): v for layer, head, m, p, v in rows if layer == -1 and head == -1}
    taus = sorted({p for (m, p) in per_layer if m == "lambda2"}, key=float)
    assert len(taus) == 7
    checked = 0
    for partner in PARTNERS:
        signs = []
        for tau in taus:
            a, b = per_layer[("lambda2", tau)], per_layer[(partner, tau)]
            layers = [l for l in sorted(a) if l in b and math.isfinite(a[l])
                      and math.isfinite(b[l])]
            xs, ys = [a[l] for l in layers], [b[l] for l in layers]
            r_ours = model[("r_lambda2_" + partner, tau)]
            p_ours = model[("p_lambda2_" + partner, tau)]
            if len(layers) < 2 or np.ptp(xs) == 0 or np.ptp(ys) == 0:
                assert math.isnan(r_ours), (partner, tau)
                continue
            want = stats.pearsonr(xs, ys)
            # the same r from the same values; the p-value through the regularised incomplete
            # beta function of the library against scipy's: 1e-10 (the acceptance)
            assert r_ours == pytest.approx(want[0], abs=1e-10), (partner, tau)
            assert p_ours == pytest.approx(want[1], abs=1e-10), (partner, tau)
            signs.append((tau, r_ours))
            checked += 1
        flips = {p: v for (m, p), v in model.items() if m == "sign_flip_lambda2_" + partner}
        want_flips = {f"{a}->{b}": float(b) for (a, ra), (b, rb) in zip(signs, signs[1:])
                      if ra * rb < 0}
        assert flips == pytest.approx(want_flips), partner
    assert checked >= 8
