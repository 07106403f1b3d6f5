#!/usr/bin/env bash
# Install, build, and simulate the default scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build/dtsim run scenarios/default.json --trace --html
