#!/usr/bin/env bash
# Layer ranks (analyze --split layers, issue 47): one checkpoint analysed by one process, then by
# W processes on 127.0.0.1 that each run 1/W of its layers; prints each run's wall time and each
# process's peak resident memory, and whether every table and array of the two runs is the same
# bytes (it must be).
#
# usage: bench/layer_ranks.sh MODEL IDS.npy WORKDIR [W] [extra analyze options...]
#   MODEL    a checkpoint (bench/make_checkpoint.py writes random-weight ones of public shapes)
#   IDS.npy  the token ids to analyse (make_checkpoint.py --tokens T writes [1, T])
#   WORKDIR  where the runs and logs go (replaced)
#   W        processes of the layer run (default 2)
# Set HOG=1 to run one busy loop per core beside every measurement (a busy user machine).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
exe="$here/build/sinkscope"
model=${1:?usage: bench/layer_ranks.sh MODEL IDS.npy WORKDIR [W] [options...]}
ids=${2:?usage: bench/layer_ranks.sh MODEL IDS.npy WORKDIR [W] [options...]}
work=${3:?usage: bench/layer_ranks.sh MODEL IDS.npy WORKDIR [W] [options...]}
world=${4:-2}
shift $(($# < 4 ? $# : 4))
[ -x "$exe" ] || { echo "layer_ranks.sh: build sinkscope first ($exe not found)" >&2; exit 2; }
mkdir -p "$work"

hogs=()
stop_hogs() { for p in "${hogs[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap stop_hogs EXIT
if [ "${HOG:-0}" = 1 ]; then
    for _ in $(seq "$(nproc)"); do (while :; do :; done) & hogs+=($!); done
fi

args=(analyze --model "$model" --data "$ids" --max-tokens 100000 --no-report --quiet "$@")
peak() { awk -F': ' '/Maximum resident set size/ {printf "%.2f GB", $2 / 1048576}' "$1"; }
wall() { awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$1"; }

rm -rf "$work/one" "$work/layers"
/usr/bin/time -v "$exe" "${args[@]}" --out "$work/one" > "$work/one.log" 2>&1
echo "one process: wall $(wall "$work/one.log"), peak $(peak "$work/one.log")"

port=$((20000 + RANDOM % 20000))
pids=()
for r in $(seq 0 $((world - 1))); do
    /usr/bin/time -v "$exe" "${args[@]}" --out "$work/layers" --split layers \
        --world-size "$world" --rank "$r" --master "127.0.0.1:$port" > "$work/rank$r.log" 2>&1 &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
for r in $(seq 0 $((world - 1))); do
    echo "layer rank $r of $world: wall $(wall "$work/rank$r.log"), peak $(peak "$work/rank$r.log")"
done
[ "$rc" = 0 ] || { echo "layer_ranks.sh: a rank failed (logs in $work)" >&2; exit 1; }
same=yes
n=0
for f in "$work/one"/*.csv "$work/one"/*.npy; do
    [ -e "$f" ] || continue
    n=$((n + 1))
    cmp -s "$f" "$work/layers/$(basename "$f")" || { same=no; echo "differs: $(basename "$f")"; }
done
echo "tables and arrays identical: $same ($n files)"
