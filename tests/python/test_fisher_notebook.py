"""fisher --compat ruscio2025 against the released notebook's grouping (spec/PAPERS.md B.8),
written here as the notebook states it, on the per-tensor traces of fisher_tensors.csv: layer k
takes the tensors whose name holds "layers.{k}." or "layer.{k}.", the groups take each tensor by
its first matching lower-cased substring. The principled rows are those of a run without
--compat, byte for byte."""

import csv

import pytest

import sinkscope

pytestmark = pytest.mark.skipif(not sinkscope.with_model_runtime,
                                reason="built without the model runtime (libtorch)")

GROUPS = [("attention", ["attention", "attn", "self", "q_proj", "k_proj", "v_proj"]),
          ("mlp", ["mlp", "feed_forward", "ffn", "dense", "fc"]),
          ("embedding", ["embed", "token", "wte", "wpe"])]


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_grouping_is_the_notebooks(tmp_path, tiny_model, shared, cli):
    data = f"{shared}/data/stem_sentences.csv"
    common = ["fisher", "--model", tiny_model, "--data", data, "--text-column", "text",
              "--samples", 4, "--max-tokens", 24, "--threads", 1]
    cli(*common, "--compat", "ruscio2025", "--out", tmp_path / "nb")
    cli(*common, "--out", tmp_path / "plain")
    rows = read(tmp_path / "nb" / "fisher.csv")
    plain = read(tmp_path / "plain" / "fisher.csv")
    assert [r for r in rows if r["convention"] != "ruscio2025"] == plain
    n_layers = 1 + max(int(r["layer"]) for r in plain)
    layers, other, groups = {}, 0.0, {g: 0.0 for g, _ in GROUPS}
    for t in read(tmp_path / "nb" / "fisher_tensors.csv"):
        name, f = t["tensor"].split("[")[0], float(t["fisher"])
        ks = [k for k in range(n_layers) if f"layers.{k}." in name or f"layer.{k}." in name]
        if ks:
            layers[ks[0]] = layers.get(ks[0], 0.0) + f
        else:
            other += f
        for group, patterns in GROUPS:
            if any(p in name.lower() for p in patterns):
                groups[group] += f
                break
    got = {(int(r["layer"]), r["metric"]): float(r["value"])
           for r in rows if r["convention"] == "ruscio2025"}
    # The tensors' traces are read back from CSV (17 significant digits, exact) and summed in
    # the same order: equal to the last bits; 1e-12 relative leaves room for a reordered sum.
    want = {(k, "fisher_layer_by_name"): v for k, v in layers.items()}
    want[(-1, "fisher_layer_by_name")] = other
    for group, _ in GROUPS:
        want[(-1, f"fisher_{group}_by_name")] = groups[group]
    want[(-1, "attention_share_by_name")] = groups["attention"] / (groups["attention"] +
                                                                   groups["mlp"])
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-12), key
    assert len(layers) == n_layers  # a Llama checkpoint: every block named model.layers.<k>.
