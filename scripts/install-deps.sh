#!/usr/bin/env bash
# Installs every Debian package sinkscope needs (non-interactive, idempotent), then configures
# and builds in Release with -j2 into ./build. Options: BUILD_DIR, SINKSCOPE_WITH_TORCH=OFF.
#
# usage: scripts/install-deps.sh [TARGET...]
#        scripts/install-deps.sh --corpus    (only the packages scripts/make_english_corpus.py reads)
# Without a target everything is built (the tests, benchmarks and the Python module too: what
# scripts/test.sh runs); with targets only those and what they need, e.g. `sinkscope`, the tool
# alone (the README's first command: about half the compile steps).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build git pkg-config
  libtorch-dev libopenblas0-pthread          # model runtime; OpenBLAS makes libtorch's BLAS fast
  libblas-dev                                # cblas.h (value-space products; OpenBLAS at run time)
  liblapack-dev                              # symmetric eigenvalues of the spectra (OpenBLAS's)
  libgloo-dev                                # headers of c10d's Gloo backend (multi-process runs)
  libeigen3-dev libgudhi-dev libboost-dev libspectra-dev
  libhwy-dev                                 # SIMD with run-time dispatch (metrics pair kernels)
  nlohmann-json3-dev libcli11-dev libpcre2-dev libsentencepiece-dev
  libpng-dev                                 # PNG images for vision models (ViT)
  libssl-dev                                 # libcrypto's SHA-256 (weight files in run.json)
  libgtest-dev libbenchmark-dev
  clang-format                               # scripts/check-format.sh (ctest label format)
  clang libclang-rt-dev llvm                 # scripts/sanitize.sh, scripts/fuzz.sh (ASan, UBSan,
                                             # libFuzzer, llvm-symbolizer for their reports)
  pybind11-dev python3-dev python3-numpy python3-pytest
  python3-scipy                              # reference values of tests/metrics/test_statistics
  python3-networkx                           # reference values of tests/python/test_graph_paths
  python3-mpmath                             # scripts/kernel_log_fit.py (ctest kernel_log_fit)
  chromium                                   # headless check that report.html renders
)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

# --- corpus packages (issue 53) ------------------------------------------------------------
# The documentation whose prose scripts/make_english_corpus.py reads (licences in its
# docstring and in models/default/README.md; scripts/make_default_model.sh trains the default
# model on it). Only `scripts/install-deps.sh --corpus` installs them, and then nothing else
# (no build); a plain run leaves them out. Idempotent: installed packages are skipped.
CORPUS_PACKAGES=(
  python3-doc debian-handbook debian-reference-en debian-policy developers-reference
  fortunes fortunes-min
)
install_corpus_packages() {
  local p want=()
  for p in "${CORPUS_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      want+=("$p")
    fi
  done
  if ((${#want[@]})); then
    echo "install-deps: installing ${want[*]}" >&2
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${want[@]}"
  fi
}
if [ "${1:-}" = "--corpus" ]; then
  install_corpus_packages
  exit 0
fi
# --- end of corpus packages ----------------------------------------------------------------

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Vega, Vega-Lite and vega-embed from the npm registry, pinned by package-lock.json; the build
# inlines them into report.html so reports work offline.
if ! command -v npm >/dev/null; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends nodejs npm
fi
if [ ! -f third_party/report-js/node_modules/vega/build/vega.min.js ] ||
   [ ! -f third_party/report-js/node_modules/vega-lite/build/vega-lite.min.js ] ||
   [ ! -f third_party/report-js/node_modules/vega-embed/build/vega-embed.min.js ]; then
  (cd third_party/report-js && npm ci --no-audit --no-fund --silent)
fi

BUILD_DIR=${BUILD_DIR:-build}
# SINKSCOPE_SANITIZE_MODEL=ON (SANITIZE_MODEL=1 scripts/test.sh): the model module under ASan + UBSan.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSINKSCOPE_WITH_TORCH="${SINKSCOPE_WITH_TORCH:-ON}" \
  -DSINKSCOPE_SANITIZE_MODEL="${SINKSCOPE_SANITIZE_MODEL:-OFF}" >/dev/null
if [ $# -gt 0 ]; then
  cmake --build "$BUILD_DIR" -j2 --target "$@"
else
  cmake --build "$BUILD_DIR" -j2
fi
