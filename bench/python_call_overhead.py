"""What the Python binding adds to a metrics call: the same calls timed from Python
(sinkscope.metrics.analyze) and from C++ (build/bench/bench_analysis_call, Google Benchmark),
on the same arrays, one thread each.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_call_overhead.py [--build build]

Prints per case the fastest of several repetitions of each side (the least disturbed by other
load on the machine) and the difference: the binding's overhead (argument conversion, GIL
release, results converted to numpy arrays and dicts).
"""

import argparse
import json
import os
import subprocess
import timeit

import numpy as np

import sinkscope

CASES = {  # benchmark name -> (shape (N, L, H, T), analyses)
    "BM_ComputeMetricsSmall": ((1, 2, 2, 8), "compositional"),
    "BM_ComputeMetricsLarge": ((16, 4, 4, 64), "sink_eps"),
}


def uniform_causal(n, l, h, t):
    """a[n, l, h, i, j] = 1 / (i + 1) for j <= i, as bench_analysis_call.cpp builds it."""
    rows = np.tril(np.ones((t, t), np.float32)) / np.arange(1, t + 1, dtype=np.float32)[:, None]
    return np.ascontiguousarray(np.broadcast_to(rows, (n, l, h, t, t)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    exe = os.path.join(args.build, "bench", "bench_analysis_call")
    r = subprocess.run([exe, "--benchmark_format=json",
                        f"--benchmark_repetitions={args.repeats}"],
                       check=True, capture_output=True, text=True)
    cpp = {}
    for b in json.loads(r.stdout)["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        t = b["real_time"] * {"us": 1e-6, "ms": 1e-3, "ns": 1e-9}[b["time_unit"]]
        cpp[b["run_name"]] = min(t, cpp.get(b["run_name"], t))
    print(f"{'case':<24} {'C++':>12} {'Python':>12} {'overhead':>12}")
    for name, (shape, analyses) in CASES.items():
        a = uniform_causal(*shape)
        call = lambda: sinkscope.metrics.analyze(a, analyses=analyses, threads=1)  # noqa: E731
        number = max(1, int(0.2 / max(1e-6, timeit.timeit(call, number=1))))
        times = timeit.repeat(call, number=number, repeat=args.repeats)
        py = min(times) / number
        print(f"{name:<24} {cpp[name] * 1e3:>10.3f}ms {py * 1e3:>10.3f}ms "
              f"{(py - cpp[name]) * 1e6:>10.1f}us  ({a.nbytes / 2**20:.2f} MiB input)")


if __name__ == "__main__":
    main()
