#!/usr/bin/python3
"""Held-out perplexity of a count-based bigram model over a trained model's own tokenization.

The baseline issue 53 compares `sinkscope perplexity` with. The text is tokenized with the
tokenizer.json that `sinkscope train` wrote (Hugging Face byte-level BPE, applied by the code
here: added tokens split out, the GPT-2 pre-tokenizer regex, bytes mapped to GPT-2's printable
characters, merges applied lowest rank first), and cut into sequences the way `train` cuts its
corpus: the whole file is encoded at once, split into chunks of seq_len - 1 tokens, each led by
BOS; the tail that fills no chunk is dropped. Counts come from the training file's sequences
(including BOS -> first token), and every token after BOS of every held-out sequence is scored
once, given the token before it: the mean NLL (nats per BPE token) and its exp, the perplexity,
over the same tokens `sinkscope perplexity` scores on the --write-jsonl file.

Smoothing: interpolated Kneser-Ney (default; one absolute discount D = n1 / (n1 + 2 n2) from the
counts of counts, lower order = continuation counts interpolated with the uniform distribution
over the vocabulary less the special tokens) or add-k (--smoothing add-k --k K).

    /usr/bin/python3 scripts/bigram_baseline.py --tokenizer RUN/tokenizer.json \\
        --train corpus-en/train.txt --heldout corpus-en/heldout.txt \\
        --write-jsonl heldout-seqs.jsonl
    sinkscope perplexity --model RUN --data heldout-seqs.jsonl     # the same tokens
"""
import argparse
import json
import math
import re
import sys
import unicodedata

import numpy as np


def fail(message):
    """Stops with one line on stderr and exit status 1."""
    raise SystemExit("bigram_baseline: error: " + message)


# ----------------------------------------------------------------------------- tokenizer

def byte_symbols():
    """The character byte-level BPE writes for each byte (the table of HF's ByteLevel): a byte
    that is a visible Latin-1 character (0x21-0x7e, 0xa1-0xac, 0xae-0xff) stands for itself; the
    68 others (controls, space, 0x7f-0xa0, the soft hyphen), in increasing order, take the
    characters U+0100, U+0101, ..."""
    visible = [b for b in range(256) if 0x21 <= b <= 0x7e or 0xa1 <= b <= 0xac or 0xae <= b]
    hidden = [b for b in range(256) if b not in set(visible)]
    table = {b: chr(b) for b in visible}
    table.update({b: chr(0x100 + i) for i, b in enumerate(hidden)})
    return table


# Unicode White_Space (what \s matches in the regex engines HF and sinkscope use).
WHITE_SPACE = set("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | \
    {chr(c) for c in range(0x2000, 0x200b)}

# The GPT-2 pattern, 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+,
# for ASCII text, where \p{L} = [A-Za-z], \p{N} = [0-9] and \s = [\t\n\v\f\r ].
_ASCII_GPT2 = re.compile(
    r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\t\n\x0b\x0c\r A-Za-z0-9]+"
    r"|[\t\n\x0b\x0c\r ]+(?![^\t\n\x0b\x0c\r ])|[\t\n\x0b\x0c\r ]+")


def _kind(ch):
    if ch in WHITE_SPACE:
        return "s"
    c = unicodedata.category(ch)
    return "L" if c[0] == "L" else "N" if c[0] == "N" else "o"


def gpt2_split(text):
    """The GPT-2 pre-tokenizer's pieces (leftmost alternative that matches, as a regex engine)."""
    if text.isascii():
        return _ASCII_GPT2.findall(text)
    kinds = [_kind(c) for c in text]
    out, i, n = [], 0, len(text)
    while i < n:
        if text[i] == "'":
            m = re.match(r"'(?:s|t|re|ve|m|ll|d)", text[i:i + 3])
            if m:
                out.append(m.group(0))
                i += len(m.group(0))
                continue
        j = i + 1 if text[i] == " " and i + 1 < n else i
        k = kinds[j]
        if k in "LNo" and (j == i or kinds[j] != "s"):
            e = j + 1
            while e < n and kinds[e] == k:
                e += 1
            out.append(text[i:e])
            i = e
            continue
        # Whitespace: \s+(?!\S) leaves the last one before a non-space; \s+ takes a single one.
        e = i
        while e < n and kinds[e] == "s":
            e += 1
        if e < n and e - i >= 2:
            e -= 1
        elif e < n:
            e = i + 1
        out.append(text[i:e])
        i = e
    return out


