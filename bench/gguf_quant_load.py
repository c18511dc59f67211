#!/usr/bin/python3
"""Load time and peak memory of a Q4_K GGUF against its F16 twin (issue 14, quantizations).

Writes two GGUF files of the same random-weight Llama (default 12 layers, d_model 768, 12 heads,
ffn 2048, vocab 32000, untied output: 134M parameters) to a temporary folder: every 2-D weight in
F16 in one, in Q4_K in the other (norms F32 in both; no tokenizer). Each file is then loaded by
`sinkscope inspect --load --model FILE` (load_model: parse, dequantize/convert to float32, build the
model) in its own process, --repeat times after one untimed warm-up run (page cache); the script
prints the best wall time and the largest peak RSS (os.wait4's ru_maxrss) per file.

usage (from the repository root, after building build/sinkscope):
  /usr/bin/python3 bench/gguf_quant_load.py [--binary build/sinkscope] [--repeat 3] [--keep DIR]
                                            [--layers 12] [--d-model 768] [--heads 12]
                                            [--d-mlp 2048]
                                            [--vocab 32000] [--seed 0]

The GGUF writer and the Q4_K encoder are bench/checkpoint_formats.py's (numpy, vectorised); the
encoder is a valid Q4_K encoder (scales rounded up, quants rounded to nearest, as
tests/testing/ggml_quantize.hpp), not llama.cpp's search. Q4_K rows are 256 values, so
--d-model and --d-mlp must be multiples of 256.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from checkpoint_formats import T_F16, T_F32, T_Q4_K, quantize_q4_k, write_gguf


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
    proc = subprocess.Popen([binary, "inspect", "--load", "--model", path],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{binary} inspect --load --model {path} failed: {err}")
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
    if a.d_model % 256 or a.d_mlp % 256 or a.d_model % a.heads or (a.d_model // a.heads) % 2:
        sys.exit("gguf_quant_load.py: --d-model and --d-mlp must be multiples of 256 (Q4_K rows) "
                 "and --d-model / --heads an even head size")
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
