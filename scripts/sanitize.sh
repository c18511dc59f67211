#!/usr/bin/env bash
# The unit and golden tests of the torch-free modules (core, io, tokenizer, metrics, analysis,
# report) under AddressSanitizer (with leak checking) and UBSan, every finding fatal. Builds with
# scripts/sanitized-build.sh first; runs two test programs at a time. Exit status: non-zero when a
# test or a sanitizer fails (each failing program's log is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${SAN_BUILD_DIR:-build-san}
TESTS=(test_metrics golden_tokenizer test_io golden_io test_tokenizer test_core test_analysis
       test_report)
scripts/sanitized-build.sh "${TESTS[@]}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
shared=$(cd .. && pwd)/shared
export SINKSCOPE_SHARED=${SINKSCOPE_SHARED:-$shared}
logs="$BUILD/sanitize-logs"
rm -rf "$logs" && mkdir -p "$logs"
start=$(date +%s)
printf '%s\n' "${TESTS[@]}" | xargs -P 2 -I{} sh -c \
  '"$0/tests/{}" --gtest_brief=1 >"$1/{}.log" 2>&1 && echo "sanitize: {} passed" || { echo "sanitize: {} FAILED"; touch "$1/{}.failed"; }' \
  "$BUILD" "$logs"
failed=0
for t in "${TESTS[@]}"; do
  if [ -e "$logs/$t.failed" ]; then
    failed=1
    echo "---- $t (log $logs/$t.log, last 60 lines)"
    tail -n 60 "$logs/$t.log"
  fi
done
echo "sanitize: ${#TESTS[@]} test programs in $(( $(date +%s) - start )) s, $([ $failed = 0 ] && echo 'no failures' || echo 'FAILURES')"
exit $failed
