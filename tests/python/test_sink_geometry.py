"""sink_geometry.csv against numpy: the same texts through tinystories656K, the rotated queries
and keys taken from run_with_cache (equal to `sinkscope dump`, test_model.py), the key norms and
query-key cosines recomputed here from their definitions (docs/metrics.md) with the sink at each
layer's position of sinks.csv. Sums of d_head products in float64 differ from numpy's order by a
few ulp per term (d_head * 1.1e-16 * |value|); means over inputs and heads keep that size, so
1e-10 is far above rounding and far below any real difference."""

import csv
import os

import numpy as np
import pytest

import sinkscope

pytestmark = pytest.mark.skipif(not sinkscope.with_model_runtime,
                                reason="built without the model runtime (libtorch)")

TEXTS = ["Once upon a time there was a little cat.",
         "The dog ran to the park and played with a ball all day.",
         "Lily found a red box under the tree."]


def geometry(q, k, s):
    """One head: q, k [T, d] (causal, no window), sink position s."""
    T = q.shape[0]
    qn, kn = np.linalg.norm(q, axis=1), np.linalg.norm(k, axis=1)
    others = [j for j in range(T) if j != s]
    c_sink, c_other = [], []
    for i in range(T):
        for j in range(i + 1):  # causal: keys 0..i
            if j == i or qn[i] == 0 or kn[j] == 0:
                continue
            c = float(q[i] @ k[j]) / (qn[i] * kn[j])
            (c_sink if j == s else c_other).append(c)
    out = {"key_norm_sink": kn[s], "key_norm_others": np.mean(kn[others])}
    out["key_norm_ratio"] = out["key_norm_sink"] / out["key_norm_others"]
    out["qk_cosine_sink"] = np.mean(c_sink) if c_sink else np.nan
    out["qk_cosine_others"] = np.mean(c_other) if c_other else np.nan
    out["qk_cosine_excess"] = out["qk_cosine_sink"] - out["qk_cosine_others"]
    return out


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_sink_geometry_is_numpys(tmp_path, tiny_model, cli):
    data = tmp_path / "texts.txt"
    data.write_text("\n".join(TEXTS) + "\n")
    out = tmp_path / "run"
    cli("analyze", "--model", tiny_model, "--data", data, "--analyses", "sink_geometry",
        "--threads", 1, "--no-report", "--out", out)
    model = sinkscope.Model.load(tiny_model, threads=1)
    L, H = model.cfg["n_layers"], model.cfg["n_heads"]
    group = H // model.cfg["n_kv_heads"]
    sinks = {(int(r["input"]), int(r["layer"])): int(r["sink_position"])
             for r in read(out / "sinks.csv")}
    per_head = {}  # (layer, head, metric) -> values over inputs
    for n, text in enumerate(TEXTS):
        _, cache = model.run_with_cache(model.to_tokens(text))
        for l in range(L):
            q = np.asarray(cache[f"blocks.{l}.attn.hook_rot_q"], dtype=np.float64)[0]
            k = np.asarray(cache[f"blocks.{l}.attn.hook_rot_k"], dtype=np.float64)[0]
            for h in range(H):
                g = geometry(q[:, h, :], k[:, h // group, :], sinks[(n, l)])
                for m, v in g.items():
                    if np.isfinite(v):
                        per_head.setdefault((l, h, m), []).append(v)
    rows = read(out / "sink_geometry.csv")
    assert {r["metric"] for r in rows} == {"key_norm_sink", "key_norm_others", "key_norm_ratio",
                                          "qk_cosine_sink", "qk_cosine_others",
                                          "qk_cosine_excess"}
    checked = 0
    for r in rows:
        layer, head, metric, value = int(r["layer"]), int(r["head"]), r["metric"], float(r["value"])
        if layer >= 0 and head >= 0:
            want = np.mean(per_head[(layer, head, metric)])
        elif layer >= 0:
            want = np.mean([np.mean(per_head[(layer, h, metric)]) for h in range(H)])
        else:
            want = np.mean([np.mean(per_head[(l, h, metric)]) for l in range(L)
                            for h in range(H)])
        assert value == pytest.approx(want, rel=1e-10, abs=1e-10), (layer, head, metric)
        checked += 1
    assert checked == 6 * (L * H + L + 1)
