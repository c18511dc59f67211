#!/usr/bin/python3
"""Wall time of `sinkscope analyze` at --threads 1, 2 and the default (0: every core), on a
quiet machine and beside CPU hogs (busy-loop processes), and the ratio of each to one thread.

Issue 46 item 3's targets: no thread count slower than one thread on a quiet machine, and
none more than 1.3x slower than one thread beside a hog. Every run also checks that the tables
are the same bytes as the one-thread run's (results do not depend on --threads).

    /usr/bin/python3 bench/threads_contention.py [--exe build/sinkscope] [--shared ../shared]
        [--samples 100] [--repeats 3] [--hogs 1]

The defaults are the issue's case: tinystories656K, the first 100 sentences of
stem_sentences.csv, --no-report. Each configuration runs --repeats times, alternated; the
median is reported.
"""
import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def hog():
    """A busy loop, as another job on the user's machine."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def run(exe, model, data, samples, threads, out):
    if out.exists():
        shutil.rmtree(out)
    cmd = [exe, "analyze", "--model", model, "--data", data, "--samples", str(samples),
           "--threads", str(threads), "--out", str(out), "--no-report", "--progress", "never"]
    t0 = time.monotonic()
    r0 = os.times()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    r1 = os.times()
    return time.monotonic() - t0, (r1.children_user - r0.children_user) + (
        r1.children_system - r0.children_system)


def tables(out):
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.suffix == ".csv"}


def main():
    here = pathlib.Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exe", default=str(here / "build" / "sinkscope"))
    ap.add_argument("--shared", default=str(here.parent / "shared"))
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hogs", type=int, default=1, help="busy-loop processes beside the run")
    a = ap.parse_args()
    model = str(pathlib.Path(a.shared) / "models" / "tinystories656K")
    data = str(pathlib.Path(a.shared) / "data" / "stem_sentences.csv")
    counts = [1, 2, 0]
    print(f"cores: {os.cpu_count()}, samples: {a.samples}, repeats: {a.repeats}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        reference = None
        for label, n_hogs in (("quiet", 0), (f"{a.hogs} hog(s)", a.hogs)):
            hogs = [hog() for _ in range(n_hogs)]
            try:
                walls = {t: [] for t in counts}
                cpus = {t: [] for t in counts}
                for _ in range(a.repeats):
                    for t in counts:
                        out = tmp / f"t{t}"
                        wall, cpu = run(a.exe, model, data, a.samples, t, out)
                        walls[t].append(wall)
                        cpus[t].append(cpu)
                        got = tables(out)
                        if reference is None:
                            reference = got
                        elif got != reference:
                            print(f"tables differ with --threads {t} ({label})")
                            return 1
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()
            base = statistics.median(walls[1])
            print(f"\n{label}:")
            print(f"{'--threads':>10} {'wall s':>8} {'CPU s':>8} {'/ 1 thread':>11}")
            for t in counts:
                w = statistics.median(walls[t])
                print(f"{t:>10} {w:8.2f} {statistics.median(cpus[t]):8.2f} {w / base:11.2f}")
    print("\ntables identical for every thread count and load")
    return 0


if __name__ == "__main__":
    sys.exit(main())
