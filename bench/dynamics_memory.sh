#!/usr/bin/env bash
# Peak memory of `sinkscope dynamics` against the length of the series: the shipped model's four
# checkpoints (models/default/manifest.json), then a manifest listing each of them twice under
# two labels (eight checkpoints). One model is in memory at a time and at most two checkpoints'
# rows, so the peak should not grow with the number of checkpoints.
#
#   bench/dynamics_memory.sh [build/sinkscope] [SAMPLES]
set -euo pipefail
cd "$(dirname "$0")/.."
EXE=${1:-build/sinkscope}
SAMPLES=${2:-64}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$(pwd)/models/default
{
  echo "label,step,path"
  k=0
  for rep in a b; do
    for s in 1000 2000 5000 10000; do
      k=$((k + 1))
      printf '%s%s,%d,%s/checkpoints/step_%06d\n' "$rep" "$s" "$k" "$root" "$s"
    done
  done
} > "$tmp/eight.csv"
for m in "$root/manifest.json" "$tmp/eight.csv"; do
  out="$tmp/run-$(basename "$m")"
  start=$(date +%s.%N)
  "$EXE" dynamics --checkpoints "$m" --out "$out" --samples "$SAMPLES" --threads 1 \
    --progress never --no-report > /dev/null
  end=$(date +%s.%N)
  /usr/bin/python3 - "$out/run.json" "$m" "$start" "$end" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
n = len(run["checkpoints"])
print(f"{n} checkpoints: peak RSS {run['peak_rss_bytes'] / 2**20:.1f} MiB, "
      f"wall {float(sys.argv[4]) - float(sys.argv[3]):.1f} s ({sys.argv[2]})")
PY
done
