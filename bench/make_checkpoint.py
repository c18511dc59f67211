#!/usr/bin/python3
"""Random-weight checkpoints with the public shapes of real models, streamed to disk (issue 47).

usage:
  make_checkpoint.py OUT --preset NAME --format {safetensors,gguf-q4_k,gguf-q8_0,gguf-f16}
                     [--shard-gb 2] [--seed 0] [--tokens T]
                     [--layers N] [--d-model N] [--heads N] [--kv-heads N] [--d-mlp N]
                     [--vocab N] [--d-head N]
  make_checkpoint.py --list

Presets (--list prints each with its parameter count and bytes per format): llama-3.2-1b,
llama-3.2-3b, llama-3-8b, qwen2-7b, gemma-2-2b. Their values are the public config.json values of
the Hugging Face repositories meta-llama/Llama-3.2-1B, meta-llama/Llama-3.2-3B,
meta-llama/Meta-Llama-3-8B, Qwen/Qwen2-7B and google/gemma-2-2b (written to OUT/config.json with
torch_dtype bfloat16, the dtype of the shards). The overrides change the shape and keep the
architecture (tests use tiny shapes); changing --d-model or --heads without --d-head sets
head_dim to d_model / heads (and Gemma-2's query_pre_attn_scalar to head_dim, as the public 2B).

Formats:
* safetensors: OUT is a directory with config.json, bf16 shards model-0000i-of-0000N.safetensors
  of at most --shard-gb GB each (a larger tensor gets a shard of its own) and
  model.safetensors.index.json (weight_map, metadata.total_size). Tied embeddings store no
  lm_head.weight, as save_pretrained does.
* gguf-*: OUT is one GGUF v3 file (llama.cpp tensor names and <arch>.* metadata keys; no
  tokenizer: sinkscope runs it on token ids). Every 2-D weight in Q4_K, Q8_0 or F16; a weight
  whose rows do not fill whole blocks (tiny shapes: Q4_K needs rows of a multiple of 256) falls
  back to Q8_0, then F16. Norms, biases and Llama-3's rope_freqs (the llama3 RoPE scaling as
  llama.cpp's converter stores it) are F32. As llama.cpp's converter: the llama family's
  attn_q / attn_k rows are permuted for interleaved RoPE (per head, HF row j < d_head/2 goes to
  row 2j, row d_head/2 + j to row 2j + 1) and Gemma-2's norms are stored as 1 + w. With random
  weights either layout is a valid model; done as the converter does, the GGUF and the
  safetensors checkpoint of one seed are the same model up to rounding.

Weights: normal, std 0.02 (the presets' initializer_range) for matrices and biases; norm scales
1 (Gemma-2: w = 0, scale 1 + w). Tensor k draws from numpy's default_rng([seed, k]) in HF order,
so every format of one seed holds the same values. Nothing is held whole: each tensor is
generated, converted (bf16: float32 rounded to nearest even; GGUF: encoded) and written in row
chunks of about 4M values, so peak memory is a few chunks whatever the model size.
--tokens T also writes random token ids [1, T] (int64 .npy, first id BOS when in range) for
`sinkscope analyze --data`: OUT/ids_T.npy, or OUT's name with .ids_T.npy for a GGUF file.

Progress (tensor i of N, bytes written) goes to stderr. An existing non-empty OUT is refused and
left untouched; the checkpoint is written to OUT.partial and renamed to OUT when complete.
"""
import argparse
import copy
import dataclasses
import json
import os
import shutil
import signal
import sys
import time

import numpy as np

from checkpoint_formats import (GGML_BLOCKS, GGML_TYPE_NAMES, GGUF_ALIGN, T_F16, T_F32, T_Q4_K,
                                T_Q8_0, GgufWriter, bf16_bits, encode_ggml, gguf_file_size,
                                safetensors_header)

CHUNK_VALUES = 1 << 22  # values generated and written at a time (16 MiB of float32)
STD = 0.02

