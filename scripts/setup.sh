#!/usr/bin/env bash
# Installs what dtsim needs from Debian 12 and builds it (Release) into build/.
# Safe to run again: apt skips what is installed, cmake rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config libsimgrid-dev libeigen3-dev libboost-dev
          nlohmann-json3-dev libfmt-dev libcli11-dev googletest libgtest-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DDTSIM_BUILD_TESTS="${DTSIM_BUILD_TESTS:-ON}"
cmake --build build -j "$(nproc)"
