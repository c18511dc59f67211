"""The command line's commands as functions: analyze, dynamics, prune, fisher, compare, dump, train.

Each takes the command line's options as keywords (``--max-tokens 64`` -> ``max_tokens=64``,
``--model`` -> ``model=``), runs the same code and returns the tables it writes as a ``Results``.
With ``out=`` the run directory is written there exactly as the command line writes it (all or
nothing; an interrupted resumable run keeps its state in ``<out>.partial`` for ``resume=True``);
without it nothing touches the disk: the run's tables, arrays and run.json are kept in memory and
returned, the same cells as the files ``out=`` writes (no report.html, no saved state, so no
``resume``). ``dump`` and ``train`` write files by nature (arrays, checkpoints) and need ``out=``.

Several processes: ``world_size``, ``rank``, ``master`` ("HOST:PORT" of rank 0) and
``dist_timeout``, the command line's ``--world-size`` ... (or the torchrun environment RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT), for analyze (and its ``split``/``stages``), dynamics, prune
and fisher. Every rank calls the same function in its own process; rank 0 returns the merged
results, the other ranks return None.

``progress``: an optional callable, called with the number of units done (inputs, checkpoints,
evaluation points, samples, steps). Ctrl-C raises KeyboardInterrupt within one unit.
"""

import os

from . import _sinkscope
from ._results import Results
from .model import default_model

__all__ = ["analyze", "dynamics", "prune", "fisher", "compare", "dump", "train"]


def _public(o):
    return {k for k in dir(o) if not k.startswith("_")}


def _set(o, kwargs, nested=()):
    """Sets each keyword on ``o`` or on one of its ``nested`` option structs (pybind11 hands out
    nested structs by reference, so setting their fields changes ``o``)."""
    for key, value in kwargs.items():
        targets = [o] + [getattr(o, n) for n in nested]
        for t in targets:
            if key in _public(t) and key not in nested and key != "to_dict":
                if key == "analyses" and isinstance(value, str):
                    value = [v for v in value.split(",") if v]
                if isinstance(value, os.PathLike):
                    value = os.fspath(value)
                setattr(t, key, value)
                break
        else:
            known = sorted(set().union(*(_public(t) for t in targets)) - set(nested) -
                           {"to_dict", "command_line"})
            raise TypeError(f"unknown option {key!r}; options: {', '.join(known)}")
    return o


def _model_options(cls, model, data, kwargs, nested=("m",)):
    """A model command's options: keywords set, the model (None: the default one), the data."""
    o = cls()
    if hasattr(o, "progress"):
        o.progress = "never"  # no progress line on stderr; Python gets the callback
    _set(o, kwargs, nested)
    o.m.model = default_model() if model is None else os.fspath(model)
    if data is not None:
        o.data = os.fspath(data)
    return o


_MODEL_NESTED = ("m", "dist")


def _run(o, out, name, runner, progress=None, dist=None):
    """Runs a command into ``out``, or with ``out=None`` keeping its files in memory; returns its
    Results (None at a distributed run's ranks other than 0, which hold no results)."""
    o.command_line = f"python: sinkscope.{name}(...)"
    if out is not None:
        o.out = os.fspath(out)
    log, files = runner(o, progress, out is None)
    if dist is not None and _sinkscope.resolved_rank(dist) != 0:
        return None
    if files is None:
        return Results.from_run(o.out, summary=log)
    return Results._from_files(files, summary=log)


def analyze(model=None, data=None, *, out=None, progress=None, **kwargs):
    """``sinkscope analyze``: runs a checkpoint over a prompt set (None: the built-in one) and
    computes every analysis. Keywords: the command line's options (``max_tokens``, ``samples``,
    ``analyses``, ``sink``, ``threads``, ...)."""
    o = _model_options(_sinkscope.AnalyzeOptions, model, data, kwargs,
                       ("m", "analysis", "dist"))
    return _run(o, out, "analyze", _sinkscope.run_analyze, progress, o.dist)


def dynamics(checkpoints, *, out=None, progress=None, **kwargs):
    """``sinkscope dynamics``: analyze over the checkpoints of a manifest, their trajectories and
    the entropy-collapse split. Keywords: analyze's options and ``checkpoint_reports``."""
    o = _sinkscope.DynamicsOptions()
    o.checkpoints = os.fspath(checkpoints)
    o.run.progress = "never"
    own = {k: kwargs.pop(k) for k in list(kwargs) if k in _public(o)}
    _set(o.run, kwargs, ("m", "analysis", "dist"))
    _set(o, own)
    return _run(o.run, out, "dynamics",
                lambda run, p, in_memory: _sinkscope.run_dynamics(o, p, in_memory), progress,
                o.run.dist)


def prune(model=None, *, calib, eval, out=None, progress=None, **kwargs):
    """``sinkscope prune``: redundancy-based head pruning with perplexity (spec section 5)."""
    o = _model_options(_sinkscope.PruneOptions, model, None, kwargs, _MODEL_NESTED)
    o.calib, o.eval = os.fspath(calib), os.fspath(eval)
    return _run(o, out, "prune", _sinkscope.run_prune, progress, o.dist)


def fisher(model=None, data=None, *, out=None, progress=None, **kwargs):
    """``sinkscope fisher``: Fisher information of the attention parameters."""
    o = _model_options(_sinkscope.FisherOptions, model, data, kwargs, _MODEL_NESTED)
    return _run(o, out, "fisher", _sinkscope.run_fisher, progress, o.dist)


def compare(*runs, out=None, **kwargs):
    """``sinkscope compare``: finished runs side by side (paths of run directories)."""
    o = _sinkscope.CompareOptions()
    o.runs = [os.fspath(r) for r in runs]
    _set(o, kwargs)
    return _run(o, out, "compare", _sinkscope.run_compare)


def dump(model=None, data=None, *, out, **kwargs):
    """``sinkscope dump``: hooks of every input as .npy files in ``out``; returns their arrays."""
    o = _model_options(_sinkscope.DumpOptions, model, data, kwargs)
    o.out = os.fspath(out)
    _sinkscope.run_dump(o)
    return Results.from_run(o.out)


def train(text, *, out, preset=None, config=None, progress=None, **kwargs):
    """``sinkscope train``: trains a small decoder on the plain-text corpus ``text`` (a file) with
    a built-in ``preset`` ("tiny", "tiny-gpt2", "default") or a JSON ``config`` file, and writes
    Hugging Face checkpoints into ``out`` (always: they are model folders the other commands
    load). Keywords: the command line's options (``steps``, ``checkpoint_every``, ``vocab``,
    ``seed``, ``threads``, ``sink_eps``, ``overwrite``, ``resume``); the same weights need the
    same ``seed`` and ``threads``. Returns the run: ``tables["manifest"]`` (step, tokens, loss,
    sink_eps, eps, path of each checkpoint) and ``record["train"]``; ``out`` loads as a model."""
    o = _sinkscope.TrainOptions()
    o.progress = "never"
    _set(o, kwargs)
    o.text, o.out = os.fspath(text), os.fspath(out)
    if preset is not None:
        o.preset = preset
    if config is not None:
        o.config = os.fspath(config)
    o.command_line = "python: sinkscope.train(...)"
    return Results.from_run(o.out, summary=_sinkscope.run_train(o, progress))
