"""A checkpoint loaded by sinkscope, used the way TransformerLens' HookedTransformer is used.

    model = sinkscope.Model.load("path/to/hf_dir")     # or .gguf, llama2.c .bin; None: default
    tokens = model.to_tokens("Once upon a time")         # int64 [1, T]
    logits, cache = model.run_with_cache(tokens, names_filter="blocks.*.attn.hook_pattern")
    cache["blocks.0.attn.hook_pattern"]                  # float32 [1, H, T, T]

Hook names and shapes are TransformerLens' (``model.hook_names()`` lists them). Captured float32
tensors are shared with numpy without a copy.
"""

import os

import numpy as np

from . import _sinkscope


def default_model():
    """The small model shipped with sinkscope: $SINKSCOPE_DEFAULT_MODEL, else the copy installed
    inside this package, else models/default of the source tree the extension was built from."""
    env = os.environ.get("SINKSCOPE_DEFAULT_MODEL")
    if env:
        return env
    for candidate in (os.path.join(os.path.dirname(__file__), "models", "default"),
                      _sinkscope.source_default_model):
        if candidate and os.path.exists(os.path.join(candidate, "config.json")):
            return candidate
    raise ValueError("no model given and the default model was not found; pass a path or set "
                     "SINKSCOPE_DEFAULT_MODEL")


def _ids(tokens):
    """A token sequence as a list of ints: [T] or [1, T] arrays or lists."""
    a = np.asarray(tokens)
    if a.ndim == 2 and a.shape[0] == 1:
        a = a[0]
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise ValueError(f"tokens: expected integer ids shaped [T] or [1, T], got shape "
                         f"{a.shape} dtype {a.dtype}")
    return [int(v) for v in a]


def _head_mask(heads):
    """[(layer, head), ...] or "L.H,..." -> the command line's "L.H,..." form."""
    if heads is None:
        return ""
    if isinstance(heads, str):
        return heads
    return ",".join(f"{int(l)}.{int(h)}" for l, h in heads)


class Model:
    """A loaded checkpoint (HF directory, GGUF or llama2.c .bin)."""

    def __init__(self, native):
        self._m = native

    @classmethod
    def load(cls, path=None, *, device="cpu", dtype="float32", tokenizer="", bos="default",
             threads=0):
        """Loads a checkpoint. ``bos``: default (the tokenizer's configuration), always or never;
        ``threads``: 0 = all cores."""
        path = default_model() if path is None else os.fspath(path)
        return cls(_sinkscope.Model.load(path, device, dtype, tokenizer, bos, threads))

    @property
    def cfg(self):
        """Architecture and dimensions (n_layers, n_heads, d_model, d_head, d_vocab, ...)."""
        return self._m.cfg

    @property
    def path(self):
        return self._m.path

    @property
    def n_params(self):
        return self._m.n_params

    def hook_names(self):
        """Every hook of the model, in forward order."""
        return self._m.hook_names()

    def to_tokens(self, text):
        """Token ids of ``text`` (with BOS as the model's policy says), int64 [1, T]."""
        return np.asarray([self._m.encode(text)], dtype=np.int64)

    def to_string(self, tokens):
        """The text of a token sequence."""
        return self._m.decode(_ids(tokens))

    def to_str_tokens(self, tokens):
        """Each token's text."""
        if isinstance(tokens, str):
            tokens = self.to_tokens(tokens)
        return self._m.decode_tokens(_ids(tokens))

    def run_with_cache(self, tokens, names_filter=None, *, head_mask=None):
        """Runs one sequence (text, or ids [T] / [1, T]) and returns ``(logits, cache)``.

        ``names_filter``: None (every hook), a glob pattern or a list of them
        (``"blocks.*.attn.hook_pattern"``; a "re:" prefix makes it a regex), or a callable
        name -> bool. ``head_mask``: heads whose output is zero-ablated, [(layer, head), ...].
        The cache maps hook names to numpy arrays shaped as TransformerLens shapes them (batch 1).
        """
        if isinstance(tokens, str):
            tokens = self.to_tokens(tokens)
        if names_filter is None:
            patterns = ["*"]
        elif isinstance(names_filter, str):
            patterns = [names_filter]
        elif callable(names_filter):
            patterns = [n for n in self.hook_names() if names_filter(n)]
        else:
            patterns = list(names_filter)
        return self._m.run_with_cache(_ids(tokens), patterns, _head_mask(head_mask))

    def perplexity(self, texts, *, head_mask=None, stride=0, seed=None):
        """Next-token perplexity over texts (or token sequences), token-weighted; encoders give
        the masked-LM pseudo-perplexity (15% masked with ``seed``). ``stride`` > 0: sliding
        windows of the model's context. Returns a dict (perplexity, mean_nll, n_tokens, ...)."""
        if isinstance(texts, str):
            texts = [texts]
        samples = [self._m.encode(t) if isinstance(t, str) else _ids(t) for t in texts]
        return self._m.perplexity(samples, _head_mask(head_mask), stride, seed)

    def __repr__(self):
        c = self.cfg
        return (f"<sinkscope.Model {c['architecture']} {c['n_layers']} layers x "
                f"{c['n_heads']} heads from {self.path}>")
