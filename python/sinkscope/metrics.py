"""Every analysis of ``sinkscope metrics`` on numpy arrays.

Attention is shaped ``(..., L, H, T, T)``: any number of leading batch dimensions (merged into
one input axis, input ``n`` of the tables is the flat index), then layers, heads, queries and
keys. float16, float32 or float64, C order, Fortran order or any strided view: the library reads
the array in place (no copy) and converts one input at a time to float64, exactly as it reads a
memory-mapped .npy. A copy is made only when leading batch dimensions cannot be merged without
one (``numpy.reshape`` decides). Optional pre-softmax ``scores`` (same shape, masked entries
``-inf``) make the log-ratio quantities exact (no zero policy needed).

Options are the command line's, as keywords with underscores (``--min-parts`` ->
``min_parts=``), with the same defaults and the same validation (``defaults()`` lists them).
Bad arrays and bad options raise ``ValueError`` with the command line's one-line message.
"""

import numpy as np

from . import _sinkscope
from ._results import Results

__all__ = ["analyze", "decompose", "head_distances", "reversal_rates", "betti_curves",
           "adjusted_rand_index", "cluster", "options", "defaults", "example_attention"]


def options(**kwargs):
    """An ``AnalysisOptions`` with the given fields set (``TypeError`` for an unknown name)."""
    o = _sinkscope.AnalysisOptions()
    for key, value in kwargs.items():
        if key.startswith("_") or not hasattr(o, key) or key == "to_dict":
            known = ", ".join(sorted(k for k in dir(o) if not k.startswith("_")
                                     and k != "to_dict"))
            raise TypeError(f"unknown analysis option {key!r}; options: {known}")
        if key == "analyses" and isinstance(value, str):
            value = [v for v in value.split(",") if v]
        setattr(o, key, value)
    return o


def defaults():
    """Every analysis option with its default, as run.json records them."""
    return _sinkscope.AnalysisOptions().to_dict()


def example_attention():
    """The deterministic example of ``sinkscope metrics --example``: (8, 4, 4, 16, 16) float32."""
    return _sinkscope.example_attention()


def _inputs(attention, scores, lengths, token_ids):
    attention = np.asarray(attention)
    if attention.ndim < 4:
        raise ValueError(f"attention: shape {attention.shape} has rank {attention.ndim}, "
                         "expected (..., L, H, T, T)")
    if attention.ndim > 5:  # leading batch dimensions -> one input axis
        attention = attention.reshape((-1,) + attention.shape[-4:])
    if scores is not None:
        scores = np.asarray(scores)
        if scores.ndim > 5:
            scores = scores.reshape((-1,) + scores.shape[-4:])
    if lengths is not None:
        lengths = np.asarray(lengths).reshape(-1)
    if token_ids is not None:
        token_ids = np.asarray(token_ids)
        if token_ids.ndim > 2:
            token_ids = token_ids.reshape(-1, token_ids.shape[-1])
    return attention, scores, lengths, token_ids


def analyze(attention, scores=None, *, lengths=None, token_ids=None, tokens=None,
            masking="auto", window=0, name="array", out=None, overwrite=False, report=True,
            progress=None, **kwargs):
    """Runs the analyses (all that attention alone supports, or ``analyses=[...]``).

    Parameters
    ----------
    attention : array (..., L, H, T, T)
    scores : array of the same shape, optional
    lengths : int array (N,), optional
        real lengths of padded encoder inputs.
    token_ids : int array (N, T), optional
        token ids (needed by ``sink="bos"`` with ``bos_id=``).
    tokens : list of lists of str, optional
        token strings per input (token specialisation names keys by them).
    masking : "auto" | "causal" | "bidirectional"
    window : int
        sliding window of causal attention (0: none).
    name : str
        the ``model`` column of the tables.
    out : path, optional
        also write the run directory the command line writes (tables, arrays, run.json,
        report.html when ``report``), all or nothing.
    progress : callable(n_inputs_done), optional
    **kwargs : analysis options (see ``defaults()``).

    Returns
    -------
    Results
    """
    o = options(**kwargs)
    attention, scores, lengths, token_ids = _inputs(attention, scores, lengths, token_ids)
    native = _sinkscope.metrics(attention, scores, lengths, token_ids, tokens or [], masking,
                                window, o, name, "" if out is None else str(out), overwrite,
                                report, progress)
    return Results._from_native(native, None if out is None else str(out))


def decompose(attention, scores=None, *, sink="first", **kwargs):
    """Every row's entropy parts (spec section 6): H(p) = H_b(s) + (1 - s) H(pi).

    Returns a dict of equal-length arrays, one entry per row that has at least ``min_parts``
    visible keys with the sink among them: ``input``, ``layer``, ``head``, ``query``,
    ``sink_mass`` (s), ``content_mass`` (1 - s, summed from the content parts),
    ``content_entropy`` (H(pi)) and ``entropy`` (H(p)), entropies in nats.
    """
    r = analyze(attention, scores, sink=sink, analyses=["entropy_rows"], **kwargs)
    rows = r.arrays["entropy_rows"]
    names = ["input", "layer", "head", "query", "sink_mass", "content_mass", "content_entropy",
             "entropy"]
    out = {n: rows[:, k] for k, n in enumerate(names)}
    for n in names[:4]:
        out[n] = out[n].astype(np.int64)
    return out


_DISTANCES = ("dA", "dA_perp", "sink_term", "js_keep", "js_drop", "cosine_keep", "cosine_drop",
              "euclidean_keep", "euclidean_drop")


def head_distances(attention, metric="dA_perp", scores=None, **kwargs):
    """The head x head distance matrix under ``metric`` (spec section 2): ``dA``, ``dA_perp``,
    ``sink_term``, or a classical metric in a convention (``js_keep``, ``js_drop``,
    ``cosine_keep``, ``cosine_drop``, ``euclidean_keep``, ``euclidean_drop``). Heads are ordered
    layer by layer (index = layer * H + head)."""
    if metric not in _DISTANCES:
        raise ValueError(f"metric {metric!r} is not one of {', '.join(_DISTANCES)}")
    r = analyze(attention, scores, analyses=["compositional"], **kwargs)
    return r.arrays["distances/" + metric]


def reversal_rates(attention, scores=None, **kwargs):
    """Reversal rates (spec section 3) as the ``reversal`` table: flip and vs_content rates per
    classical metric, dA vs dA_perp, exact or sampled (``triples=N``)."""
    return analyze(attention, scores, analyses=["heads"], **kwargs)["reversal"]


def adjusted_rand_index(a, b):
    """Adjusted Rand index of two labelings of the same heads (any integer labels), in [-1, 1]:
    for instance the ``cluster`` columns of two runs' clusters.csv, or of a clusters.csv and a
    clark2019.csv (spec section 4)."""
    return _sinkscope.adjusted_rand_index([int(x) for x in np.asarray(a).ravel()],
                                          [int(x) for x in np.asarray(b).ravel()])


def cluster(distance, k, linkage="average"):
    """Agglomerative clustering of an (n, n) head distance matrix into ``k`` clusters as the head
    analyses do it (``linkage``: average, complete, single or ward); numpy array of labels
    0..k-1, numbered by first appearance."""
    return np.asarray(_sinkscope.cluster(np.asarray(distance, dtype=np.float64), int(k), linkage),
                      dtype=np.int64)


def betti_curves(attention, scores=None, **kwargs):
    """Persistent homology (spec section 8) as the ``betti`` table: beta_0 and beta_1 on the
    101-point grid per layer (``per_head=True`` adds every head)."""
    return analyze(attention, scores, analyses=["topology"], **kwargs)["betti"]
