#!/usr/bin/env bash
# Configures and builds the sanitizer build (clang, AddressSanitizer + UBSan, libFuzzer coverage,
# no model runtime) in ${SAN_BUILD_DIR:-build-san}: the torch-free modules, their unit and golden
# tests, and the fuzz targets of tests/fuzz. Arguments: the ninja targets (default: all).
# Used by scripts/sanitize.sh and scripts/fuzz.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${SAN_BUILD_DIR:-build-san}
if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a \
    >/dev/null 2>&1; then
  echo "sanitized-build: needs clang and libclang-rt-dev (scripts/install-deps.sh installs them)" >&2
  exit 1
fi
# -O0 with line tables: about a quarter less compile time than -O1 (the sanitize targets' objects:
# 1515 -> 1141 s), exact stacks in the reports; the tests' sources, the parsers the fuzz targets
# exercise, the bootstrap and the pair kernels keep -O1 (CMakeLists.txt, SINKSCOPE_FUZZ).
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -gline-tables-only" -DSINKSCOPE_FUZZ=ON \
  -DSINKSCOPE_WITH_TORCH=OFF -DSINKSCOPE_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" -j"${SAN_JOBS:-2}" ${1:+--target "$@"}
