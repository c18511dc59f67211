"""What the Python binding adds to a metrics call: the same calls timed from Python
(sinkscope.metrics.analyze, results in memory) and from C++ (build/bench/bench_analysis_call,
Google Benchmark, api::compute_metrics), on the same arrays, one thread each.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_call_overhead.py [--build build]

Prints per case the fastest of several repetitions of each side, over rounds that alternate the
two sides (the least disturbed by other load on the machine), the difference (the binding's
overhead: argument conversion, GIL release, results converted to numpy arrays and dicts) and the
ratio Python / C++ (issue 52's goal for a small call: at most 2), in wall time and in CPU time (the
process's, one thread each side: what a busy machine disturbs least). No file is written.
"""

import argparse
import json
import os
import subprocess
import time
import timeit

import numpy as np

import sinkscope

GOAL = 2.0  # Python time / C++ time of a small call (issue 52)


def uniform_causal(n, l, h, t):
    """a[n, l, h, i, j] = 1 / (i + 1) for j <= i, as bench_analysis_call.cpp builds it."""
    rows = np.tril(np.ones((t, t), np.float32)) / np.arange(1, t + 1, dtype=np.float32)[:, None]
    return np.ascontiguousarray(np.broadcast_to(rows, (n, l, h, t, t)))


CASES = {  # benchmark name -> (attention, analyses; None: every analysis)
    "BM_ComputeMetricsSmall": (lambda: uniform_causal(1, 2, 2, 8), "compositional"),
    "BM_ComputeMetricsExample": (sinkscope.metrics.example_attention, "compositional"),
    "BM_ComputeMetricsExampleAll": (sinkscope.metrics.example_attention, None),
    "BM_ComputeMetricsLarge": (lambda: uniform_causal(16, 4, 4, 64), "sink_eps"),
}


def cpp_times(build, name, repeats):
    """(wall, cpu) seconds per call of the benchmark `name`, the fastest repetition. Each case
    runs in a process of its own: in one process the example case took twice as long after the
    small one had run (0.84 ms alone, 1.77 ms after it; the heap's state, not the call)."""
    exe = os.path.join(build, "bench", "bench_analysis_call")
    r = subprocess.run([exe, "--benchmark_format=json", f"--benchmark_repetitions={repeats}",
                        f"--benchmark_filter=^{name}$"], check=True, capture_output=True, text=True)
    best = (float("inf"), float("inf"))
    for b in json.loads(r.stdout)["benchmarks"]:
        if b.get("run_type") == "iteration":
            unit = {"us": 1e-6, "ms": 1e-3, "ns": 1e-9}[b["time_unit"]]
            best = tuple(map(min, best, (b["real_time"] * unit, b["cpu_time"] * unit)))
    return best


def python_times(a, analyses, repeats):
    """(wall, cpu) seconds per call of sinkscope.metrics.analyze, the fastest repetition."""
    kw = {"threads": 1} if analyses is None else {"threads": 1, "analyses": analyses}
    call = lambda: sinkscope.metrics.analyze(a, **kw)  # noqa: E731
    number = max(1, int(0.2 / max(1e-6, timeit.timeit(call, number=1))))
    best = (float("inf"), float("inf"))
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        for _ in range(number):
            call()
        t = ((time.perf_counter() - w) / number, (time.process_time() - c) / number)
        best = tuple(map(min, best, t))
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    arrays = {name: make() for name, (make, _) in CASES.items()}
    # The two sides alternate, round after round, and each keeps its fastest time: a load that
    # comes and goes on the machine weighs on both alike.
    cpp, py = {}, {}
    for _ in range(args.rounds):
        for name, (_, analyses) in CASES.items():
            t = cpp_times(args.build, name, args.repeats)
            cpp[name] = tuple(map(min, t, cpp.get(name, t)))
            t = python_times(arrays[name], analyses, args.repeats)
            py[name] = tuple(map(min, t, py.get(name, t)))
    for k, clock in enumerate(("wall", "CPU")):
        print(f"{clock + ' time per call':<28} {'C++':>10} {'Python':>10} {'overhead':>10} "
              f"{'ratio':>6}")
        for name, (_, analyses) in CASES.items():
            c, q = cpp[name][k], py[name][k]
            print(f"{name:<28} {c * 1e3:>8.3f}ms {q * 1e3:>8.3f}ms {(q - c) * 1e6:>8.1f}us "
                  f"{q / c:>6.2f}  ({arrays[name].shape}, {analyses or 'all'})"
                  f"{'' if q / c <= GOAL else '  above the goal'}")


if __name__ == "__main__":
    main()
