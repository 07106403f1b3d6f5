#!/usr/bin/env bash
# Installs what dtsim needs from Debian 12 and builds it (Release) into build/.
# Safe to run again: apt skips what is installed, cmake rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/packages.sh
install_packages "${dtsim_packages[@]}"
[ "${DTSIM_BUILD_TESTS:-ON}" = OFF ] || install_packages "${dtsim_test_packages[@]}"

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DDTSIM_BUILD_TESTS="${DTSIM_BUILD_TESTS:-ON}"
cmake --build build -j "$(nproc)"
