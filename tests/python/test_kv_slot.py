"""The learnable key/value slot (`train --kv-bias`) from training to the analyses: a trained
checkpoint records it, analyze reads its rows closed and reports the slot's weight
(sink_geometry.csv, metric slot_mass) as the mean over query rows of 1 - the row's sum over the
tokens, the same number a user computes from run_with_cache's patterns."""

import json

import numpy as np
import pytest

import sinkscope
from conftest import training_corpus as corpus

pytestmark = pytest.mark.skipif(not sinkscope.with_model_runtime,
                                reason="built without the model runtime (libtorch)")

# Shorter than the tiny model's 32 positions (one token per byte): analyze cuts nothing.
TEXTS = ["Tom had a ball.", "Mia liked the cake."]



@pytest.fixture(scope="module")
def slot_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kv")
    out = folder / "run"
    sinkscope.train(corpus(folder), preset="tiny", out=out, steps=20, kv_bias=True, seed=2,
                    threads=1)
    data = folder / "texts.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    return out, data


def test_checkpoint_records_the_slot(slot_run, cli):
    out, _ = slot_run
    with open(out / "config.json") as f:
        assert json.load(f)["sinkscope_kv_bias"] is True
    with open(out / "train_config.json") as f:
        assert json.load(f)["kv_bias"] is True
    with open(out / "run.json") as f:
        assert json.load(f)["train"]["kv_bias"] is True
    assert "learnable key/value slot" in cli("inspect", "--model", out).stdout


def test_slot_mass_is_one_less_the_row_sums(slot_run):
    out, data = slot_run
    r = sinkscope.analyze(out, data, analyses="sink_geometry", threads=1, over_context="refuse")
    assert r.record["model"]["attention"]["kv_slot"] is True
    assert r.record["model"]["attention"]["rows"].startswith("closed")
    g = r["sink_geometry"]
    model = sinkscope.Model.load(out)
    cfg = model.cfg
    assert cfg["kv_slot"] is True and cfg["attention"] == "softmax"
    L, H = cfg["n_layers"], cfg["n_heads"]
    want = np.zeros((L, H))
    T = 0  # the longest input's tokens
    for text in TEXTS:
        tokens = model.to_tokens(text)
        T = max(T, np.asarray(tokens).shape[-1])
        _, cache = model.run_with_cache(tokens,
                                        names_filter=lambda n: n.endswith("hook_pattern"))
        for l in range(L):
            a = np.asarray(cache[f"blocks.{l}.attn.hook_pattern"], dtype=np.float64)[0]
            want[l] += (1.0 - a.sum(-1)).mean(-1) / len(TEXTS)  # [H]
    seen = 0
    for layer, head, metric, value in zip(g["layer"], g["head"], g["metric"], g["value"]):
        layer, head = int(layer), int(head)
        if metric != "slot_mass" or layer < 0 or head < 0:
            continue
        # The same float32 rows summed in float64 in two orders, T terms of at most 1 each: the
        # sums within 2 (T - 1) u of each other (u = 2^-53), 1 - sum one rounding, the two means
        # over rows and inputs T + 2 more: (3 T + 4) u.
        assert abs(value - want[layer, head]) <= (3 * T + 4) * 2.0**-53, (layer, head)
        seen += 1
    assert seen == L * H
    assert want.max() > 0.01, "the slot took no weight: the test would not see a wrong sum"


def test_softmax_model_has_no_slot_rows(tiny_model):
    r = sinkscope.analyze(tiny_model, samples=2, max_tokens=12, analyses="sink_geometry",
                          threads=1)
    assert "slot_mass" not in set(r["sink_geometry"]["metric"])
    assert r.record["model"]["attention"]["kv_slot"] is False


def test_cli_refuses_the_slot_with_another_function(tmp_path, cli):
    text = corpus(tmp_path)
    res = cli("train", "--preset", "tiny", "--text", text, "--out", tmp_path / "x", "--kv-bias",
              "--attention-function", "sigmoid", check=False)
    assert res.returncode != 0
    assert "--kv-bias needs softmax attention" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.partial").exists()


def test_report_draws_the_slot_only_for_a_slot_model(slot_run, tiny_model, tmp_path, cli):
    out, data = slot_run
    cli("analyze", "--model", out, "--data", data, "--analyses", "sink_geometry", "--out",
        tmp_path / "slot", "--threads", 1, "--progress", "never")
    cli("analyze", "--model", tiny_model, "--samples", 2, "--max-tokens", 12, "--analyses",
        "sink_geometry", "--out", tmp_path / "plain", "--threads", 1, "--progress", "never")
    slot_html = (tmp_path / "slot" / "report.html").read_text()
    plain_html = (tmp_path / "plain" / "report.html").read_text()
    assert "Attention outside the tokens" in slot_html
    assert "Attention outside the tokens" not in plain_html
    assert "Sink key norm" in plain_html  # the same section is drawn for both


def test_sink_removal_keeps_each_rows_total_on_a_slot_model(slot_run):
    out, _ = slot_run
    model = sinkscope.Model.load(out, dtype="float64")
    tokens = model.to_tokens(TEXTS[1])
    name = "blocks.1.attn.hook_pattern"
    _, plain = model.run_with_cache(tokens, names_filter=name)
    _, edited = model.run_with_cache(tokens, names_filter=name,
                                     intervene="sink_removal:layers=1")
    a, b = np.asarray(plain[name])[0], np.asarray(edited[name])[0]  # [H, T, T]
    T = a.shape[-1]
    rows = slice(1, T)  # row 0 sees only the sink and is left as it is
    assert np.all(b[:, rows, 0] == 0)
    assert np.array_equal(b[:, 0], a[:, 0])
    # The removed weight spread over the other keys in proportion, each row's total kept (the
    # slot's weight is left as it was): b = a (total / (total - a_0)) off the sink column.
    total = a.sum(-1, keepdims=True)
    want = a[:, rows, 1:] * (total[:, rows] / (total[:, rows] - a[:, rows, :1]))
    # float64, u = 2^-53. The forward divides by the sum of the other T - 1 weights ((T - 1) u
    # relative) and multiplies by the row's total ((T - 1) u), two roundings; here what is left is
    # total - a_0, whose relative error is (T - 1) u total / (total - a_0) + u, and the product and
    # quotient two more roundings.
    left = total[:, rows] - a[:, rows, :1]
    rel = ((T - 1) * (2 + total[:, rows] / left) + 6) * 2.0**-53  # [H, T - 1, 1]
    assert np.all(np.abs(b[:, rows, 1:] - want) <= rel * np.abs(want))
    # Each row's total kept: b's entries within rel, their sum in numpy (T - 1) u more.
    got_total = b.sum(-1, keepdims=True)[:, rows]
    assert np.all(np.abs(got_total - total[:, rows]) <=
                  (rel + 2 * (T - 1) * 2.0**-53) * total[:, rows])
    assert (1.0 - total).min() > 1e-3, "the slot takes no weight: the test would see no change"
