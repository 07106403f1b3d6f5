#!/bin/sh
# Prints "scenario step_time_s samples_per_s model_flops peak_bytes" for every runnable scenario,
# so a change that must not move any figure can be checked by diffing two runs:
#   scripts/scenario_figures.sh > before.txt; (change, rebuild); scripts/scenario_figures.sh > after.txt; diff before.txt after.txt
set -u
cd "$(dirname "$0")/.."
bin=${DTSIM:-build/dtsim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
find scenarios -name '*.json' | sort | while read -r f; do
  if "$bin" run "$f" --format json -o "$tmp/out" > "$tmp/r.json" 2> "$tmp/err"; then
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], r["step_time_s"], r["throughput"]["samples_per_s"], r["flops"]["model_flops_per_step"], r["memory"]["peak_bytes"])' "$tmp/r.json" "$f"
  else
    echo "$f not runnable: $(head -c 200 "$tmp/err")"
  fi
done
