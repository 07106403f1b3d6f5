#!/usr/bin/env bash
# Install, build, and run the whole test suite (each SimGrid test in its own process).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
ctest --output-on-failure -j "$(nproc)"
