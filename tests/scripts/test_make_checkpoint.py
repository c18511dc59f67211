#!/usr/bin/python3
"""Test of bench/make_checkpoint.py (issue 47 item 6) and bench/checkpoint_formats.py.

* Every preset at a tiny shape of the same architecture (its GQA ratio; Gemma-2's head size
  above d_model / heads; Llama-3-8B and Qwen2 untied) in every format: `sinkscope inspect` prints
  the generator's architecture, sizes and parameter count (stated by the generator and
  recomputed here from the config: a tied embedding counts once). The shapes make some Q4_K rows
  384 or 224 values long, so the Q8_0 fallback is exercised too.
* The Q8_0 encoder: every dequantized value within d/2 of the original, max |q| = 127 in a block
  whose d is a normal float16. The Q4_K encoder, decoded here (ggml block_q4_K): within half a
  sub-block step. bf16: hand-computed edge values (ties to even, NaN, inf, overflow, subnormals) and random
  bit patterns against the nearest of the two neighbouring bf16 values.
* The GGUF F16 and the safetensors checkpoint of one seed: attn_q / attn_k un-permuted and
  Gemma-2's 1 + w norms agree with the bf16 tensors within rounding (this script reads both).
* `sinkscope analyze --no-report` on the tiny Q4_K Llama and the bf16 Gemma-2 with a .npy of ids.

usage: SINKSCOPE_CLI=build/sinkscope /usr/bin/python3 tests/scripts/test_make_checkpoint.py
Exit 0 on success, 1 on a failure, 77 (skipped) without the executable or numpy.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GENERATOR = os.path.join(ROOT, "bench", "make_checkpoint.py")
FORMATS = ("safetensors", "gguf-q4_k", "gguf-q8_0", "gguf-f16")
COMMON = {"layers": 2, "d-model": 256, "d-mlp": 512, "vocab": 512}
TINY = {  # per preset: heads, kv heads, head size (the real GQA ratio)
    "llama-3.2-1b": {"heads": 8, "kv-heads": 2, "d-head": 32},  # 32 / 8
    "llama-3.2-3b": {"heads": 6, "kv-heads": 2, "d-head": 64},  # 24 / 8
    "llama-3-8b": {"heads": 8, "kv-heads": 2, "d-head": 32},  # 32 / 8, untied
    "qwen2-7b": {"heads": 7, "kv-heads": 1, "d-head": 32},  # 28 / 4, q/k/v biases, untied
    "gemma-2-2b": {"heads": 4, "kv-heads": 2, "d-head": 128},  # 8 / 4, 4 * 128 > 256
}
ARCH = {"llama-3.2-1b": "llama", "llama-3.2-3b": "llama", "llama-3-8b": "llama",
        "qwen2-7b": "qwen2", "gemma-2-2b": "gemma2"}

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}", flush=True)


# ---- quantizers and bf16 ----

def check_q8_0(np, cf):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 256)).astype(np.float32) * 0.02
    x[0, :32] = 0  # an all-zero block
    x[1, :32] *= 1e4  # large and tiny magnitudes
    x[2, :32] *= 1e-6
    raw = np.frombuffer(cf.quantize_q8_0(x), np.uint8).reshape(-1, 34)
    d = raw[:, :2].copy().view(np.float16).astype(np.float64)  # [blocks, 1]
    q = raw[:, 2:].copy().view(np.int8).astype(np.float64)
    err = np.abs(d * q - x.reshape(-1, 32).astype(np.float64))
    check((err <= d / 2 * (1 + 1e-12)).all(), "Q8_0: a dequantized value is more than d/2 off")
    amax = np.abs(x.reshape(-1, 32)).max(axis=1)
    normal = amax / 127 >= 2.0 ** -14  # d a normal float16: rounding d up costs < 2^-10
    check((np.abs(q).max(axis=1)[normal] == 127).all() and (d[amax == 0] == 0).all(),
          "Q8_0: max |q| is not 127 in a block with a normal d (or d != 0 in a zero block)")


def decode_q4_k(np, raw):
    """ggml block_q4_K (144 bytes: f16 d, f16 dmin, 12 scale bytes, 128 nibble bytes) ->
    (values [blocks, 256], step d * sc per value)."""
    b = np.frombuffer(raw, np.uint8).reshape(-1, 144)
    d = b[:, 0:2].copy().view(np.float16).astype(np.float64)
    dmin = b[:, 2:4].copy().view(np.float16).astype(np.float64)
    s = b[:, 4:16].astype(np.int64)
    sc, mn = np.zeros((len(b), 8)), np.zeros((len(b), 8))
    for j in range(8):  # ggml get_scale_min_k4
        if j < 4:
            sc[:, j], mn[:, j] = s[:, j] & 63, s[:, j + 4] & 63
        else:
            sc[:, j] = (s[:, j + 4] & 15) | ((s[:, j - 4] >> 6) << 4)
            mn[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
    qs = b[:, 16:].reshape(-1, 4, 32)
    q = np.stack([qs & 15, qs >> 4], axis=2).reshape(-1, 8, 32).astype(np.float64)
    step = d[:, :, None] * sc[:, :, None]
    y = step * q - (dmin * mn)[:, :, None]
    return y.reshape(-1, 256), np.broadcast_to(step, q.shape).reshape(-1, 256)


def check_q4_k(np, cf):
    x = np.random.default_rng(2).standard_normal((16, 512)).astype(np.float32) * 0.02
    x[0, 32:64] += 0.5  # a sub-block far from the others
    y, step = decode_q4_k(np, cf.quantize_q4_k(x))
    x64 = x.reshape(-1, 256).astype(np.float64)
    tol = step / 2 + 1e-6 * np.abs(x64).max(axis=1, keepdims=True)
    check((np.abs(y - x64) <= tol).all(), "Q4_K: a decoded value is more than half a step off")


def bf16_reference(np, bits):
    """Expected bf16 bits of finite float32 bit patterns: the nearer of the truncation and the
    next bf16 away from zero (infinity counting as 2^128), ties to the even one."""
    u = np.asarray(bits, np.uint32)
    lo = u & np.uint32(0xFFFF0000)
    hi = lo + np.uint32(0x10000)
    x, vlo, vhi = (v.view(np.float32).astype(np.float64) for v in (u, lo, hi))
    vhi = np.where(np.isinf(vhi), np.copysign(2.0 ** 128, vhi), vhi)
    dlo, dhi = np.abs(x - vlo), np.abs(vhi - x)
    up = (dhi < dlo) | ((dhi == dlo) & (((lo >> 16) & 1) == 1))
    return np.where(up, hi >> 16, lo >> 16).astype(np.uint16)


def check_bf16(np, cf):
    edges = {  # float32 bits -> bf16 bits, by hand
        0x3F800000: 0x3F80,  # 1
        0x3F808000: 0x3F80,  # 1 + 2^-8: tie, even is 1
        0x3F818000: 0x3F82,  # tie between 0x3F81 (odd) and 0x3F82
        0x3F808001: 0x3F81,  # just above the tie
        0xBF808000: 0xBF80,  # negative tie
        0x7F7F7FFF: 0x7F7F,  # below the halfway to overflow
        0x7F7FFFFF: 0x7F80,  # float32 max: rounds to inf
        0x7F800000: 0x7F80, 0xFF800000: 0xFF80,  # +-inf
        0x00000001: 0x0000,  # smallest subnormal
        0x00008000: 0x0000, 0x00018000: 0x0002,  # subnormal ties
        0x80000000: 0x8000,  # -0
    }
    got = cf.bf16_bits(np.array(list(edges), np.uint32).view(np.float32))
    check(list(got) == list(edges.values()), f"bf16 edge values: {[hex(v) for v in got]}")
    nans = cf.bf16_bits(np.array([0x7FC00000, 0x7F800001, 0xFFFFFFFF], np.uint32)
                        .view(np.float32))
    check(((nans & 0x7F80) == 0x7F80).all() and ((nans & 0x7F) != 0).all(),
          f"bf16 of NaN is not NaN: {[hex(v) for v in nans]}")
    u = np.random.default_rng(3).integers(0, 2 ** 32, 200000, dtype=np.uint64).astype(np.uint32)
    u = u[(u & 0x7F800000) != 0x7F800000]  # finite
    got = cf.bf16_bits(u.view(np.float32))
    check((got == bf16_reference(np, u)).all(), "bf16 differs from round-to-nearest-even")


# ---- files ----

def gguf_tensors(np, path):
    """{name: (ne, type, bytes)} of a GGUF v3 file (this test's own reader)."""
    data = open(path, "rb").read()
    pos = 24
    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def string():
        nonlocal pos
        n = struct.unpack_from("<Q", data, pos)[0]
        pos += 8 + n
        return data[pos - n:pos].decode()

    for _ in range(n_kv):
        string()
        ty = struct.unpack_from("<I", data, pos)[0]
        pos += 4
        if ty == 8:
            string()
        else:
            pos += sizes[ty]  # no arrays in the generator's metadata
    infos = []
    for _ in range(n_tensors):
        name = string()
        nd = struct.unpack_from("<I", data, pos)[0]
        ne = struct.unpack_from(f"<{nd}Q", data, pos + 4)
        ty, off = struct.unpack_from("<IQ", data, pos + 4 + 8 * nd)
        pos += 4 + 8 * nd + 12
        infos.append((name, ne, ty, off))
    base = (pos + 31) // 32 * 32
    nbytes = {0: 4, 1: 2}
    return {name: (ne, ty, data[base + off:base + off + int(np.prod(ne)) * nbytes.get(ty, 0)])
            for name, ne, ty, off in infos}


def safetensors_bf16(np, directory):
    """{name: float32 array} of every tensor of a bf16 sharded checkpoint."""
    index = json.load(open(os.path.join(directory, "model.safetensors.index.json")))
    out = {}
    for shard in sorted(set(index["weight_map"].values())):
        data = open(os.path.join(directory, shard), "rb").read()
        n = struct.unpack_from("<Q", data)[0]
        for name, e in json.loads(data[8:8 + n]).items():
            if name == "__metadata__":
                continue
            b, end = e["data_offsets"]
            bits = np.frombuffer(data[8 + n + b:8 + n + end], np.uint16).astype(np.uint32) << 16
            out[name] = bits.view(np.float32).reshape(e["shape"])
    return out


def unpermute(np, w, dh):
    """llama.cpp's interleaved-RoPE rows (2j, 2j + 1 per head) back to HF's (j, dh/2 + j)."""
    return w.reshape(-1, dh // 2, 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)


def check_twins(np, st_dir, gguf_path, dh, gemma):
    hf, gg = safetensors_bf16(np, st_dir), gguf_tensors(np, gguf_path)
    pairs = [("self_attn.q_proj.weight", "attn_q.weight"), ("self_attn.k_proj.weight",
                                                            "attn_k.weight")]
    for hf_name, gg_name in pairs:
        ne, ty, raw = gg[f"blk.1.{gg_name}"]
        w = np.frombuffer(raw, np.float16).astype(np.float32).reshape(ne[1], ne[0])
        if not gemma:
            w = unpermute(np, w, dh)
        ref = hf[f"model.layers.1.{hf_name}"]
        check(np.allclose(w, ref, rtol=2 ** -8, atol=1e-7),
              f"{gguf_path}: {gg_name} (F16) is not the bf16 {hf_name} (rows in llama.cpp order)")
    ne, ty, raw = gg["blk.0.attn_norm.weight"]
    norm = np.frombuffer(raw, np.float32)
    expect = hf["model.layers.0.input_layernorm.weight"] + (1 if gemma else 0)
    check(ty == 0 and (norm == expect).all(), f"{gguf_path}: attn_norm is not the HF norm"
          + (" + 1" if gemma else ""))


# ---- generator and sinkscope ----

def expected_params(cfg, tied):
    """Parameter count from config.json: embeddings (once when tied) + layers + final norm."""
    D, L, F, V = (cfg[k] for k in ("hidden_size", "num_hidden_layers", "intermediate_size",
                                   "vocab_size"))
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    dh = cfg.get("head_dim", D // H)
    q, kv = H * dh, Hkv * dh
    norms = 4 if cfg["model_type"] == "gemma2" else 2
    bias = q + 2 * kv if cfg["model_type"] == "qwen2" else 0
    layer = norms * D + 2 * D * q + 2 * D * kv + bias + 3 * D * F
    return V * D * (1 if tied else 2) + L * layer + D


def generate(tmp, preset, fmt, tokens=None):
    path = os.path.join(tmp, f"{preset}-{fmt}" + ("" if fmt == "safetensors" else ".gguf"))
    args = [sys.executable, GENERATOR, path, "--preset", preset, "--format", fmt]
    for k, v in {**COMMON, **TINY[preset]}.items():
        args += [f"--{k}", str(v)]
    if tokens:
        args += ["--tokens", str(tokens)]
    r = subprocess.run(args, capture_output=True, text=True)
    check(r.returncode == 0, f"make_checkpoint {preset} {fmt}: exit {r.returncode}: {r.stderr}")
    m = re.search(r"([\d,]+) parameters", r.stdout)
    return path, int(m.group(1).replace(",", "")) if m else -1


def inspect(cli, path):
    r = subprocess.run([cli, "inspect", "--model", path], capture_output=True, text=True)
    check(r.returncode == 0, f"inspect {path}: exit {r.returncode}: {r.stderr.strip()}")
    return dict(line.split(None, 1) for line in r.stdout.splitlines()
                if len(line.split(None, 1)) == 2 and not line.startswith(" "))


def check_model(cli, path, stated, preset, fmt, cfg):
    got = inspect(cli, path)
    tied = cfg.get("tie_word_embeddings", preset.startswith("gemma"))
    want = {"architecture": ARCH[preset], "n_layers": cfg["num_hidden_layers"],
            "n_heads": cfg["num_attention_heads"], "n_kv_heads": cfg["num_key_value_heads"],
            "d_model": cfg["hidden_size"], "d_head": cfg["head_dim"],
            "d_mlp": cfg["intermediate_size"], "d_vocab": cfg["vocab_size"],
            "parameters": stated}
    for key, value in want.items():
        check(got.get(key) == str(value), f"{preset} {fmt}: inspect {key} {got.get(key)!r}, "
              f"generator {value!r}")
    check(stated == expected_params(cfg, tied),
          f"{preset} {fmt}: generator states {stated} parameters, config gives "
          f"{expected_params(cfg, tied)}")


def analyze(cli, tmp, model, ids):
    out = os.path.join(tmp, "analyze-" + os.path.basename(model))
    r = subprocess.run([cli, "analyze", "--model", model, "--data", ids, "--no-report", "--quiet",
                        "--out", out], capture_output=True, text=True)
    check(r.returncode == 0, f"analyze {model}: exit {r.returncode}: {r.stderr.strip()}")


def run_models(np, cli, tmp):
    paths = {}
    for preset in TINY:
        cfg = None
        for fmt in FORMATS:  # safetensors first: its config.json describes all four
            path, stated = generate(tmp, preset, fmt, tokens=12 if fmt == "safetensors" else None)
            paths[preset, fmt] = path
            if cfg is None:
                cfg = json.load(open(os.path.join(path, "config.json")))
            check_model(cli, path, stated, preset, fmt, cfg)
        if preset in ("llama-3.2-3b", "gemma-2-2b"):
            check_twins(np, paths[preset, "safetensors"], paths[preset, "gguf-f16"],
                        TINY[preset]["d-head"], preset.startswith("gemma"))
    ids = {p: os.path.join(paths[p, "safetensors"], "ids_12.npy") for p in TINY}
    analyze(cli, tmp, paths["llama-3.2-1b", "gguf-q4_k"], ids["llama-3.2-1b"])
    analyze(cli, tmp, paths["gemma-2-2b", "safetensors"], ids["gemma-2-2b"])


def main():
    cli = os.environ.get("SINKSCOPE_CLI", "")
    if not (cli and os.access(cli, os.X_OK)):
        print("skipped: SINKSCOPE_CLI is not set to the sinkscope executable")
        return 77
    try:
        import numpy as np
    except ImportError:
        print(f"skipped: numpy is not importable by {sys.executable}")
        return 77
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import checkpoint_formats as cf
    check_q8_0(np, cf)
    check_q4_k(np, cf)
    check_bf16(np, cf)
    with tempfile.TemporaryDirectory(prefix="sinkscope-make-checkpoint-") as tmp:
        run_models(np, cli, tmp)
    print(f"{len(failures)} failure(s)" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
