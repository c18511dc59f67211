#!/usr/bin/env bash
# Real-size checkpoints on this machine (issue 47): inspect time, and analyze of one 512-token
# input (token ids, default dtype float32) with its wall time and peak resident memory, for
# random-weight checkpoints with public shapes (bench/make_checkpoint.py). The 3B bf16 model also
# runs with --widen-weights (every weight converted at load, as before issue 47), and the two
# runs' tables must be the same bytes.
#
# usage: bench/real_sizes.sh WORKDIR [--hog] [--only NAME]
#   WORKDIR  where the checkpoints are generated when absent (about 35 GB for all four)
#   --hog    run one busy loop per core beside every measurement (a busy user machine)
#   --only   one of: 3b-bf16 8b-q4k 8b-q8 8b-bf16
# Prints one line per run: name, file size, inspect wall, analyze wall, peak RSS, exit status.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
exe="$here/build/sinkscope"
work=${1:?usage: bench/real_sizes.sh WORKDIR [--hog] [--only NAME]}
shift
hog=0
only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --hog) hog=1 ;;
        --only) only=$2; shift ;;
        *) echo "real_sizes.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[ -x "$exe" ] || { echo "real_sizes.sh: build sinkscope first ($exe not found)" >&2; exit 2; }
mkdir -p "$work"

hogs=()
stop_hogs() { for p in "${hogs[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap stop_hogs EXIT
if [ "$hog" = 1 ]; then
    for _ in $(seq "$(nproc)"); do (while :; do :; done) & hogs+=($!); done
fi

# name preset format path ids
runs=(
    "3b-bf16 llama-3.2-3b safetensors $work/llama-3.2-3b $work/llama-3.2-3b/ids_512.npy"
    "8b-q4k llama-3-8b gguf-q4_k $work/llama-3-8b-q4_k.gguf $work/llama-3-8b-q4_k.ids_512.npy"
    "8b-q8 llama-3-8b gguf-q8_0 $work/llama-3-8b-q8_0.gguf $work/llama-3-8b-q8_0.ids_512.npy"
    "8b-bf16 llama-3-8b safetensors $work/llama-3-8b $work/llama-3-8b/ids_512.npy"
)

measure() {  # label out-dir command... -> "wall peak_GB rc"
    local label=$1 out=$2
    shift 2
    rm -rf "$out"
    local log="$work/$label.time.log"
    set +e
    /usr/bin/time -v "$@" --out "$out" > "$log" 2>&1
    local rc=$?
    set -e
    local wall peak
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$log")
    peak=$(awk -F': ' '/Maximum resident set size/ {printf "%.2f", $2 / 1048576}' "$log")
    echo "$wall ${peak}GB rc=$rc"
}

for r in "${runs[@]}"; do
    read -r name preset format path ids <<< "$r"
    [ -z "$only" ] || [ "$only" = "$name" ] || continue
    if [ ! -e "$path" ]; then
        /usr/bin/python3 "$here/bench/make_checkpoint.py" "$path" --preset "$preset" \
            --format "$format" --tokens 512 > "$work/$name.generate.log"
    fi
    size=$(du -sbL "$path" | awk '{printf "%.2f", $1 / 1e9}')
    t0=$(date +%s.%N)
    "$exe" inspect --model "$path" > "$work/$name.inspect.txt"
    t1=$(date +%s.%N)
    inspect_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
    analyze=$(measure "$name" "$work/$name.run" "$exe" analyze --model "$path" --data "$ids" \
        --max-tokens 512 --no-report --overwrite)
    echo "$name file ${size}GB inspect ${inspect_s}s analyze $analyze"
    if [ "$name" = 3b-bf16 ]; then
        widened=$(measure "$name-widen" "$work/$name.widen.run" "$exe" analyze --model "$path" \
            --data "$ids" --max-tokens 512 --no-report --overwrite --widen-weights)
        same=yes
        for f in "$work/$name.run"/*.csv; do
            cmp -s "$f" "$work/$name.widen.run/$(basename "$f")" || same=no
        done
        echo "$name --widen-weights analyze $widened tables-identical=$same"
    fi
done
