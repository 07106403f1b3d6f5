#!/usr/bin/env bash
# Here, after gpu_check.sh's files came back: scripts/gpu_compare.py (see its --help).
#   scripts/gpu_compare.sh RETURNED_DIR [-o report.md] [--install]
exec python3 "$(dirname "$0")/gpu_compare.py" "$@"