class ByteLevelBPE:
    """A tokenizer.json of a byte-level BPE (model BPE, pre_tokenizer ByteLevel), as HF applies it."""

    def __init__(self, path):
        try:
            with open(path, encoding="utf-8") as f:
                t = json.load(f)
        except OSError as e:
            fail("%s: %s" % (path, e.strerror))
        except (ValueError, UnicodeDecodeError) as e:
            fail("%s: not a tokenizer.json (%s)" % (path, e))
        if not isinstance(t, dict) or not isinstance(t.get("model"), dict) or \
                not isinstance(t["model"].get("vocab"), dict) or \
                not isinstance(t["model"].get("merges"), list):
            fail("%s: not a tokenizer.json of a BPE model (no model.vocab / model.merges)" % path)
        model = t.get("model") or {}
        if model.get("type") != "BPE":
            fail("%s: model type %r, expected BPE" % (path, model.get("type")))
        pre = t.get("pre_tokenizer") or {}
        if pre.get("type") != "ByteLevel" or t.get("normalizer") is not None:
            fail("%s: only a byte-level BPE (pre_tokenizer ByteLevel, no normalizer) is "
                 "supported" % path)
        if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix") or \
                model.get("dropout"):
            fail("%s: subword prefix/suffix or dropout is not supported" % path)
        self.use_regex = pre.get("use_regex", True)
        self.add_prefix_space = pre.get("add_prefix_space", False)
        self.ignore_merges = model.get("ignore_merges", False)
        self.vocab = model["vocab"]
        self.ranks = {}
        for r, m in enumerate(model["merges"]):
            a, b = m.split(" ") if isinstance(m, str) else m
            self.ranks.setdefault((a, b), r)
        self.added = {a["content"]: a["id"] for a in t.get("added_tokens", [])}
        self.special_ids = {a["id"] for a in t.get("added_tokens", []) if a.get("special")}
        self.vocab_size = max(list(self.vocab.values()) + list(self.added.values())) + 1
        self.byte_map = byte_symbols()
        self.cache = {}
        self._added_re = re.compile("|".join(re.escape(s) for s in
                                             sorted(self.added, key=len, reverse=True))) \
            if self.added else None
        bos = None
        for step in ((t.get("post_processor") or {}).get("single") or []):
            if "SpecialToken" in step:
                bos = self.added.get(step["SpecialToken"]["id"])
                break
        self.bos_id = bos

    def bpe(self, word):
        ids = self.cache.get(word)
        if ids is not None:
            return ids
        if self.ignore_merges and word in self.vocab:
            ids = [self.vocab[word]]
        else:
            parts = list(word)
            while len(parts) > 1:
                best, pos = None, -1
                for i in range(len(parts) - 1):
                    r = self.ranks.get((parts[i], parts[i + 1]))
                    if r is not None and (best is None or r < best):
                        best, pos = r, i
                if best is None:
                    break
                # Merge every occurrence of that pair, left to right (HF's queue does the same).
                a, b = parts[pos], parts[pos + 1]
                merged, i = [], 0
                while i < len(parts):
                    if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                        merged.append(a + b)
                        i += 2
                    else:
                        merged.append(parts[i])
                        i += 1
                parts = merged
            try:
                ids = [self.vocab[p] for p in parts]
            except KeyError as e:
                fail("piece %r is not in the tokenizer's vocabulary" % e.args[0])
        self.cache[word] = ids
        return ids

    def encode_plain(self, text):
        if self.add_prefix_space and not text.startswith(" "):
            text = " " + text
        pieces = gpt2_split(text) if self.use_regex else [text]
        out = []
        bm = self.byte_map
        for p in pieces:
            out.extend(self.bpe("".join(bm[b] for b in p.encode("utf-8"))))
        return out

    def encode(self, text):
        """Text -> ids without special tokens added (added tokens in the text are split out)."""
        if not self._added_re:
            return self.encode_plain(text)
        out, pos = [], 0
        for m in self._added_re.finditer(text):
            if m.start() > pos:
                out.extend(self.encode_plain(text[pos:m.start()]))
            out.append(self.added[m.group(0)])
            pos = m.end()
        if pos < len(text):
            out.extend(self.encode_plain(text[pos:]))
        return out


# ----------------------------------------------------------------------------- bigram

def sequences(ids, seq_len, bos):
    """[n, seq_len] array: BOS then seq_len - 1 consecutive tokens; the tail is dropped."""
    chunk = seq_len - 1
    n = len(ids) // chunk
    a = np.empty((n, seq_len), dtype=np.int64)
    a[:, 0] = bos
    a[:, 1:] = np.asarray(ids[:n * chunk], dtype=np.int64).reshape(n, chunk)
    return a


def pair_codes(seqs, V):
    return (seqs[:, :-1] * V + seqs[:, 1:]).ravel()


