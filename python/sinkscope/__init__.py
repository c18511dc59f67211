"""sinkscope: what the attention of a transformer does around attention sinks, from Python.

The same C++ library as the ``sinkscope`` command line, on numpy arrays:

* ``sinkscope.metrics``: every analysis of attention arrays (decompositions, head distances,
  reversal rates, clustering, graphs, topology, ...), e.g.
  ``sinkscope.metrics.head_distances(attn, metric="dA_perp")``.
* ``sinkscope.Model``: load a checkpoint, ``to_tokens``, ``run_with_cache`` keyed by
  TransformerLens hook names, perplexity with heads ablated.
* ``sinkscope.analyze / dynamics / prune / fisher / compare / dump / train``: the commands,
  returning the tables they write (kept in memory without ``out=``: nothing touches the disk).

Errors: ``ValueError`` subclasses (``UsageError``, ``InputError``, ``UnsupportedError``) for bad
options and bad input, ``OSError`` for files, with the command line's one-line messages.
"""

from ._sinkscope import (InputError, UnsupportedError, UsageError, __version__, set_limit,
                         with_model_runtime)
from . import metrics
from ._results import Results

if with_model_runtime:
    from .commands import analyze, compare, dump, dynamics, fisher, prune, train
    from .model import Model, default_model

__all__ = ["metrics", "Results", "UsageError", "InputError", "UnsupportedError", "__version__",
           "set_limit"]
if with_model_runtime:
    __all__ += ["Model", "default_model", "analyze", "dynamics", "prune", "fisher", "compare",
                "dump", "train"]
