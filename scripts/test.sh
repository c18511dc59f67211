#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run): installs the Debian packages and builds
# (scripts/install-deps.sh) with the libtorch modules (model, analysis, api) under
# AddressSanitizer + UBSan, runs every ctest test of ./build (so the model, analysis and CLI tests
# run with those checks; leak checking off, libtorch keeps allocations until exit), then the
# hostile-input checks: the torch-free unit and golden tests in a clang build under ASan with
# leak checking + UBSan (scripts/sanitize.sh) and every fuzz target for FUZZ_SECONDS (default 25)
# seconds (scripts/fuzz.sh). Stops at the first stage that fails. The README's main command
# builds ./build again without the sanitizers (only the libtorch modules recompile).
set -euo pipefail
cd "$(dirname "$0")/.."
SINKSCOPE_SANITIZE_MODEL=ON scripts/install-deps.sh
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build -j2 --output-on-failure
scripts/sanitize.sh
scripts/fuzz.sh "${FUZZ_SECONDS:-25}"
echo "test.sh: all stages passed"
