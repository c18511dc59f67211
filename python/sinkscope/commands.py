"""The command line's commands as functions: analyze, dynamics, prune, fisher, compare, dump.

Each takes the command line's options as keywords (``--max-tokens 64`` -> ``max_tokens=64``,
``--model`` -> ``model=``), runs the same code and returns the tables it writes as a ``Results``.
With ``out=`` the run directory is written there exactly as the command line writes it (all or
nothing; an interrupted resumable run keeps its state in ``<out>.partial`` for ``resume=True``);
without it the run goes to a temporary folder that is removed afterwards.

``progress``: an optional callable, called with the number of units done (inputs, checkpoints,
evaluation points, samples). Ctrl-C raises KeyboardInterrupt within one unit.
"""

import contextlib
import os
import shutil
import tempfile

from . import _sinkscope
from ._results import Results
from .model import default_model

__all__ = ["analyze", "dynamics", "prune", "fisher", "compare", "dump"]


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


@contextlib.contextmanager
def _out_dir(out):
    """``out`` itself, or a temporary run directory removed afterwards."""
    if out is not None:
        yield os.fspath(out), False
        return
    tmp = tempfile.mkdtemp(prefix="sinkscope-")
    try:
        yield os.path.join(tmp, "run"), True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _finish(out, temporary, log):
    r = Results.from_run(out, summary=log)
    if temporary:
        r.out = None
    return r


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


def _run(o, out, name, runner, *args):
    """Runs a command into ``out`` (or a temporary folder) and reads its run directory back."""
    with _out_dir(out) as (path, temporary):
        o.out = path
        o.command_line = f"python: sinkscope.{name}(...)"
        return _finish(path, temporary, runner(o, *args))


def analyze(model=None, data=None, *, out=None, progress=None, **kwargs):
    """``sinkscope analyze``: runs a checkpoint over a prompt set (None: the built-in one) and
    computes every analysis. Keywords: the command line's options (``max_tokens``, ``samples``,
    ``analyses``, ``sink``, ``threads``, ...)."""
    o = _model_options(_sinkscope.AnalyzeOptions, model, data, kwargs, ("m", "analysis"))
    return _run(o, out, "analyze", _sinkscope.run_analyze, progress)


def dynamics(checkpoints, *, out=None, progress=None, **kwargs):
    """``sinkscope dynamics``: analyze over the checkpoints of a manifest, their trajectories and
    the entropy-collapse split. Keywords: analyze's options and ``checkpoint_reports``."""
    o = _sinkscope.DynamicsOptions()
    o.checkpoints = os.fspath(checkpoints)
    o.run.progress = "never"
    own = {k: kwargs.pop(k) for k in list(kwargs) if k in _public(o)}
    _set(o.run, kwargs, ("m", "analysis"))
    _set(o, own)
    return _run(o.run, out, "dynamics", lambda run, p: _sinkscope.run_dynamics(o, p), progress)


def prune(model=None, *, calib, eval, out=None, progress=None, **kwargs):
    """``sinkscope prune``: redundancy-based head pruning with perplexity (spec section 5)."""
    o = _model_options(_sinkscope.PruneOptions, model, None, kwargs)
    o.calib, o.eval = os.fspath(calib), os.fspath(eval)
    return _run(o, out, "prune", _sinkscope.run_prune, progress)


def fisher(model=None, data=None, *, out=None, progress=None, **kwargs):
    """``sinkscope fisher``: Fisher information of the attention parameters."""
    o = _model_options(_sinkscope.FisherOptions, model, data, kwargs)
    return _run(o, out, "fisher", _sinkscope.run_fisher, progress)


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
