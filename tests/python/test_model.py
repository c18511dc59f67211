"""sinkscope.Model against the command line on the same checkpoint (tinystories656K): the cache
of run_with_cache equals `sinkscope dump`'s .npy files exactly, token ids equal its tokens.npy,
perplexity equals `sinkscope perplexity` (the same code in the same precision)."""

import os

import numpy as np
import pytest

import sinkscope

pytestmark = pytest.mark.skipif(not sinkscope.with_model_runtime,
                                reason="built without the model runtime (libtorch)")

TEXTS = ["Once upon a time there was a little cat.",
         "The dog ran to the park and played with a ball all day."]


@pytest.fixture(scope="module")
def model(tiny_model):
    return sinkscope.Model.load(tiny_model, threads=1)


@pytest.fixture(scope="module")
def dumped(tmp_path_factory, tiny_model, cli):
    d = tmp_path_factory.mktemp("dump")
    (d / "one.txt").write_text(TEXTS[0] + "\n")
    cli("dump", "--model", tiny_model, "--data", d / "one.txt", "--hooks", "*", "--threads", 1,
        "--out", d / "out")
    return sinkscope.Results.from_run(d / "out")


def test_run_with_cache_equals_dump(model, dumped):
    tokens = model.to_tokens(TEXTS[0])
    assert np.array_equal(tokens, dumped.arrays["tokens"])
    logits, cache = model.run_with_cache(tokens)
    assert logits.shape == (1, tokens.shape[1], model.cfg["d_vocab"])
    assert sorted(cache) == sorted(model.hook_names())
    n_layers = model.cfg["n_layers"]
    for name, value in cache.items():
        assert value.dtype == np.float32
        if name.endswith("attn.hook_pattern") or name.endswith("attn.hook_attn_scores"):
            # dump stacks every layer's attention into attention.npy / attn_scores.npy
            layer = int(name.split(".")[1])
            file = "attention" if name.endswith("pattern") else "attn_scores"
            assert dumped.arrays[file].shape[1] == n_layers
            expected = dumped.arrays[file][:, layer]
        else:
            expected = dumped.arrays[name]
        assert value.shape == expected.shape, name
        assert np.array_equal(value, expected), name


def test_cache_is_shared_not_copied(model):
    _, cache = model.run_with_cache(TEXTS[0], names_filter="blocks.0.attn.hook_pattern")
    a = cache["blocks.0.attn.hook_pattern"]
    assert list(cache) == ["blocks.0.attn.hook_pattern"]
    assert not a.flags["OWNDATA"]  # numpy views the tensor's memory
    assert np.allclose(a.sum(-1), 1, atol=1e-5)


def test_names_filter_forms(model):
    _, by_glob = model.run_with_cache(TEXTS[0], names_filter="blocks.*.attn.hook_z")
    _, by_list = model.run_with_cache(TEXTS[0], names_filter=["blocks.0.attn.hook_z",
                                                              "blocks.1.attn.hook_z"])
    _, by_call = model.run_with_cache(TEXTS[0], names_filter=lambda n: n.endswith("hook_z"))
    assert sorted(by_glob) == sorted(by_list) == sorted(by_call) == [
        "blocks.0.attn.hook_z", "blocks.1.attn.hook_z"]
    for k in by_glob:
        assert np.array_equal(by_glob[k], by_call[k])


def test_head_mask_zeroes_the_head(model):
    _, cache = model.run_with_cache(TEXTS[0], names_filter="blocks.0.attn.hook_z",
                                    head_mask=[(0, 3)])
    z = cache["blocks.0.attn.hook_z"]  # [1, pos, heads, d_head]
    assert np.all(z[:, :, 3] == 0) and np.any(z[:, :, 2] != 0)


def test_to_string_round_trip(model):
    tokens = model.to_tokens(TEXTS[1])
    assert model.to_string(tokens).endswith(TEXTS[1])
    assert "".join(model.to_str_tokens(tokens)).endswith(TEXTS[1])


@pytest.mark.parametrize("mask", [None, [(0, 1), (1, 5)]])
def test_perplexity_equals_cli(tmp_path, model, tiny_model, cli, mask):
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    args = ["perplexity", "--model", tiny_model, "--data", tmp_path / "texts.txt",
            "--threads", 1]
    if mask:
        args += ["--head-mask", ",".join(f"{l}.{h}" for l, h in mask)]
    out = dict(line.split(" ", 1) for line in cli(*args).stdout.splitlines())
    r = model.perplexity(TEXTS, head_mask=mask)
    assert r["perplexity"] == float(out["perplexity"])  # shortest round-trip text: exact
    assert r["mean_nll"] == float(out["mean_nll"])
    assert r["n_tokens"] == int(out["tokens"])


def test_cache_arrays_are_released(model):
    # Each cache array holds its tensor; 1,000 runs whose caches are dropped must not keep them.
    import gc
    import resource
    tokens = model.to_tokens(TEXTS[1])
    for _ in range(20):
        model.run_with_cache(tokens)
    gc.collect()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(1000):
        _, cache = model.run_with_cache(tokens)
    del cache
    gc.collect()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    per_run = sum(a.nbytes for a in model.run_with_cache(tokens)[1].values())
    # Leaking every cache would add 1,000 x per_run bytes of peak memory.
    assert (after - before) * 1024 < 100 * per_run, (after - before, per_run)


def test_to_pandas_when_installed(tiny_model):
    pytest.importorskip("pandas")
    r = sinkscope.analyze(tiny_model, samples=3, max_tokens=16, analyses="sink_eps", threads=1)
    df = r.to_pandas("sink_eps")
    assert list(df.columns) == list(r["sink_eps"])


def test_bad_input(model, tmp_path):
    with pytest.raises(ValueError, match=r"expected integer ids shaped \[T\] or \[batch, T\]"):
        model.run_with_cache(np.array([[1.5, 2.0]]))
    with pytest.raises(ValueError, match="head '9.0' does not exist"):
        model.run_with_cache(TEXTS[0], head_mask=[(9, 0)])
    # A path that is not a checkpoint is bad input (the command line's exit 3), not an I/O error.
    with pytest.raises(sinkscope.InputError, match="missing: no such file or directory"):
        sinkscope.Model.load(tmp_path / "missing")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json"):
        sinkscope.Model.load(tmp_path / "bad")
    with pytest.raises(ValueError, match="--dtype|dtype"):
        sinkscope.Model.load(os.path.dirname(tmp_path), dtype="float128")
