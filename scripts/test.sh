#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run): installs the Debian packages and builds
# (scripts/install-deps.sh), runs every ctest test of ./build, then the hostile-input checks:
# the torch-free unit and golden tests under AddressSanitizer + UBSan (scripts/sanitize.sh) and
# every fuzz target for FUZZ_SECONDS (default 25) seconds (scripts/fuzz.sh). Stops at the first
# stage that fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
ctest --test-dir build -j2 --output-on-failure
scripts/sanitize.sh
scripts/fuzz.sh "${FUZZ_SECONDS:-25}"
echo "test.sh: all stages passed"
