#!/usr/bin/python3
"""Peak-memory benchmarks of `sinkscope analyze` (issue 7), measured on the child process itself
(os.wait4's ru_maxrss, kB), with wall time.

  analyze_memory.py samples --model DIR [--counts 10,1000] [--tokens 128] [--max-growth 0.1]
      Runs analyze on N random-id inputs of T tokens for each N and checks that peak RSS does not
      grow with N (largest / smallest - 1 <= --max-growth).
  analyze_memory.py long --model DIR [--tokens 4096] [--budget-gb 2]
      Runs analyze on one input of T random ids (all analyses) and checks peak RSS <= size of the
      weight files + budget (GB = 10^9 bytes). Build the 125M random Llama with
      bench/make_random_llama.py first.

Common: --binary (default build/sinkscope), --keep DIR (keep the outputs), --seed, and any
arguments after `--` are passed to analyze. Exit status 1 when a check fails.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np


def vocab_size(model):
    with open(os.path.join(model, "config.json")) as f:
        return int(json.load(f)["vocab_size"])


def weight_bytes(model):
    names = [n for n in os.listdir(model) if n.endswith((".safetensors", ".bin", ".gguf"))]
    return sum(os.path.getsize(os.path.join(model, n)) for n in names)


def run_analyze(binary, model, ids_path, n, tokens, out, extra):
    cmd = [binary, "analyze", "--model", model, "--data", ids_path, "--samples", str(n),
           "--max-tokens", str(tokens), "--out", out, "--progress", "never", "--no-report"] + extra
    start = time.monotonic()
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"analyze_memory: {' '.join(cmd)} exited with {code}")
    return usage.ru_maxrss, wall  # kB (Linux), seconds


def write_ids(path, n, tokens, vocab, seed):
    rng = np.random.default_rng(seed)
    np.save(path, rng.integers(0, vocab, size=(n, tokens), dtype=np.int32))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("mode", choices=["samples", "long"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--binary", default="build/sinkscope")
    ap.add_argument("--counts", default="10,1000")
    ap.add_argument("--tokens", type=int)
    ap.add_argument("--max-growth", type=float, default=0.10)
    ap.add_argument("--budget-gb", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep")
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    a = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    a.extra = extra
    work = tempfile.mkdtemp(prefix="sinkscope-bench-")
    try:
        vocab = vocab_size(a.model)
        if a.mode == "samples":
            counts = [int(c) for c in a.counts.split(",")]
            tokens = a.tokens or 128
            ids = os.path.join(work, "ids.npy")
            write_ids(ids, max(counts), tokens, vocab, a.seed)
            rows = []
            for n in counts:
                out = os.path.join(a.keep or work, f"samples_{n}")
                rss, wall = run_analyze(a.binary, a.model, ids, n, tokens, out, a.extra)
                rows.append((n, rss, wall))
                print(f"samples {n:6d}  T {tokens}  peak RSS {rss / 1024:9.1f} MiB  "
                      f"wall {wall:8.1f} s", flush=True)
            growth = rows[-1][1] / rows[0][1] - 1
            ok = growth <= a.max_growth
            print(f"growth {100 * growth:+.1f}% from {counts[0]} to {counts[-1]} samples "
                  f"(limit {100 * a.max_growth:.0f}%): {'ok' if ok else 'FAILED'}")
        else:
            tokens = a.tokens or 4096
            ids = os.path.join(work, "ids.npy")
            write_ids(ids, 1, tokens, vocab, a.seed)
            out = os.path.join(a.keep or work, f"long_{tokens}")
            rss, wall = run_analyze(a.binary, a.model, ids, 1, tokens, out, a.extra)
            weights = weight_bytes(a.model)
            limit = weights + a.budget_gb * 1e9
            ok = rss * 1024 <= limit
            print(f"T {tokens}  peak RSS {rss} kB = {rss * 1024 / 1e9:.3f} GB  weights "
                  f"{weights / 1e9:.3f} GB  over weights {(rss * 1024 - weights) / 1e9:.3f} GB  "
                  f"(budget {a.budget_gb} GB)  wall {wall:.0f} s: {'ok' if ok else 'FAILED'}")
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