_LLAMA3_ROPE = {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                "original_max_position_embeddings": 8192, "rope_type": "llama3"}
_LLAMA_COMMON = {"architectures": ["LlamaForCausalLM"], "attention_bias": False,
                 "attention_dropout": 0.0, "bos_token_id": 128000, "eos_token_id": 128001,
                 "hidden_act": "silu", "initializer_range": 0.02, "mlp_bias": False,
                 "model_type": "llama", "num_key_value_heads": 8, "pretraining_tp": 1,
                 "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "use_cache": True,
                 "vocab_size": 128256}

# The public config.json of each model (minus torch_dtype / transformers_version).
PRESETS = {
    "llama-3.2-1b": {**_LLAMA_COMMON, "head_dim": 64, "hidden_size": 2048,
                     "intermediate_size": 8192, "max_position_embeddings": 131072,
                     "num_attention_heads": 32, "num_hidden_layers": 16,
                     "rope_scaling": _LLAMA3_ROPE, "tie_word_embeddings": True},
    "llama-3.2-3b": {**_LLAMA_COMMON, "head_dim": 128, "hidden_size": 3072,
                     "intermediate_size": 8192, "max_position_embeddings": 131072,
                     "num_attention_heads": 24, "num_hidden_layers": 28,
                     "rope_scaling": _LLAMA3_ROPE, "tie_word_embeddings": True},
    "llama-3-8b": {**_LLAMA_COMMON, "hidden_size": 4096, "intermediate_size": 14336,
                   "max_position_embeddings": 8192, "num_attention_heads": 32,
                   "num_hidden_layers": 32, "rope_scaling": None, "tie_word_embeddings": False},
    "qwen2-7b": {"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
                 "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu",
                 "hidden_size": 3584, "initializer_range": 0.02, "intermediate_size": 18944,
                 "max_position_embeddings": 131072, "max_window_layers": 28,
                 "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28,
                 "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
                 "sliding_window": 131072, "tie_word_embeddings": False, "use_cache": True,
                 "use_sliding_window": False, "vocab_size": 152064},
    "gemma-2-2b": {"architectures": ["Gemma2ForCausalLM"], "attention_bias": False,
                   "attention_dropout": 0.0, "attn_logit_softcapping": 50.0, "bos_token_id": 2,
                   "cache_implementation": "hybrid", "eos_token_id": 1,
                   "final_logit_softcapping": 30.0, "head_dim": 256,
                   "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
                   "hidden_size": 2304, "initializer_range": 0.02, "intermediate_size": 9216,
                   "max_position_embeddings": 8192, "model_type": "gemma2",
                   "num_attention_heads": 8, "num_hidden_layers": 26, "num_key_value_heads": 4,
                   "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
                   "rope_theta": 10000.0, "sliding_window": 4096, "use_cache": True,
                   "vocab_size": 256000},
}

# Per family: llama.cpp architecture, q/k/v biases, Gemma-2's sandwich norms and zero-centred
# norm weights, the GGUF q/k row permutation, transformers' tie_word_embeddings default.
FAMILIES = {
    "llama": {"gguf_arch": "llama", "qkv_bias": False, "gemma2": False, "permute_qk": True,
              "tied_default": False},
    "qwen2": {"gguf_arch": "qwen2", "qkv_bias": True, "gemma2": False, "permute_qk": False,
              "tied_default": False},
    "gemma2": {"gguf_arch": "gemma2", "qkv_bias": False, "gemma2": True, "permute_qk": False,
               "tied_default": True},
}

FORMATS = {"safetensors": None, "gguf-q4_k": T_Q4_K, "gguf-q8_0": T_Q8_0, "gguf-f16": T_F16}
FILE_TYPES = {T_F16: 1, T_Q8_0: 7, T_Q4_K: 14}  # general.file_type: llama.cpp LLAMA_FTYPE_MOSTLY_*


