"""Editing hooks, batches, ready-made interventions and patching from Python (issue 52):
``Model.run_with_hooks`` / ``run_with_cache(fwd_hooks=...)`` at every hook point family,
right-padded batches against each sequence alone, exceptions raised inside a hook, and the
``intervene=`` / ``patch`` entry points against the hooks written by hand."""

import os

import numpy as np
import pytest

sinkscope = pytest.importorskip("sinkscope")
if not hasattr(sinkscope, "Model"):
    pytest.skip("built without the model runtime (libtorch)", allow_module_level=True)

TEXT = "Once upon a time there was a little girl named Lily."
FAMILIES = ["hook_embed", "hook_resid_pre", "attn.hook_q", "attn.hook_k", "attn.hook_v",
            "attn.hook_rot_q", "attn.hook_rot_k", "attn.hook_attn_scores", "attn.hook_pattern",
            "attn.hook_z", "hook_resid_mid", "hook_resid_post", "ln_final.hook_normalized"]


@pytest.fixture(scope="module")
def model(tiny_model):
    return sinkscope.Model.load(tiny_model)


@pytest.fixture(scope="module")
def model64(tiny_model):
    return sinkscope.Model.load(tiny_model, dtype="float64")


def names_of(model, family):
    return [n for n in model.hook_names() if n.endswith(family) and
            (family != "hook_embed" or n == "hook_embed")]


def logit_tol64(cfg, T, max_abs):
    """Two float64 forwards in different summation orders (tests/model/forward_bound.hpp's
    count of accumulated terms): 2 gamma_K(2^-53) max|logit|."""
    d, h, dh = cfg["d_model"], cfg["n_heads"], cfg["d_head"]
    k = cfg["n_layers"] * (4 * d + dh + 2 * T + h * dh + cfg["d_mlp"]) + 2 * d
    u = 2.0 ** -53
    return 2 * k * u / (1 - k * u) * max_abs


@pytest.mark.parametrize("family", FAMILIES)
def test_each_hook_family_can_read_and_replace(model, family):
    tokens = model.to_tokens(TEXT)
    plain = model.run_with_hooks(tokens)
    names = names_of(model, family)
    assert names, family
    seen = []

    def copy_back(act, hook):
        seen.append((hook.name, act.shape))
        return act.copy()
    same = model.run_with_hooks(tokens, fwd_hooks=[(n, copy_back) for n in names])
    assert [s[0] for s in seen] == names
    assert np.array_equal(same, plain)  # handing back a copy changes nothing, bit for bit

    def scaled(act, hook):  # affine: a final norm would undo a scale alone
        return act * 0.5 + 0.125
    changed = model.run_with_hooks(tokens, fwd_hooks=[(names[-1], scaled)])
    assert np.abs(changed - plain).max() > 1e-3
    # The cache holds the activation as edited.
    _, cache = model.run_with_cache(tokens, names_filter=names[-1],
                                    fwd_hooks=[(names[-1], scaled)])
    _, before = model.run_with_cache(tokens, names_filter=names[-1])
    assert np.array_equal(cache[names[-1]], before[names[-1]] * 0.5 + 0.125)


def test_in_place_edits_are_seen_without_a_copy(model):
    tokens = model.to_tokens(TEXT)
    name = "blocks.1.attn.hook_z"
    shared = {}

    def zero_head(act, hook):
        shared["array"] = act
        act[:, :, 3, :] = 0  # in place; returns None
    _, cache = model.run_with_cache(tokens, names_filter=name, fwd_hooks=[(name, zero_head)])
    assert np.all(cache[name][:, :, 3, :] == 0)
    # The hook's array was the forward's own memory: the cache is that same buffer.
    assert np.shares_memory(shared["array"], cache[name])
    masked, _ = model.run_with_cache(tokens, names_filter=[], head_mask=[(1, 3)])
    edited = model.run_with_hooks(tokens, fwd_hooks=[(name, zero_head)])
    assert np.array_equal(edited, masked)  # the zero head mask, computed another way


