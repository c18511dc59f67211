#!/usr/bin/env bash
# Installs every Debian package sinkscope needs (non-interactive, idempotent), then configures
# and builds in Release with -j2 into ./build. Options: BUILD_DIR, SINKSCOPE_WITH_TORCH=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build git pkg-config
  libtorch-dev libopenblas0-pthread          # model runtime; OpenBLAS makes libtorch's BLAS fast
  libeigen3-dev libgudhi-dev libboost-dev libspectra-dev
  nlohmann-json3-dev libcli11-dev libpcre2-dev libsentencepiece-dev
  libgtest-dev libbenchmark-dev
  pybind11-dev python3-dev python3-numpy python3-pytest
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSINKSCOPE_WITH_TORCH="${SINKSCOPE_WITH_TORCH:-ON}" >/dev/null
cmake --build "$BUILD_DIR" -j2