@dataclasses.dataclass
class Model:
    preset: str
    config: dict  # the config.json written (public values with the overrides applied)
    family: str
    L: int  # layers
    D: int  # d_model
    H: int  # query heads
    Hkv: int  # key/value heads
    dh: int  # head size
    F: int  # d_mlp
    V: int  # vocabulary
    tied: bool


@dataclasses.dataclass
class Tensor:
    index: int  # position in HF order: the tensor's random stream
    hf: str
    gguf: str
    shape: tuple  # row-major: (rows, cols) for a matrix, (n,) for a vector
    kind: str  # matrix | bias | norm
    heads: int = 0  # llama attn_q / attn_k: heads whose rows GGUF permutes

    @property
    def numel(self):
        return int(np.prod(self.shape, dtype=np.int64))


# ---- model description ----

def apply_overrides(cfg, a):
    """The preset's config with the command line's shape overrides applied."""
    cfg = copy.deepcopy(cfg)
    keys = [("layers", "num_hidden_layers"), ("d_model", "hidden_size"),
            ("heads", "num_attention_heads"), ("kv_heads", "num_key_value_heads"),
            ("d_mlp", "intermediate_size"), ("vocab", "vocab_size"), ("d_head", "head_dim")]
    for arg, key in keys:
        if getattr(a, arg) is not None:
            cfg[key] = getattr(a, arg)
    reshaped = a.d_model is not None or a.heads is not None
    if reshaped and a.d_head is None and "head_dim" in cfg:
        cfg["head_dim"] = cfg["hidden_size"] // cfg["num_attention_heads"]
    if "query_pre_attn_scalar" in cfg and (reshaped or a.d_head is not None):
        cfg["query_pre_attn_scalar"] = cfg["head_dim"]  # = head_dim in the public 2B config
    if "max_window_layers" in cfg:
        cfg["max_window_layers"] = min(cfg["max_window_layers"], cfg["num_hidden_layers"])
    return cfg


