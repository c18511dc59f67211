#!/usr/bin/python3
"""sinkscope's forward against PyTorch eager on the same random Llama, same libtorch, same threads.

Writes (once) a random-weight Llama HF directory with bench/make_random_llama.py (default: the
134M model of issue 19: d_model 768, 12 layers, 12 heads, d_mlp 2048, vocab 32000, untied
lm_head), then, interleaved over repetitions, runs in fresh processes:
  * PyTorch eager: a Llama forward written here with the semantics of transformers'
    LlamaForCausalLM in eager attention mode (f32 RMSNorm, rotate_half RoPE, scores / sqrt(d_head)
    plus an additive causal mask, softmax in f32, logits of every position); "attention" keeps
    every layer's attention weights as output_attentions=True does;
  * sinkscope: bench/forward_time (build/bench/forward_time), "attention" keeping every layer's
    hook_attn_scores and hook_pattern;
and prints for each T both sides' tokens/s (best of the timed forwards), peak RSS of the process,
the ratio, the fraction of the measured GEMM rate (torch.mm 512^3 f32 on the same threads; the
FLOPs counted are the eager forward's, attention on the full T x T square, as bench_model.cpp) and
sinkscope's capture overhead. Loading is not timed; each process runs one warm-up forward.

Both sides get OMP_NUM_THREADS and OPENBLAS_NUM_THREADS = --threads and set torch's intra-op
threads to it. A check at --check-tokens compares logits and the first and last layer's pattern.

Usage (repository root, after `ninja -C build forward_time`):
    /usr/bin/python3 bench/compare_forward.py [--tokens 512 2048] [--threads 1] [--rounds 2]
        [--iters 1] [--work /tmp/sinkscope_fwd] [--timer build/bench/forward_time] [--handover]
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- PyTorch side (runs in a child process: --torch-worker) ----

def load_safetensors(path):
    """name -> torch tensor, read into memory (as a loaded nn.Module holds its parameters; no
    mmap, so the peak RSS counts the weights once)."""
    import torch
    out = {}
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        for name, meta in sorted(header.items(), key=lambda kv: kv[1].get("data_offsets", [0])):
            if name == "__metadata__":
                continue
            assert meta["dtype"] == "F32", f"{path}: {name} is {meta['dtype']}, expected F32"
            b, e = meta["data_offsets"]
            t = torch.empty(meta["shape"], dtype=torch.float32)
            f.seek(8 + n + b)
            assert f.readinto(memoryview(t.numpy()).cast("B")) == e - b, f"{path}: {name} cut"
            out[name] = t
    return out


def torch_forward(W, cfg, ids, keep_attention):
    """HF LlamaForCausalLM eager: returns logits [B, T, V] f32 and the attention weights."""
    import torch
    import torch.nn.functional as F
    D, H = cfg["hidden_size"], cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads", H)
    dh, eps, L = D // H, cfg["rms_norm_eps"], cfg["num_hidden_layers"]
    B, T = ids.shape

    def rms(x, w):  # LlamaRMSNorm: normalise in f32, weight times the input dtype
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        return w * xf.to(x.dtype)

    def rotate_half(t):
        return torch.cat((-t[..., dh // 2:], t[..., :dh // 2]), dim=-1)

    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, dh, 2, dtype=torch.int64).float() / dh))
    freqs = torch.outer(torch.arange(T).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[None, None], emb.sin()[None, None]  # [1, 1, T, dh]
    mask = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)[None, None]
    x = F.embedding(ids, W["model.embed_tokens.weight"])
    attentions = []
    for l in range(L):
        p = f"model.layers.{l}."
        h = rms(x, W[p + "input_layernorm.weight"])
        q = F.linear(h, W[p + "self_attn.q_proj.weight"]).view(B, T, H, dh).transpose(1, 2)
        k = F.linear(h, W[p + "self_attn.k_proj.weight"]).view(B, T, Hkv, dh).transpose(1, 2)
        v = F.linear(h, W[p + "self_attn.v_proj.weight"]).view(B, T, Hkv, dh).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if Hkv != H:
            k = k.repeat_interleave(H // Hkv, 1)
            v = v.repeat_interleave(H // Hkv, 1)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(dh) + mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        o = torch.matmul(w, v).transpose(1, 2).contiguous().reshape(B, T, D)
        x = x + F.linear(o, W[p + "self_attn.o_proj.weight"])
        h = rms(x, W[p + "post_attention_layernorm.weight"])
        up = F.linear(h, W[p + "mlp.up_proj.weight"])
        x = x + F.linear(F.silu(F.linear(h, W[p + "mlp.gate_proj.weight"])) * up,
                         W[p + "mlp.down_proj.weight"])
        if keep_attention:
            attentions.append(w)
    x = rms(x, W["model.norm.weight"])
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return F.linear(x, head).float(), attentions


def peak_rss_mb():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def torch_worker(model, ids_path, T, threads, capture, reps, check_dir):
    import torch
    torch.set_num_threads(threads)
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    t0 = time.perf_counter()
    W = load_safetensors(os.path.join(model, "model.safetensors"))
    load_s = time.perf_counter() - t0
    rss_load = peak_rss_mb()
    ids = torch.from_numpy(np.load(ids_path)[:, :T].astype(np.int64))
    times = []
    with torch.inference_mode():
        for r in range(reps + 1):  # r = 0: warm-up
            t0 = time.perf_counter()
            logits, att = torch_forward(W, cfg, ids, capture != "none")
            dt = time.perf_counter() - t0
            if r == 0 and check_dir:
                np.save(os.path.join(check_dir, "torch_logits.npy"), logits[0].numpy())
                if att:
                    for l in (0, len(att) - 1):
                        np.save(os.path.join(check_dir, f"torch_pattern_{l}.npy"), att[l][0].numpy())
            if r > 0:
                times.append(dt)
            del logits, att
    print(json.dumps({"side": "torch", "T": T, "threads": threads,
                      "torch_threads": torch.get_num_threads(), "capture": capture,
                      "load_s": load_s, "forward_s": times, "rss_after_load_mb": rss_load,
                      "peak_rss_mb": peak_rss_mb()}))


def gemm_worker(threads, n=512, reps=30):
    import torch
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    c = torch.empty(n, n)
    for _ in range(3):
        torch.mm(a, b, out=c)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.mm(a, b, out=c)
        best = min(best, time.perf_counter() - t0)
    print(json.dumps({"side": "gemm", "n": n, "gflops": 2.0 * n ** 3 / best * 1e-9}))


# ---- Driver ----

def run_child(cmd, threads):
    """The child's JSON line, with the child's own peak RSS (wait4) added as rusage_peak_mb."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    out, err = p.stdout.read(), p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"compare_forward: {' '.join(cmd)} failed ({p.returncode}): {err.strip()[-2000:]}")
    line = [s for s in out.splitlines() if s.startswith("{")][-1]
    rec = json.loads(line)
    rec["rusage_peak_mb"] = ru.ru_maxrss / 1024.0
    return rec


