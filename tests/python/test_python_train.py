"""sinkscope.train from Python runs the command line's `train`: with the same options it writes
the same checkpoints, byte for byte, and returns the manifest as a table. Every option of the
command line's commands is a keyword of their Python functions."""

import os
import re

import numpy as np
import pytest

import sinkscope
from conftest import training_corpus as corpus

pytestmark = pytest.mark.skipif(not sinkscope.with_model_runtime,
                                reason="built without the model runtime (libtorch)")


def files(run):
    """Every file of a training run but those holding times (train.log, run.json)."""
    out = {}
    for root, _dirs, names in os.walk(run):
        for name in names:
            rel = os.path.relpath(os.path.join(root, name), run)
            if rel not in ("train.log", "run.json", "run_files.json"):
                with open(os.path.join(root, name), "rb") as f:
                    out[rel] = f.read()
    return out


def test_train_equals_the_command_line(tmp_path, cli):
    text = corpus(tmp_path)
    cli("train", "--preset", "tiny", "--text", text, "--out", tmp_path / "cli", "--steps", 20,
        "--checkpoint-every", 10, "--seed", 3, "--threads", 1, "--progress", "never")
    seen = []
    r = sinkscope.train(text, preset="tiny", out=tmp_path / "py", steps=20, checkpoint_every=10,
                        seed=3, threads=1, progress=seen.append)
    assert seen == list(range(1, 21))
    want, got = files(tmp_path / "cli"), files(tmp_path / "py")
    assert sorted(got) == sorted(want)
    for name in ("model.safetensors", "checkpoints/step_000010/model.safetensors",
                 "checkpoints/step_000020/model.safetensors", "tokenizer.json", "config.json"):
        assert got[name] == want[name], f"{name} differs"
    assert got == want
    # The manifest as a table; the run directory loads as a model.
    assert r.out == str(tmp_path / "py")
    assert list(r["manifest"]["step"]) == [10, 20]
    assert np.all(np.isfinite(r["manifest"]["loss"]))
    assert r.record["train"]["seed"] == 3 and r.record["subcommand"] == "train"
    assert "trained 20 steps" in r.summary
    loaded = sinkscope.analyze(tmp_path / "py", samples=2, max_tokens=8, analyses="sink_eps",
                               threads=1)
    assert loaded.record["model"]["architecture"] == r.record["train"]["config"]["architecture"]


def test_train_options_are_validated_like_the_cli(tmp_path):
    text = corpus(tmp_path)
    with pytest.raises(sinkscope.UsageError, match="exactly one of --preset NAME and --config"):
        sinkscope.train(text, out=tmp_path / "x")
    with pytest.raises(sinkscope.UsageError, match="--steps must be >= 0"):
        sinkscope.train(text, preset="tiny", out=tmp_path / "x", steps=-1)
    with pytest.raises(TypeError, match="unknown option 'step'"):
        sinkscope.train(text, preset="tiny", out=tmp_path / "x", step=3)
    assert not (tmp_path / "x").exists()


# Flags with a Python form of their own: the function's own arguments (model, data, out, ...),
# progress (a callable in Python), --no-report (report=False), and the process-wide ones
# (--quiet; --limit is sinkscope.set_limit).
OWN = {"help", "model", "data", "text", "calib", "eval", "checkpoints", "out", "progress", "quiet",
       "limit", "no_report"}


@pytest.mark.parametrize("command", ["analyze", "dynamics", "prune", "fisher", "compare", "dump",
                                     "train"])
def test_every_command_line_option_is_a_keyword(command, cli):
    # --world-size -> world_size, ...: each flag of `sinkscope COMMAND --help` names a field the
    # function's keywords set (on its options or their model, analysis and distributed parts).
    from sinkscope import _sinkscope, commands
    flags = re.findall(r"^\s+(?:-\w, )?--([a-z0-9-]+)", cli(command, "--help").stdout, re.M)
    keys = {f.replace("-", "_") for f in flags} - OWN
    options = {"analyze": "AnalyzeOptions", "dynamics": "DynamicsOptions", "prune": "PruneOptions",
               "fisher": "FisherOptions", "compare": "CompareOptions", "dump": "DumpOptions",
               "train": "TrainOptions"}[command]
    o = getattr(_sinkscope, options)()
    parts = [o] + ([o.run] if command == "dynamics" else [])
    for p in list(parts):
        parts += [getattr(p, n) for n in ("m", "analysis", "dist") if hasattr(p, n)]
    known = set().union(*(commands._public(p) for p in parts))
    assert len(keys) >= 5 and sorted(keys - known) == []
