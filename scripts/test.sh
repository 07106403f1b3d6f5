#!/usr/bin/env bash
# Install, build, and run the whole test suite (each SimGrid test in its own process), then the
# same suite under sanitizers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
(cd build && ctest --output-on-failure -j "$(nproc)")
# The same suite built with AddressSanitizer and UndefinedBehaviorSanitizer into build-asan/:
# about 15 minutes from a cold cache on 2 cores (docs/safety.md). DTSIM_SKIP_SANITIZE=1 leaves it out.
if [ "${DTSIM_SKIP_SANITIZE:-0}" != 1 ]; then scripts/sanitize.sh; fi
