"""How long Ctrl-C takes to stop a long `sinkscope.analyze` from Python: the time from SIGINT to
the KeyboardInterrupt in the interrupted process (the run stops after the input being processed).

    PYTHONPATH=build/python /usr/bin/python3 bench/ctrl_c_latency.py [--model DIR] [--repeats 5]

Each repetition starts a fresh Python process on 20,000 short inputs, waits until 3 are done,
sends SIGINT and reads the moment the process caught KeyboardInterrupt (CLOCK_MONOTONIC, the
same clock in both processes). Prints every latency and the fastest, median and slowest. The
test (tests/python/test_commands.py) checks only what the user needs, without a time bound.
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def one_run(model, threads, workdir):
    data = os.path.join(workdir, "many.txt")
    if not os.path.exists(data):
        with open(data, "w") as f:
            f.writelines(f"Once upon a time there were {i} cats in a garden.\n"
                         for i in range(20000))
    out = os.path.join(workdir, "run")
    script = textwrap.dedent(f"""
        import sys, time, sinkscope
        def progress(n):
            if n == 3:
                print("running", flush=True)
        try:
            sinkscope.analyze({model!r}, {data!r}, out={out!r}, max_tokens=16,
                              threads={threads}, progress=progress)
        except KeyboardInterrupt:
            print("interrupted", time.monotonic(), flush=True)
            sys.exit(0)
        print("finished", flush=True)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "running":
        p.kill()
        sys.exit("the analyze process did not start; is PYTHONPATH=build/python set?")
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    line = p.stdout.readline().split()
    p.wait()
    if not line or line[0] != "interrupted":
        sys.exit(f"the run was not interrupted: {line}")
    return float(line[1]) - sent


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(HERE, "..", "..", "shared", "models",
                                                    "tinystories656K"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    latencies = []
    with tempfile.TemporaryDirectory() as workdir:
        for k in range(args.repeats):
            latencies.append(one_run(os.path.abspath(args.model), args.threads, workdir))
            print(f"run {k + 1}: {latencies[-1] * 1000:.1f} ms", flush=True)
    print(f"Ctrl-C to KeyboardInterrupt, {args.repeats} runs: fastest "
          f"{min(latencies) * 1000:.1f} ms, median {statistics.median(latencies) * 1000:.1f} ms, "
          f"slowest {max(latencies) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