def model_from_config(preset, cfg):
    family = cfg["model_type"]
    fam = FAMILIES[family]
    D, H = cfg["hidden_size"], cfg["num_attention_heads"]
    m = Model(preset=preset, config=cfg, family=family, L=cfg["num_hidden_layers"], D=D, H=H,
              Hkv=cfg.get("num_key_value_heads", H), dh=cfg.get("head_dim", D // max(H, 1)),
              F=cfg["intermediate_size"], V=cfg["vocab_size"],
              tied=cfg.get("tie_word_embeddings", fam["tied_default"]))
    if min(m.L, m.D, m.H, m.Hkv, m.dh, m.F, m.V) <= 0:
        sys.exit("make_checkpoint.py: every size must be positive")
    if m.H % m.Hkv or m.dh % 2:
        sys.exit(f"make_checkpoint.py: heads ({m.H}) must be a multiple of kv heads ({m.Hkv}) and "
                 f"the head size ({m.dh}) even")
    return m


def layer_tensors(m, l):
    """(HF suffix, GGUF suffix, shape, kind, permuted heads) of layer l, in HF order."""
    fam = FAMILIES[m.family]
    perm = fam["permute_qk"]
    q, kv = m.H * m.dh, m.Hkv * m.dh
    rows = [("input_layernorm.weight", "attn_norm.weight", (m.D,), "norm", 0),
            ("self_attn.q_proj.weight", "attn_q.weight", (q, m.D), "matrix", m.H if perm else 0),
            ("self_attn.k_proj.weight", "attn_k.weight", (kv, m.D), "matrix",
             m.Hkv if perm else 0),
            ("self_attn.v_proj.weight", "attn_v.weight", (kv, m.D), "matrix", 0)]
    if fam["qkv_bias"]:
        rows += [("self_attn.q_proj.bias", "attn_q.bias", (q,), "bias", 0),
                 ("self_attn.k_proj.bias", "attn_k.bias", (kv,), "bias", 0),
                 ("self_attn.v_proj.bias", "attn_v.bias", (kv,), "bias", 0)]
    rows.append(("self_attn.o_proj.weight", "attn_output.weight", (m.D, q), "matrix", 0))
    if fam["gemma2"]:  # sandwich norms
        rows += [("post_attention_layernorm.weight", "post_attention_norm.weight", (m.D,), "norm",
                  0),
                 ("pre_feedforward_layernorm.weight", "ffn_norm.weight", (m.D,), "norm", 0)]
    else:
        rows.append(("post_attention_layernorm.weight", "ffn_norm.weight", (m.D,), "norm", 0))
    rows += [("mlp.gate_proj.weight", "ffn_gate.weight", (m.F, m.D), "matrix", 0),
             ("mlp.up_proj.weight", "ffn_up.weight", (m.F, m.D), "matrix", 0),
             ("mlp.down_proj.weight", "ffn_down.weight", (m.D, m.F), "matrix", 0)]
    if fam["gemma2"]:
        rows.append(("post_feedforward_layernorm.weight", "post_ffw_norm.weight", (m.D,), "norm",
                     0))
    return rows


def model_tensors(m):
    """Every parameter tensor in HF order (a tied model stores no lm_head)."""
    rows = [("model.embed_tokens.weight", "token_embd.weight", (m.V, m.D), "matrix", 0)]
    for l in range(m.L):
        rows += [(f"model.layers.{l}.{hf}", f"blk.{l}.{gg}", shape, kind, heads)
                 for hf, gg, shape, kind, heads in layer_tensors(m, l)]
    rows.append(("model.norm.weight", "output_norm.weight", (m.D,), "norm", 0))
    if not m.tied:
        rows.append(("lm_head.weight", "output.weight", (m.V, m.D), "matrix", 0))
    return [Tensor(i, *row) for i, row in enumerate(rows)]


def n_parameters(m):
    return sum(t.numel for t in model_tensors(m))


def llama3_rope_divisors(cfg, dh):
    """rope_freqs of llama.cpp for rope_type llama3: inv_freq_default / inv_freq_llama3 per pair
    (transformers' _compute_llama3_parameters: wavelengths below original/high_freq_factor keep
    their frequency, above original/low_freq_factor are divided by factor, in between smoothly)."""
    s = cfg["rope_scaling"]
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    original = s["original_max_position_embeddings"]
    inv = float(cfg["rope_theta"]) ** -(np.arange(0, dh, 2, dtype=np.float64) / dh)
    wavelen = 2 * np.pi / inv
    smooth = (original / wavelen - low) / (high - low)
    div = np.where(wavelen < original / high, 1.0,
                   np.where(wavelen > original / low, factor,
                            1.0 / ((1 - smooth) / factor + smooth)))
    return div.astype(np.float32)


# ---- values ----

def chunk_rows(t, m):
    """Rows per chunk: about CHUNK_VALUES values, whole heads for a permuted q/k."""
    if len(t.shape) == 1:
        return 1
    rows = max(1, CHUNK_VALUES // t.shape[1])
    return max(m.dh, rows // m.dh * m.dh) if t.heads else rows


def hf_values(t, m, seed):
    """The tensor's values (HF layout and conventions) as float32 row chunks."""
    if t.kind == "norm":  # scale 1: weight 1, Gemma-2's zero-centred weight 0
        yield np.full(t.shape, 0.0 if FAMILIES[m.family]["gemma2"] else 1.0, np.float32)
        return
    rng = np.random.default_rng([seed, t.index])
    if len(t.shape) == 1:
        yield rng.standard_normal(t.shape, dtype=np.float32) * np.float32(STD)
        return
    rows, cols = t.shape
    step = chunk_rows(t, m)
    for r0 in range(0, rows, step):  # one stream: the same values whatever the chunking
        n = min(step, rows - r0)
        yield rng.standard_normal((n, cols), dtype=np.float32) * np.float32(STD)


def permute_rows(w, dh):
    """HF q/k rows -> llama.cpp's interleaved-RoPE order, per head of dh rows (whole heads)."""
    return w.reshape(-1, 2, dh // 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)


def gguf_values(t, m, seed):
    """The tensor's values as llama.cpp's converter stores them, as float32 row chunks."""
    for w in hf_values(t, m, seed):
        if t.heads:
            w = permute_rows(w, m.dh)
        elif t.kind == "norm" and FAMILIES[m.family]["gemma2"]:
            w = w + np.float32(1)  # llama.cpp multiplies by the stored 1 + w
        yield w


# ---- progress and output safety ----

class Progress:
    """Tensor i of N and bytes written, on stderr."""

    def __init__(self, n):
        self.n, self.i, self.bytes, self.t0 = n, 0, 0, time.perf_counter()

    def done(self, name, shape, dtype, nbytes):
        self.i += 1
        self.bytes += nbytes
        print(f"[{self.i:>4}/{self.n}] {name:<48} {'x'.join(map(str, shape)):>13} {dtype:<5} "
              f"{self.bytes / 1e9:7.2f} GB written, {time.perf_counter() - self.t0:6.1f} s",
              file=sys.stderr, flush=True)


def refuse_existing(path, want_dir):
    """Exit (one line) unless path is absent or an empty directory (want_dir) / empty file."""
    if not os.path.lexists(path):
        return
    empty_dir = os.path.isdir(path) and not os.path.islink(path) and not os.listdir(path)
    empty_file = os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) == 0
    if not (empty_dir if want_dir else empty_file):
        sys.exit(f"make_checkpoint.py: {path} exists and is not an empty "
                 f"{'directory' if want_dir else 'file'}; refusing to touch it")


def refuse_partial(path):
    if os.path.lexists(path):
        sys.exit(f"make_checkpoint.py: {path} exists (left by an interrupted run?); "
                 "remove it and run again")


def remove_ours(path):
    """Remove a .partial path this run created."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


# ---- safetensors ----

def plan_shards(tensors, shard_bytes):
    """Tensors in order, cut into shards of at most shard_bytes of bf16 data each."""
    shards, size = [[]], 0
    for t in tensors:
        if shards[-1] and size + 2 * t.numel > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(t)
        size += 2 * t.numel
    return shards


def shard_header(shard):
    return safetensors_header([(t.hf, "BF16", t.shape) for t in shard], {"format": "pt"})


def safetensors_bytes(m, shard_gb):
    return sum(len(h) + n for h, n in map(shard_header, plan_shards(model_tensors(m),
                                                                    shard_gb * 1e9)))


def write_safetensors(out, m, seed, shard_gb):
    tensors = model_tensors(m)
    shards = plan_shards(tensors, shard_gb * 1e9)
    progress = Progress(len(tensors))
    weight_map, total = {}, 0
    os.mkdir(out)
    for k, shard in enumerate(shards):
        name = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        head, size = shard_header(shard)
        with open(os.path.join(out, name), "wb") as f:
            f.write(head)
            for t in shard:
                for w in hf_values(t, m, seed):
                    f.write(bf16_bits(w).tobytes())
                weight_map[t.hf] = name
                progress.done(t.hf, t.shape, "BF16", 2 * t.numel)
        total += size
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump({**m.config, "torch_dtype": "bfloat16"}, f, indent=2)


# ---- GGUF ----

def gguf_type(t, fmt_type):
    """ggml type of a tensor: F32 for vectors; the format's type for a matrix, falling back to
    Q8_0 then F16 when its rows are not whole blocks."""
    if t.kind != "matrix":
        return T_F32
    for ty in (fmt_type, T_Q8_0):
        if t.shape[1] % GGML_BLOCKS[ty][0] == 0:
            return ty
    return T_F16


def gguf_metadata(m, fmt_type):
    """(key, kind, value) metadata as llama.cpp's converter writes it, without a tokenizer."""
    c, a = m.config, FAMILIES[m.family]["gguf_arch"]
    kv = [("general.architecture", "str", a),
          ("general.name", "str", f"{m.preset} (random weights, sinkscope make_checkpoint.py)"),
          ("general.alignment", "u32", GGUF_ALIGN), ("general.file_type", "u32",
                                                     FILE_TYPES[fmt_type])]
    p = a + "."
    kv += [(p + "block_count", "u32", m.L),
           (p + "context_length", "u32", c["max_position_embeddings"]),
           (p + "embedding_length", "u32", m.D), (p + "feed_forward_length", "u32", m.F),
           (p + "attention.head_count", "u32", m.H), (p + "attention.head_count_kv", "u32", m.Hkv),
           (p + "attention.key_length", "u32", m.dh), (p + "attention.value_length", "u32", m.dh),
           (p + "attention.layer_norm_rms_epsilon", "f32", c["rms_norm_eps"]),
           (p + "rope.freq_base", "f32", c["rope_theta"]),
           (p + "rope.dimension_count", "u32", m.dh), (p + "vocab_size", "u32", m.V)]
    if m.family == "gemma2":
        kv += [(p + "attn_logit_softcapping", "f32", c["attn_logit_softcapping"]),
               (p + "final_logit_softcapping", "f32", c["final_logit_softcapping"]),
               (p + "attention.sliding_window", "u32", c["sliding_window"])]
        if c["query_pre_attn_scalar"] != m.dh:  # llama.cpp's default scale is head size^-0.5
            kv.append((p + "attention.scale", "f32", c["query_pre_attn_scalar"] ** -0.5))
    return kv


def rope_freqs(m):
    """llama.cpp's rope_freqs.weight values when the config has llama3 RoPE scaling, else None."""
    s = m.config.get("rope_scaling")
    if s and s.get("rope_type") == "llama3":
        return llama3_rope_divisors(m.config, m.dh)
    return None


def gguf_plan(m, fmt_type):
    """[(name, ne, type, Tensor or rope_freqs values)] in file order."""
    plan = []
    freqs = rope_freqs(m)
    if freqs is not None:
        plan.append(("rope_freqs.weight", [len(freqs)], T_F32, freqs))
    for t in model_tensors(m):
        plan.append((t.gguf, list(reversed(t.shape)), gguf_type(t, fmt_type), t))
    return plan


def gguf_bytes(m, fmt_type):
    return gguf_file_size(gguf_metadata(m, fmt_type), [p[:3] for p in gguf_plan(m, fmt_type)])


def write_gguf_checkpoint(out, m, seed, fmt_type):
    plan = gguf_plan(m, fmt_type)
    fallback = sorted({GGML_TYPE_NAMES[ty] for _, _, ty, src in plan
                       if isinstance(src, Tensor) and src.kind == "matrix" and ty != fmt_type})
    if fallback:
        print(f"note: rows not whole {GGML_TYPE_NAMES[fmt_type]} blocks are stored as "
              f"{', '.join(fallback)}", file=sys.stderr)
    progress = Progress(len(plan))
    with open(out, "xb") as f:
        w = GgufWriter(f, gguf_metadata(m, fmt_type), [p[:3] for p in plan])
        for name, ne, ty, src in plan:
            if isinstance(src, Tensor):
                chunks = (encode_ggml(v, ty) for v in gguf_values(src, m, seed))
            else:
                chunks = [src.tobytes()]
            w.write_tensor(name, chunks)
            progress.done(name, list(reversed(ne)), GGML_TYPE_NAMES[ty], f.tell() - progress.bytes)
        w.close()


# ---- token ids, listing, main ----

def ids_path(out, fmt, tokens):
    if fmt == "safetensors":
        return os.path.join(out, f"ids_{tokens}.npy")
    stem = out[:-5] if out.endswith(".gguf") else out
    return f"{stem}.ids_{tokens}.npy"


def write_ids(path, m, seed, tokens):
    """[1, tokens] int64 ids in [0, vocab), the first the BOS id when the vocabulary has it."""
    ids = np.random.default_rng([seed, 1 << 31]).integers(0, m.V, size=(1, tokens), dtype=np.int64)
    bos = m.config.get("bos_token_id")
    if isinstance(bos, int) and 0 <= bos < m.V:
        ids[0, 0] = bos
    with open(path, "xb") as f:
        np.save(f, ids)


def print_list():
    print(f"{'preset':14} {'family':7} {'parameters':>15} {'safetensors':>12} {'gguf-q4_k':>10} "
          f"{'gguf-q8_0':>10} {'gguf-f16':>10}   (GB = 1e9 bytes, --shard-gb 2)")
    for name, cfg in PRESETS.items():
        m = model_from_config(name, cfg)
        sizes = [safetensors_bytes(m, 2)] + [gguf_bytes(m, t) for t in (T_Q4_K, T_Q8_0, T_F16)]
        print(f"{name:14} {m.family:7} {n_parameters(m):>15,} {sizes[0] / 1e9:>9.2f} GB "
              + " ".join(f"{s / 1e9:>7.2f} GB" for s in sizes[1:]))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", help="output directory (safetensors) or .gguf file")
    ap.add_argument("--preset", choices=sorted(PRESETS))
    ap.add_argument("--format", choices=list(FORMATS))
    ap.add_argument("--shard-gb", type=float, default=2.0, help="safetensors shard size (1e9 B)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokens", type=int, help="also write [1, T] random token ids (.npy)")
    ap.add_argument("--list", action="store_true", help="print the presets and exit")
    for flag in ("layers", "d-model", "heads", "kv-heads", "d-mlp", "vocab", "d-head"):
        ap.add_argument(f"--{flag}", type=int, help="override the preset's value")
    a = ap.parse_args(argv)
    if not a.list and not (a.out and a.preset and a.format):
        ap.error("OUT, --preset and --format are required (or --list)")
    if a.shard_gb <= 0 or (a.tokens is not None and a.tokens <= 0) or a.seed < 0:
        ap.error("--shard-gb and --tokens must be positive, --seed non-negative")
    return a


def generate(a, m, partial, ids_partial):
    """Write the checkpoint (and the ids) under the .partial paths."""
    if a.format == "safetensors":
        write_safetensors(partial, m, a.seed, a.shard_gb)
    else:
        write_gguf_checkpoint(partial, m, a.seed, FORMATS[a.format])
    if a.tokens:
        write_ids(ids_partial, m, a.seed, a.tokens)


def main(argv=None):
    a = parse_args(argv)
    if a.list:
        print_list()
        return
    m = model_from_config(a.preset, apply_overrides(PRESETS[a.preset], a))
    a.out = os.path.normpath(a.out)
    is_dir = a.format == "safetensors"
    refuse_existing(a.out, is_dir)
    partial = a.out + ".partial"
    moves = [(partial, a.out)]  # (written, renamed to when complete)
    ids_partial = None
    if a.tokens:
        if is_dir:  # inside the directory, renamed with it
            ids_partial = ids_path(partial, a.format, a.tokens)
        else:
            ids = ids_path(a.out, a.format, a.tokens)
            refuse_existing(ids, False)
            ids_partial = ids + ".partial"
            moves.append((ids_partial, ids))
    for written, _ in moves:
        refuse_partial(written)
    t0 = time.perf_counter()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up as for Ctrl-C
    try:
        generate(a, m, partial, ids_partial)
        for written, final in moves:
            os.rename(written, final)  # final: absent, or empty (checked above)
    except BaseException as e:
        for written, _ in moves:  # absent before this run (refuse_partial): ours to remove
            remove_ours(written)
        if isinstance(e, KeyboardInterrupt):
            print(f"make_checkpoint.py: interrupted; removed {partial}", file=sys.stderr)
            sys.exit(130)
        raise
    size = (sum(os.path.getsize(os.path.join(a.out, f)) for f in os.listdir(a.out)) if is_dir
            else os.path.getsize(a.out))
    print(f"{a.out}: {a.preset} ({m.family}, {m.L} layers, d_model {m.D}), "
          f"{n_parameters(m):,} parameters, {a.format}, {size / 1e9:.3f} GB, "
          f"{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
