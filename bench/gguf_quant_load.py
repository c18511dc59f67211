#!/usr/bin/python3
"""Load time and peak memory of a Q4_K GGUF against its F16 twin (issue 14, quantizations).

Writes two GGUF files of the same random-weight Llama (default 12 layers, d_model 768, 12 heads,
ffn 2048, vocab 32000, untied output: 134M parameters) to a temporary folder: every 2-D weight in
F16 in one, in Q4_K in the other (norms F32 in both; no tokenizer). Each file is then loaded by
`sinkscope inspect --model FILE` (load_model: parse, dequantize/convert to float32, build the
model) in its own process, --repeat times after one untimed warm-up run (page cache); the script
prints the best wall time and the largest peak RSS (os.wait4's ru_maxrss) per file.

usage (from the repository root, after building build/sinkscope):
  /usr/bin/python3 bench/gguf_quant_load.py [--binary build/sinkscope] [--repeat 3] [--keep DIR]
                                            [--layers 12] [--d-model 768] [--d-mlp 2048]
                                            [--vocab 32000] [--seed 0]

The GGUF writer and the Q4_K encoder below are this script's own (numpy, vectorised); the
encoder is a valid Q4_K encoder (scales rounded up, quants rounded to nearest, as
tests/testing/ggml_quantize.hpp), not llama.cpp's search.
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

GGUF_ALIGN = 32
T_F32, T_F16, T_Q4_K = 0, 1, 12


def f16_ceil(x):
    """Smallest float16 >= x elementwise (x >= 0 float32 array), as float16."""
    h = x.astype(np.float16)
    low = h.astype(np.float32) < x
    bits = h.view(np.uint16).copy()
    bits[low] += 1
    return bits.view(np.float16)


def quantize_q4_k(w):
    """[rows, cols] float32 (cols % 256 == 0) -> Q4_K bytes (ggml block_q4_K, 144 per 256)."""
    x = w.reshape(-1, 8, 32).astype(np.float32)  # super-blocks x sub-blocks x values
    lo = np.minimum(x.min(axis=2), 0)  # x = (d * sc) * q - dmin * m, m >= 0
    hi = x.max(axis=2)
    dmin = f16_ceil(((-lo).max(axis=1) / 63).astype(np.float32))
    dmin32 = dmin.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(dmin32 > 0, np.minimum(np.ceil(-lo / dmin32), 63), 0).astype(np.uint8)
        s = (hi + dmin32 * m) / 15
        d = f16_ceil((s.max(axis=1) / 63).astype(np.float32))
        d32 = d.astype(np.float32)[:, None]
        sc = np.where(d32 > 0, np.minimum(np.ceil(s / d32), 63), 0).astype(np.uint8)
        step = (d32 * sc)[:, :, None]
        q = np.where(step > 0, np.rint((x + (dmin32 * m)[:, :, None]) / step), 0)
    q = np.clip(q, 0, 15).astype(np.uint8)
    n = x.shape[0]
    out = np.zeros((n, 144), np.uint8)
    out[:, 0:2] = d.view(np.uint8).reshape(n, 2)
    out[:, 2:4] = dmin.view(np.uint8).reshape(n, 2)
    # scales[12]: j < 4: sc_j | (sc_{j+4} >> 4) << 6, m_j | (m_{j+4} >> 4) << 6;
    # bytes 8-11: sc_{j+4} & 15 | (m_{j+4} & 15) << 4 (ggml get_scale_min_k4 inverted)
    out[:, 4:8] = sc[:, :4] | (sc[:, 4:] >> 4) << 6
    out[:, 8:12] = m[:, :4] | (m[:, 4:] >> 4) << 6
    out[:, 12:16] = (sc[:, 4:] & 15) | (m[:, 4:] & 15) << 4
    # qs[128]: value 64g + 32t + l is nibble t of qs[32g + l]
    qg = q.reshape(n, 4, 2, 32)
    out[:, 16:] = (qg[:, :, 0, :] | qg[:, :, 1, :] << 4).reshape(n, 128)
    return out.tobytes()


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, kv, tensors):
    """kv: [(key, 'u32'|'f32'|'str', value)]; tensors: [(name, ne list, ggml type, bytes)]."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for key, kind, value in kv:
        head += gguf_string(key)
        if kind == "u32":
            head += struct.pack("<II", 4, value)
        elif kind == "f32":
            head += struct.pack("<If", 6, value)
        else:
            head += struct.pack("<I", 8) + gguf_string(value)
    offset = 0
    for name, ne, ty, data in tensors:
        head += gguf_string(name) + struct.pack("<I", len(ne))
        head += b"".join(struct.pack("<Q", d) for d in ne)
        head += struct.pack("<IQ", ty, offset)
        offset += (len(data) + GGUF_ALIGN - 1) // GGUF_ALIGN * GGUF_ALIGN
    with open(path, "wb") as f:
        f.write(head + b"\0" * (-len(head) % GGUF_ALIGN))
        for _, _, _, data in tensors:
            f.write(data + b"\0" * (-len(data) % GGUF_ALIGN))