def forward_flops(cfg, T):
    """Matmul FLOPs of one eager forward (attention on the full T x T square; bench_model.cpp)."""
    D, L, H = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    Hkv, F, V = cfg.get("num_key_value_heads", H), cfg["intermediate_size"], cfg["vocab_size"]
    dh = D // H
    per_token = 2.0 * (D * dh * (2 * H + 2 * Hkv) + 3.0 * D * F) * L + 2.0 * V * D
    return per_token * T + 4.0 * L * H * T * T * dh


def check_agreement(work, model, ids, timer, T, threads):
    """Max |difference| of logits and of layer 0 / L-1 patterns at T tokens (f32 on both sides)."""
    d = os.path.join(work, f"check_{T}")
    os.makedirs(d, exist_ok=True)
    me = [sys.executable, os.path.abspath(__file__)]
    run_child(me + ["--torch-worker", model, ids, str(T), str(threads), "attention", "0", d],
              threads)
    run_child([timer, model, ids, str(T), str(threads), "attention", "0", d], threads)
    out = {}
    with open(os.path.join(model, "config.json")) as f:
        L = json.load(f)["num_hidden_layers"]
    for name in ["logits"] + [f"pattern_{l}" for l in (0, L - 1)]:
        a = np.load(os.path.join(d, f"torch_{name}.npy")).astype(np.float64)
        b = np.load(os.path.join(d, f"sinkscope_{name}.npy")).astype(np.float64)
        assert a.shape == b.shape, f"{name}: shapes {a.shape} vs {b.shape}"
        out[name] = (float(np.abs(a - b).max()), float(np.abs(a).max()))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torch-worker", nargs=7, metavar="ARG", help=argparse.SUPPRESS)
    ap.add_argument("--gemm-worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--tokens", type=int, nargs="+", default=[512, 2048])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved repetitions")
    ap.add_argument("--iters", type=int, default=1, help="timed forwards per process")
    ap.add_argument("--check-tokens", type=int, default=300, help="two query blocks")
    ap.add_argument("--work", default="/tmp/sinkscope_fwd")
    ap.add_argument("--timer", default=os.path.join(HERE, "..", "build", "bench", "forward_time"))
    ap.add_argument("--handover", action="store_true",
                    help="also time sinkscope's fp64 hand-over to the metrics")
    a = ap.parse_args()
    if a.torch_worker:
        m, ids, T, th, cap, reps, chk = a.torch_worker
        torch_worker(m, ids, int(T), int(th), cap, int(reps), chk if chk != "-" else None)
        return
    if a.gemm_worker:
        gemm_worker(a.gemm_worker)
        return

    model = os.path.join(a.work, "llama134m")
    t_max = max(a.tokens + [a.check_tokens])
    ids = os.path.join(model, f"ids_{t_max}.npy")
    if not os.path.exists(ids):
        subprocess.run([sys.executable, os.path.join(HERE, "make_random_llama.py"), model,
                        "--tokens", str(t_max), "--d-mlp", "2048", "--untied"], check=True)
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; threads {a.threads}")

    agree = check_agreement(a.work, model, ids, a.timer, a.check_tokens, a.threads)
    for name, (diff, scale) in agree.items():
        print(f"agreement T={a.check_tokens} {name}: max |torch - sinkscope| = {diff:.3g} "
              f"(max |value| {scale:.3g})")

    me = [sys.executable, os.path.abspath(__file__)]
    gemm = [run_child(me + ["--gemm-worker", str(a.threads)], a.threads)["gflops"]]
    modes = ["none", "attention"] + (["handover"] if a.handover else [])
    results = {}  # (side, T, mode) -> list of records
    for r in range(a.rounds):
        for T in a.tokens:
            for mode in modes:
                sides = ["torch", "sinkscope"] if r % 2 == 0 else ["sinkscope", "torch"]
                for side in sides:
                    if side == "torch" and mode == "handover":
                        continue
                    tmode = "attention" if (side == "torch" and mode != "none") else mode
                    if side == "torch":
                        cmd = me + ["--torch-worker", model, ids, str(T), str(a.threads), tmode,
                                    str(a.iters), "-"]
                    else:
                        cmd = [a.timer, model, ids, str(T), str(a.threads), mode, str(a.iters)]
                    rec = run_child(cmd, a.threads)
                    results.setdefault((side, T, mode), []).append(rec)
                    print(f"  round {r} T={T} {mode:9s} {side:9s} "
                          f"{T / min(rec['forward_s']):7.1f} tok/s  peak {rec['rusage_peak_mb']:6.0f} MB"
                          f"  (load avg {os.getloadavg()[0]:.2f})", flush=True)
        gemm.append(run_child(me + ["--gemm-worker", str(a.threads)], a.threads)["gflops"])
    g = max(gemm)
    print(f"\nGEMM rate (torch.mm 512^3 f32, {a.threads} thread(s), best of {len(gemm)} runs): "
          f"{g:.1f} GFLOP/s")
    print(f"{'T':>5} {'capture':9s} {'torch tok/s':>11} {'sinkscope':>10} {'ratio':>6} "
          f"{'torch MB':>9} {'ss MB':>7} {'ss %GEMM':>8}")
    for T in a.tokens:
        for mode in modes:
            def best(side):
                recs = results.get((side, T, mode), [])
                return (min(min(x["forward_s"]) for x in recs),
                        max(x["rusage_peak_mb"] for x in recs)) if recs else (float("nan"), 0)
            (tt, tm), (st, sm) = best("torch"), best("sinkscope")
            frac = forward_flops(cfg, T) / st * 1e-9 / g
            print(f"{T:>5} {mode:9s} {T / tt:11.1f} {T / st:10.1f} {tt / st:6.2f} {tm:9.0f} "
                  f"{sm:7.0f} {100 * frac:7.0f}%")
        n = min(min(x["forward_s"]) for x in results[("sinkscope", T, "none")])
        c = min(min(x["forward_s"]) for x in results[("sinkscope", T, "attention")])
        print(f"{T:>5} sinkscope capture overhead (scores + pattern): {100 * (c / n - 1):.1f}%")
        if a.handover:
            h = min(min(x["handover_s"]) for x in results[("sinkscope", T, "handover")])
            print(f"{T:>5} sinkscope fp64 hand-over: {h:.3f} s ({100 * h / c:.0f}% of the forward)")
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")


if __name__ == "__main__":
    main()
