#!/usr/bin/env bash
# `sinkscope analyze` on the same inputs as 1 process x 1 thread, 1 process x 2 threads and
# 2 processes x 1 thread (c10d Gloo on 127.0.0.1): wall time, peak RSS per process, and the
# parallel efficiency of each two-core configuration, T(1x1) / (2 T). The inputs: the built-in
# prompt set written twice (422 lines), the first N of them (default 400).
#
#   bench/distributed.sh [build/sinkscope] [MODEL] [N] [MAX_TOKENS]
set -euo pipefail
cd "$(dirname "$0")/.."
EXE=${1:-build/sinkscope}
MODEL=${2:-../shared/models/tinystories656K}
N=${3:-400}
T=${4:-128}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat data/prompts/default.txt data/prompts/default.txt > "$tmp/data.txt"
args=(analyze --model "$MODEL" --data "$tmp/data.txt" --samples "$N" --max-tokens "$T"
      --no-report --quiet)
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# run NAME COMMAND...: wall seconds into $tmp/NAME.wall, peak RSS (KiB) into $tmp/NAME.rss.
run() {
  local name=$1
  shift
  /usr/bin/time -f %M -o "$tmp/$name.rss" "$@" > "$tmp/$name.log" 2>&1
}
clock() { date +%s.%N; }

t0=$(clock); run 1x1 "$EXE" "${args[@]}" --threads 1 --out "$tmp/1x1"; t1=$(clock)
run 1x2 "$EXE" "${args[@]}" --threads 2 --out "$tmp/1x2"; t2=$(clock)
for r in 0 1; do
  run "2x1.$r" "$EXE" "${args[@]}" --threads 1 --out "$tmp/2x1" --world-size 2 --rank "$r" \
    --master "127.0.0.1:$port" &
done
wait
t3=$(clock)
test -f "$tmp/2x1/run.json"  # rank 0 wrote the merged run

/usr/bin/python3 - "$t0" "$t1" "$t2" "$t3" "$tmp" "$N" "$T" <<'PY'
import sys
t0, t1, t2, t3 = map(float, sys.argv[1:5])
tmp, n, t = sys.argv[5], int(sys.argv[6]), sys.argv[7]
rss = lambda name: int(open(f"{tmp}/{name}.rss").read().split()[-1]) / 1024
w11, w12, w21 = t1 - t0, t2 - t1, t3 - t2
print(f"{n} inputs, max {t} tokens")
print(f"1 process  x 1 thread : {w11:7.1f} s  ({1000 * w11 / n:.1f} ms/input)  peak RSS {rss('1x1'):.0f} MiB")
print(f"1 process  x 2 threads: {w12:7.1f} s  efficiency {w11 / (2 * w12):.2f}  peak RSS {rss('1x2'):.0f} MiB")
print(f"2 processes x 1 thread: {w21:7.1f} s  efficiency {w11 / (2 * w21):.2f}  peak RSS "
      f"{rss('2x1.0'):.0f} + {rss('2x1.1'):.0f} MiB")
print(f"2x1 vs 1x2: {w12 / w21:.2f}x")
PY