def make_models(out, a):
    rng = np.random.default_rng(a.seed)
    D, F, V, L = a.d_model, a.d_mlp, a.vocab, a.layers
    kv = [("general.architecture", "str", "llama"), ("llama.block_count", "u32", L),
          ("llama.context_length", "u32", 2048), ("llama.embedding_length", "u32", D),
          ("llama.feed_forward_length", "u32", F), ("llama.attention.head_count", "u32", a.heads),
          ("llama.attention.head_count_kv", "u32", a.heads),
          ("llama.rope.dimension_count", "u32", D // a.heads),
          ("llama.attention.layer_norm_rms_epsilon", "f32", 1e-5)]
    shapes = [("token_embd.weight", (V, D))]
    for l in range(L):
        p = f"blk.{l}."
        shapes += [(p + "attn_norm.weight", (D,)), (p + "ffn_norm.weight", (D,))]
        shapes += [(p + n, (D, D)) for n in ("attn_q.weight", "attn_k.weight", "attn_v.weight",
                                             "attn_output.weight")]
        shapes += [(p + "ffn_gate.weight", (F, D)), (p + "ffn_up.weight", (F, D)),
                   (p + "ffn_down.weight", (D, F))]
    shapes += [("output_norm.weight", (D,)), ("output.weight", (V, D))]
    f16, q4k, n_params = [], [], 0
    for name, shape in shapes:
        ne = list(reversed(shape))  # ggml order
        n_params += int(np.prod(shape))
        if len(shape) == 1:
            w = (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32).tobytes()
            f16.append((name, ne, T_F32, w))
            q4k.append((name, ne, T_F32, w))
            continue
        w = (0.02 * rng.standard_normal(shape)).astype(np.float32)
        f16.append((name, ne, T_F16, w.astype(np.float16).tobytes()))
        q4k.append((name, ne, T_Q4_K, quantize_q4_k(w)))
    paths = {"F16": os.path.join(out, "llama_f16.gguf"), "Q4_K": os.path.join(out, "llama_q4_k.gguf")}
    write_gguf(paths["F16"], kv, f16)
    write_gguf(paths["Q4_K"], kv, q4k)
    return paths, n_params


def run_once(binary, path):
    t0 = time.perf_counter()
    proc = subprocess.Popen([binary, "inspect", "--model", path], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{binary} inspect --model {path} failed: {err}")
    return wall, usage.ru_maxrss  # kB on Linux


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default="build/sinkscope")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", help="write the files here and keep them")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--d-mlp", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    out = a.keep or tempfile.mkdtemp(prefix="sinkscope-gguf-quant-")
    os.makedirs(out, exist_ok=True)
    try:
        t0 = time.perf_counter()
        paths, n_params = make_models(out, a)
        print(f"{n_params / 1e6:.1f}M parameters, files written in {time.perf_counter() - t0:.1f} s")
        print(f"{'file':6} {'MB on disk':>10} {'load s (best)':>14} {'peak RSS MB':>12}")
        for kind, path in paths.items():
            run_once(a.binary, path)  # warm the page cache
            runs = [run_once(a.binary, path) for _ in range(a.repeat)]
            print(f"{kind:6} {os.path.getsize(path) / 1e6:10.1f} {min(r[0] for r in runs):14.2f} "
                  f"{max(r[1] for r in runs) / 1e3:12.1f}")
    finally:
        if not a.keep:
            shutil.rmtree(out)


if __name__ == "__main__":
    main()