def bigram_nll(train_seqs, held_seqs, V, targets, smoothing, k, discount):
    """Per-token NLLs of every held-out token after BOS, and the discount used."""
    codes, counts = np.unique(pair_codes(train_seqs, V), return_counts=True)
    prev, nxt = codes // V, codes % V
    c_prev = np.bincount(prev, weights=counts, minlength=V)        # c(v)
    held = pair_codes(held_seqs, V)
    hp, hn = held // V, held % V
    idx = np.searchsorted(codes, held)
    idx_c = np.minimum(idx, len(codes) - 1)
    c_pair = np.where(codes[idx_c] == held, counts[idx_c], 0).astype(np.float64)
    if smoothing == "add-k":
        p = (c_pair + k) / (c_prev[hp] + k * targets)
        return -np.log(p), None
    # Interpolated Kneser-Ney.
    n1 = np.count_nonzero(counts == 1)
    n2 = np.count_nonzero(counts == 2)
    D = discount if discount is not None else (n1 / (n1 + 2.0 * n2) if n1 + n2 else 0.5)
    types_after = np.bincount(prev, minlength=V).astype(np.float64)   # N1+(v, .)
    cont = np.bincount(nxt, minlength=V).astype(np.float64)           # N1+(., w)
    n_types = float(len(codes))                                       # N1+(., .)
    n_cont_types = float(np.count_nonzero(cont))
    p_cont = np.maximum(cont - D, 0.0) / n_types + D * n_cont_types / n_types / targets
    cv = c_prev[hp]
    seen = cv > 0
    safe = np.where(seen, cv, 1.0)
    p = np.where(seen,
                 np.maximum(c_pair - D, 0.0) / safe + D * types_after[hp] / safe * p_cont[hn],
                 p_cont[hn])
    return -np.log(p), D


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="tokenizer.json written by sinkscope train")
    ap.add_argument("--train", required=True, help="the training text the counts come from")
    ap.add_argument("--heldout", required=True, help="the held-out text scored")
    ap.add_argument("--seq-len", type=int, default=64,
                    help="the training context length: BOS + seq_len - 1 tokens a sequence")
    ap.add_argument("--smoothing", choices=["kn", "add-k"], default="kn")
    ap.add_argument("--k", type=float, default=0.01, help="add-k's k")
    ap.add_argument("--discount", type=float, default=None,
                    help="Kneser-Ney's discount (default: n1 / (n1 + 2 n2))")
    ap.add_argument("--write-jsonl", help="write the held-out sequences as {\"ids\": [...]} lines "
                    "for sinkscope perplexity --data")
    ap.add_argument("--json", help="write the result as JSON here")
    a = ap.parse_args()
    if a.seq_len < 2:
        ap.error("--seq-len must be >= 2")
    if not a.k > 0:
        ap.error("--k must be > 0")
    if a.discount is not None and not 0 < a.discount < 1:
        ap.error("--discount must be in (0, 1)")

    tok = ByteLevelBPE(a.tokenizer)
    if tok.bos_id is None:
        fail("%s: no BOS in its post_processor (a model trained without BOS?)" % a.tokenizer)

    def read(path):
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except OSError as e:
            fail("%s: %s" % (path, e.strerror))
        except UnicodeDecodeError as e:
            fail("%s: not UTF-8 text (%s)" % (path, e))

    train_ids = tok.encode(read(a.train))
    held_ids = tok.encode(read(a.heldout))
    train_seqs = sequences(train_ids, a.seq_len, tok.bos_id)
    held_seqs = sequences(held_ids, a.seq_len, tok.bos_id)
    for path, ids, seqs in ((a.train, train_ids, train_seqs), (a.heldout, held_ids, held_seqs)):
        if len(seqs) == 0:
            fail("%s: %d tokens, fewer than one sequence needs (seq_len - 1 = %d)" %
                 (path, len(ids), a.seq_len - 1))
    V = tok.vocab_size
    targets = V - len(tok.special_ids)   # what a next token can be: no special token
    nll, D = bigram_nll(train_seqs, held_seqs, V, targets, a.smoothing, a.k, a.discount)
    mean = float(nll.mean())
    result = {
        "tokenizer": a.tokenizer, "train": a.train, "heldout": a.heldout, "seq_len": a.seq_len,
        "smoothing": "interpolated Kneser-Ney" if a.smoothing == "kn" else "add-k",
        "discount": D, "k": a.k if a.smoothing == "add-k" else None,
        "vocab_size": V, "targets": targets,
        "train_tokens": len(train_ids), "train_sequences": int(len(train_seqs)),
        "heldout_tokens": len(held_ids), "heldout_sequences": int(len(held_seqs)),
        "scored_tokens": int(nll.size), "mean_nll": mean, "perplexity": math.exp(mean),
    }
    try:
        if a.write_jsonl:
            with open(a.write_jsonl, "w") as f:
                for s in held_seqs:
                    f.write(json.dumps({"ids": [int(x) for x in s]}, separators=(",", ":")) + "\n")
        if a.json:
            with open(a.json, "w") as f:
                json.dump(result, f, indent=2)
                f.write("\n")
    except OSError as e:
        fail("%s: %s" % (e.filename, e.strerror))
    print("smoothing %s%s" % (result["smoothing"],
                              ", D = %.4f" % D if D is not None else ", k = %g" % a.k))
    print("train tokens %d (%d sequences of %d), held-out tokens %d (%d sequences)" %
          (len(train_ids), len(train_seqs), a.seq_len, len(held_ids), len(held_seqs)))
    print("scored tokens %d" % nll.size)
    print("mean_nll %.6f" % mean)
    print("perplexity %.4f" % math.exp(mean))
    return 0


if __name__ == "__main__":
    sys.exit(main())
