#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz (one per parser of untrusted input), each for SECONDS
# (default 25), two at a time, from the seed corpus tests/fuzz/corpus/<name> with the dictionary
# tests/fuzz/dict/<name>.dict. Builds them first (scripts/sanitized-build.sh, ASan + UBSan).
# Fails when any target crashes, times out (10 s on one input), exceeds 2 GB, leaks or trips a
# sanitizer; the input that did it is kept in ${SAN_BUILD_DIR:-build-san}/fuzz/<target>/findings/<run>.
#
#   scripts/fuzz.sh               # the CI smoke run: every target 25 s
#   scripts/fuzz.sh 600           # ten minutes each
#   scripts/fuzz.sh 60 fuzz_gguf  # one target
#
# The repository's corpus is only read: what a run discovers goes to the build folder's corpus
# (kept between runs, so longer runs build on earlier ones).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-25}
shift || true
BUILD=${SAN_BUILD_DIR:-build-san}
case "$SECS" in ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, got '$SECS'" >&2; exit 2;; esac
scripts/sanitized-build.sh fuzz_targets
if (($#)); then targets=("$@"); else mapfile -t targets < "$BUILD/fuzz_targets.txt"; fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
run_one() {  # target seconds build
  local t=$1 secs=$2 build=$3 name=${1#fuzz_}
  local work="$build/fuzz/$t"
  # Each run keeps its findings in a folder of its own: an earlier run's inputs are never removed.
  local found="$work/findings/$(date -u +%Y%m%dT%H%M%SZ)-$$"
  mkdir -p "$work/corpus" "$found"
  local dict=()
  [ -f "tests/fuzz/dict/$name.dict" ] && dict=(-dict="tests/fuzz/dict/$name.dict")
  local rc=0
  "$build/tests/fuzz/$t" "$work/corpus" "tests/fuzz/corpus/$name" "${dict[@]}" \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$found/" >"$work/log" 2>&1 || rc=$?
  local execs cov corp
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -1 | cut -d' ' -f2)
  corp=$(ls "$work/corpus" | wc -l)
  local findings
  findings=$(ls "$found" | wc -l)
  printf '%-22s %6ss %10s execs %6s edges %6s corpus %3s findings rc=%s\n' "$t" "$secs" \
    "${execs:-?}" "${cov:-?}" "$corp" "$findings" "$rc"
  if [ "$rc" != 0 ] || [ "$findings" != 0 ]; then
    echo "---- $t failed; last 40 lines of $work/log:"
    tail -n 40 "$work/log"
    return 1
  fi
}
export -f run_one
echo "fuzz: ${#targets[@]} targets x ${SECS} s, 2 at a time (ASan + UBSan)"
status=0
printf '%s\n' "${targets[@]}" | xargs -P 2 -I{} bash -c 'run_one "$@"' _ {} "$SECS" "$BUILD" ||
  status=1
exit $status