def test_filters_order_and_errors(model):
    tokens = model.to_tokens(TEXT)
    calls = []

    def first(act, hook):
        calls.append(("first", hook.name, hook.layer))
        return act + 1

    def second(act, hook):
        calls.append(("second", hook.name, hook.layer))
    model.run_with_hooks(tokens, fwd_hooks=[(lambda n: n.endswith("hook_resid_mid"), first),
                                            ("blocks.0.hook_resid_mid", second)])
    assert calls == [("first", "blocks.0.hook_resid_mid", 0),
                     ("second", "blocks.0.hook_resid_mid", 0),
                     ("first", "blocks.1.hook_resid_mid", 1)]

    class Boom(RuntimeError):
        pass

    def boom(act, hook):
        raise Boom("inside the hook")
    with pytest.raises(Boom) as err:
        model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_pattern", boom)])
    assert any("blocks.1.attn.hook_pattern" in note for note in err.value.__notes__)
    with pytest.raises(ValueError, match="blocks.0.hook_resid_post"):
        model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.hook_resid_post",
                                                 lambda a, h: a[:, :2])])
    with pytest.raises(ValueError, match="no hook named"):
        model.run_with_hooks(tokens, fwd_hooks=[("blocks.7.hook_resid_post", boom)])
    # After an error the model runs as before.
    assert np.array_equal(model.run_with_hooks(tokens), model.run_with_hooks(tokens))


def test_batches_with_padding_equal_each_sequence_alone(model64):
    texts = [TEXT, "The dog ran.", "Tom and his mom baked a cake for the birthday party today."]
    ids, mask = sinkscope.model.pad_right([model64.to_tokens(t)[0] for t in texts])
    assert mask.sum(1).tolist() == [len(model64.to_tokens(t)[0]) for t in texts]
    logits, cache = model64.run_with_cache(texts, names_filter="blocks.*.attn.hook_pattern")
    assert logits.shape[:2] == ids.shape
    cfg = model64.cfg
    patterns = []
    for b, text in enumerate(texts):
        n = int(mask[b].sum())
        alone, one = model64.run_with_cache(text, names_filter="blocks.*.attn.hook_pattern")
        tol = logit_tol64(cfg, n, np.abs(alone).max())
        assert np.abs(logits[b, :n] - alone[0]).max() <= tol
        for name, p in one.items():
            # a pattern moves by at most half the score error (forward_bound.hpp), below the
            # logits' bound
            assert np.abs(cache[name][b, :, :n, :n] - p[0]).max() <= tol
        patterns.append(np.stack([one[f"blocks.{l}.attn.hook_pattern"][0]
                                  for l in range(cfg["n_layers"])]))
    # The metrics on the padded batch (lengths) equal each input's own.
    batch = np.stack([np.stack([cache[f"blocks.{l}.attn.hook_pattern"][b]
                                for l in range(cfg["n_layers"])]) for b in range(len(texts))])
    rows = sinkscope.metrics.decompose(batch, lengths=mask.sum(1))
    for b, p in enumerate(patterns):
        own = sinkscope.metrics.decompose(p[None])
        sel = rows["input"] == b
        for key in ("layer", "head", "query"):
            assert np.array_equal(rows[key][sel], own[key])
        for key in ("sink_mass", "content_entropy", "entropy"):
            # entropies of rows equal within the patterns' bound times log T (< 4)
            assert np.abs(rows[key][sel] - own[key]).max() <= 4 * logit_tol64(cfg, 16, 1.0) + 1e-15
    with pytest.raises(ValueError, match="right padding"):
        left = mask[:, ::-1].copy()
        model64.run_with_cache(ids, attention_mask=left)


def test_intervene_equals_the_hook_written_by_hand(model):
    tokens = model.to_tokens(TEXT)

    def no_sink(p, hook):
        p = p.copy()
        p[:, :, 1:, 0] = 0  # row 0 sees only the sink: left as it is
        return p / p.sum(-1, keepdims=True)
    by_hand = model.run_with_hooks(tokens, fwd_hooks=[(lambda n: n.endswith("hook_pattern"),
                                                       no_sink)])
    ready = model.run_with_hooks(tokens, intervene="sink_removal")
    # float32: the division of each row by its sum, in numpy and in libtorch, both rounded once
    assert np.abs(ready - by_hand).max() <= 1e-4 * np.abs(by_hand).max()
    assert np.abs(ready - model.run_with_hooks(tokens)).max() > 1e-2

    def zero_k0(k, hook):
        k = k.copy()
        k[:, 0] = 0
        return k
    assert np.array_equal(model.run_with_hooks(tokens, intervene="sink_key:scale=0"),
                          model.run_with_hooks(tokens, fwd_hooks=[
                              (lambda n: n.endswith("attn.hook_k"), zero_k0)]))
    with pytest.raises(sinkscope.UsageError, match="resample"):
        model.run_with_hooks(tokens, intervene="head_ablation:mode=resample:heads=0.1")
    with pytest.raises(sinkscope.UsageError, match="--intervene"):
        model.run_with_hooks(tokens, intervene="sink_removal:renormalize=maybe")


