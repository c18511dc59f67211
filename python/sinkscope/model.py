"""A checkpoint loaded by sinkscope, used the way TransformerLens' HookedTransformer is used.

    model = sinkscope.Model.load("path/to/hf_dir")     # or .gguf, llama2.c .bin; None: default
    tokens = model.to_tokens("Once upon a time")         # int64 [1, T]
    logits, cache = model.run_with_cache(tokens, names_filter="blocks.*.attn.hook_pattern")
    cache["blocks.0.attn.hook_pattern"]                  # float32 [1, H, T, T]
    def no_sink(pattern, hook):                          # an editing hook
        pattern[:, :, 1:, 0] = 0
        return pattern / pattern.sum(-1, keepdims=True)
    logits = model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_pattern", no_sink)])

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


def pad_right(sequences, pad_id=0):
    """Token sequences of different lengths as one batch: (ids int64 [batch, T_max], attention
    mask int64 [batch, T_max]), each row its tokens then ``pad_id``, the mask 1 on real tokens.
    Causal models take right padding: a real token never sees a later position, so its
    activations equal those of its sequence run alone."""
    rows = [_ids(s) for s in sequences]
    if not rows:
        raise ValueError("tokens: an empty batch")
    width = max(len(r) for r in rows)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for b, r in enumerate(rows):
        ids[b, :len(r)] = r
        mask[b, :len(r)] = 1
    return ids, mask


class HookPoint:
    """What an editing hook is told about where it runs: ``name`` (TransformerLens' hook name)
    and ``layer`` (None outside the blocks)."""

    def __init__(self, name, layer):
        self.name = name
        self.layer = None if layer < 0 else layer

    def __repr__(self):
        return f"<HookPoint {self.name}>"


def _wrap_hook(fn):
    """The user's ``fn(activation, hook)`` as the extension calls it. An exception raised inside
    names the hook it was raised at."""
    def call(activation, name, layer):
        try:
            out = fn(activation, HookPoint(name, layer))
        except Exception as e:
            e.add_note(f"raised by the sinkscope hook at {name}")
            raise
        if out is None or out is activation:
            return None
        out = np.asarray(out)
        if out.shape != activation.shape:
            raise ValueError(f"the hook at {name} returned shape {out.shape}, expected "
                             f"{activation.shape}")
        return np.ascontiguousarray(out)
    return call


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
        """Token ids of ``text`` (with BOS as the model's policy says), int64 [1, T]; a list of
        texts gives [batch, T_max] padded on the right with 0 (``pad_right`` gives the mask)."""
        if isinstance(text, str):
            return np.asarray([self._m.encode(text)], dtype=np.int64)
        return pad_right([self._m.encode(t) for t in text])[0]

    def to_string(self, tokens):
        """The text of a token sequence."""
        return self._m.decode(_ids(tokens))

    def to_str_tokens(self, tokens):
        """Each token's text."""
        if isinstance(tokens, str):
            tokens = self.to_tokens(tokens)
        return self._m.decode_tokens(_ids(tokens))

    def _batch(self, tokens, attention_mask):
        """(ids [batch, T], mask or None) of text, a list of texts, ids [T] / [batch, T] or a list
        of token sequences of different lengths (padded on the right)."""
        if isinstance(tokens, str):
            return self.to_tokens(tokens), attention_mask
        if isinstance(tokens, (list, tuple)) and tokens and (
                isinstance(tokens[0], str) or np.ndim(tokens[0]) == 1):
            seqs = [self._m.encode(t) if isinstance(t, str) else _ids(t) for t in tokens]
            if attention_mask is not None:
                raise ValueError("attention_mask: give it with a padded [batch, T] array, not "
                                 "with a list of sequences (their padding is built here)")
            if len({len(q) for q in seqs}) == 1:
                return np.asarray(seqs, dtype=np.int64), None
            return pad_right(seqs)
        a = np.asarray(tokens)
        if a.ndim == 1:
            a = a[None, :]
        if a.ndim != 2 or (a.size and a.dtype.kind not in "iu"):
            raise ValueError(f"tokens: expected integer ids shaped [T] or [batch, T], got shape "
                             f"{a.shape} dtype {a.dtype}")
        if attention_mask is not None:
            attention_mask = np.asarray(attention_mask)
            if attention_mask.shape != a.shape:
                raise ValueError(f"attention_mask: shape {attention_mask.shape}, expected "
                                 f"{a.shape} (the tokens')")
        return a.astype(np.int64, copy=False), attention_mask

    def _patterns(self, names_filter):
        if names_filter is None:
            return ["*"]
        if isinstance(names_filter, str):
            return [names_filter]
        if callable(names_filter):
            return [n for n in self.hook_names() if names_filter(n)]
        return list(names_filter)

    def _hooks(self, fwd_hooks):
        """[(hook names, wrapped fn)] of TransformerLens' fwd_hooks: [(name or filter, fn)]."""
        names = self.hook_names()
        out = []
        for where, fn in fwd_hooks:
            if callable(where):
                chosen = [n for n in names if where(n)]
            else:
                chosen = [where] if isinstance(where, str) else list(where)
                unknown = [n for n in chosen if n not in names]
                if unknown:
                    raise ValueError(f"no hook named {unknown[0]!r} (model.hook_names() lists "
                                     "them)")
            out.append((chosen, _wrap_hook(fn)))
        return out

    def run_with_cache(self, tokens, names_filter=None, *, attention_mask=None, head_mask=None,
                       fwd_hooks=(), intervene=None):
        """Runs text, a list of texts, ids [T] / [batch, T] or token sequences of different
        lengths, and returns ``(logits, cache)``.

        ``names_filter``: None (every hook), a glob pattern or a list of them
        (``"blocks.*.attn.hook_pattern"``; a "re:" prefix makes it a regex), or a callable
        name -> bool. ``attention_mask``: int [batch, T], 1 on real tokens, right padding only
        (sequences of different lengths are padded here). ``head_mask``: heads whose output is
        zero-ablated, [(layer, head), ...]. ``fwd_hooks``: editing hooks as in
        ``run_with_hooks``; the cache holds the activations as edited. ``intervene``: a
        ready-made intervention, as ``sinkscope analyze --intervene`` takes it (for instance
        ``"sink_removal"``, ``"sink_key:scale=0"``, ``"head_ablation:mode=zero:heads=1.0,1.2"``;
        ``docs/user_guide.md`` lists them), applied before ``fwd_hooks``. The cache maps hook
        names to numpy arrays shaped as TransformerLens shapes them ([batch, ...]).
        """
        ids, mask = self._batch(tokens, attention_mask)
        return self._m.run(ids, mask, self._patterns(names_filter), _head_mask(head_mask),
                           self._hooks(fwd_hooks), intervene or "")

    def run_with_hooks(self, tokens, fwd_hooks=(), *, attention_mask=None, head_mask=None,
                       names_filter=None, intervene=None):
        """Runs the model with editing hooks and returns its logits [batch, T, vocab] (with a
        ``names_filter``: ``(logits, cache)``).

        ``fwd_hooks``: ``[(name or filter, fn), ...]`` as in TransformerLens: ``fn(activation,
        hook)`` gets the activation as a numpy array (float32 or float64, sharing the forward's
        memory when it can: an edit in place is seen by the forward) and ``hook`` (``.name``,
        ``.layer``); it returns the edited array (same shape) or None to go on with the
        activation as it is. Hooks at one point run in the order given. An exception inside a
        hook is raised from this call with a note naming the hook. ``intervene``: as in
        ``run_with_cache``.
        """
        logits, cache = self._m.run(*self._batch(tokens, attention_mask),
                                    [] if names_filter is None else self._patterns(names_filter),
                                    _head_mask(head_mask), self._hooks(fwd_hooks),
                                    intervene or "")
        return logits if names_filter is None else (logits, cache)

    def patch(self, source, target, *, hook_kinds="resid_pre,z", metric="nll", answer="",
              wrong="", per_head=True, per_position=False):
        """Activation patching, as ``sinkscope patch``: ``target`` (text or ids) is run again
        with one hook (a layer's, or one head's part of it) taken from ``source``'s run (as many
        tokens), for every hook kind in ``hook_kinds`` (embed, resid_pre, resid_mid, resid_post, q,
        k, v, rot_q, rot_k, attn_scores, pattern, z), and ``metric`` of the logits is tabled:
        ``nll`` (mean NLL of the source's next tokens; with ``answer``, of that token after the
        last position) or ``logit_diff`` (logit(answer) - logit(wrong) after the last position;
        a token's text or "#ID"). ``per_head`` / ``per_position`` add a row for each head / each
        position patched alone (the table's ``head`` / ``position``, -1 for all). Returns ``{"table": {column: array}, "target_value",
        "source_value"}``; the table's last row (hook "*") patches every hook, which reproduces
        the source run."""
        src = self._m.encode(source) if isinstance(source, str) else _ids(source)
        tgt = self._m.encode(target) if isinstance(target, str) else _ids(target)
        table, target_value, source_value = self._m.patch(src, tgt, hook_kinds, metric, answer,
                                                          wrong, per_head, per_position)
        return {"table": table, "target_value": target_value, "source_value": source_value}

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
