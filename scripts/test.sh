#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run): installs the Debian packages and builds
# (scripts/install-deps.sh), runs every ctest test of ./build, then the hostile-input checks:
# the torch-free unit and golden tests in a clang build under AddressSanitizer (leak checking
# included) + UBSan (scripts/sanitize.sh) and every fuzz target for FUZZ_SECONDS (default 25)
# seconds (scripts/fuzz.sh). Stops at the first stage that fails.
#
# SANITIZE_MODEL=1 scripts/test.sh runs the ctest stage in ./build-asan instead, with the model
# module (loaders, architectures, forward, training) under GCC's ASan + UBSan and leak checking
# off (libtorch keeps allocations until exit). About 20 minutes more than the plain run on
# 2 cores (the suite takes twice as long), so CI runs the plain one.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${SANITIZE_MODEL:-0}" = 1 ]; then
  BUILD_DIR=build-asan SINKSCOPE_SANITIZE_MODEL=ON scripts/install-deps.sh
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan -j2 --output-on-failure
else
  scripts/install-deps.sh
  ctest --test-dir build -j2 --output-on-failure
fi
scripts/sanitize.sh
scripts/fuzz.sh "${FUZZ_SECONDS:-25}"
echo "test.sh: all stages passed"