def test_patch_sweep_from_python(model):
    r = model.patch("The cat sat on the mat.", "The dog sat on the mat.", hook_kinds="resid_pre,z")
    t = r["table"]
    assert t["hook"][-1] == "*" and t["value"][-1] == r["source_value"]
    n_layers, n_heads = model.cfg["n_layers"], model.cfg["n_heads"]
    assert len(t["hook"]) == n_layers + n_layers * (1 + n_heads) + 1
    # The same sweep by hand with run_with_hooks, for one head's z.
    src = model.to_tokens("The cat sat on the mat.")
    _, cache = model.run_with_cache(src, names_filter="blocks.1.attn.hook_z")

    def patch_head(z, hook):
        z = z.copy()
        z[:, :, 2] = cache["blocks.1.attn.hook_z"][:, :, 2]
        return z
    logits = model.run_with_hooks("The dog sat on the mat.",
                                  fwd_hooks=[("blocks.1.attn.hook_z", patch_head)])
    lp = logits[0].astype(np.float64)
    lp = lp - np.log(np.exp(lp - lp.max(-1, keepdims=True)).sum(-1, keepdims=True)) - \
        lp.max(-1, keepdims=True)
    nll = -np.mean([lp[i, src[0, i + 1]] for i in range(src.shape[1] - 1)])
    row = [i for i, (h, head) in enumerate(zip(t["hook"], t["head"]))
           if h == "blocks.1.attn.hook_z" and head == 2]
    assert len(row) == 1
    assert t["value"][row[0]] == pytest.approx(nll, rel=1e-6)  # same float32 logits


def test_cli_intervene_patch_and_dump(tmp_path, tiny_model, cli):
    out = tmp_path / "a"
    cli("analyze", "--model", tiny_model, "--samples", "6", "--out", out, "--no-report",
        "--analyses", "sink_eps", "--intervene", "sink_removal")
    import json
    rec = json.load(open(out / "run.json"))
    assert rec["intervention"]["spec"] == "sink_removal:renormalize=yes:sink=first"
    bad = cli("analyze", "--model", tiny_model, "--out", tmp_path / "b", "--intervene",
              "sink_removal:oops", check=False)
    assert bad.returncode != 0 and "--intervene" in bad.stderr and not (tmp_path / "b").exists()
    cli("patch", "--model", tiny_model, "--source", "The cat sat.", "--target", "The dog sat.",
        "--hook-kinds", "z", "--out", tmp_path / "p")
    assert (tmp_path / "p" / "patch.csv").exists()
    uneven = cli("patch", "--model", tiny_model, "--source", "The cat sat.", "--target",
                 "A dog", "--out", tmp_path / "q", check=False)
    assert uneven.returncode != 0 and "same number of tokens" in uneven.stderr
    assert not (tmp_path / "q").exists()
    data = tmp_path / "d.txt"
    data.write_text("The cat sat on the mat.\nThe dog ran to the park.\n")
    cli("dump", "--model", tiny_model, "--data", data, "--hooks", "blocks.1.attn.hook_pattern",
        "--intervene", "sink_removal:layers=1", "--out", tmp_path / "dump")
    p = np.load(tmp_path / "dump" / "blocks.1.attn.hook_pattern.npy")
    assert np.all(p[:, :, 1:, 0] == 0)


def test_analyze_intervene_from_python_equals_the_cli(tmp_path, tiny_model, cli):
    from conftest import assert_tables_equal
    cli("analyze", "--model", tiny_model, "--samples", "6", "--out", tmp_path / "cli",
        "--no-report", "--analyses", "sink_eps", "--intervene", "sink_key:scale=0;sink_removal")
    r = sinkscope.analyze(tiny_model, samples=6, analyses="sink_eps",
                          intervene="sink_key:scale=0;sink_removal")
    assert r.record["intervention"]["spec"] == \
        "sink_key:scale=0:sink=first;sink_removal:renormalize=yes:sink=first"
    from sinkscope import Results
    assert_tables_equal(r.tables["sink_eps"], Results.from_run(tmp_path / "cli").tables["sink_eps"],
                        "sink_eps")
    plain = sinkscope.analyze(tiny_model, samples=6, analyses="sink_eps")
    assert not np.array_equal(plain.tables["sink_eps"]["value"], r.tables["sink_eps"]["value"])
