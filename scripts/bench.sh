#!/usr/bin/env bash
# Simulator speed: wall time and peak memory of one `dtsim run` per scenario, best of 3.
# A benchmark, not a test: this machine's CPU speed drifts, so compare numbers from one run.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/dtsim
[ -x "$bin" ] || scripts/setup.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf "%-44s %8s %10s %10s %8s\n" scenario gpus wall_s peak_MB tasks
for f in scenarios/gpt2-dp1024-a100.json scenarios/hybrid/gpt3-175b-1024-a100.json \
         scenarios/validation/megatron-1008.0b.json "$@"; do
  best=""
  for _ in 1 2 3; do
    /usr/bin/time -f "%e %M" -o "$tmp/time" "$bin" run "$f" --format json -o "$tmp/out" > "$tmp/result.json"
    read -r wall rss < "$tmp/time"
    if [ -z "$best" ] || awk "BEGIN{exit !($wall < ${best%% *})}"; then best="$wall $rss"; fi
  done
  gpus=$(python3 -c "import json;print(json.load(open('$tmp/result.json'))['parallelism']['gpus'])" 2>/dev/null || echo "?")
  tasks=$(python3 -c "import json;print(json.load(open('$tmp/result.json'))['simulation']['tasks'])" 2>/dev/null || echo "?")
  printf "%-44s %8s %10s %10d %8s\n" "$f" "$gpus" "${best%% *}" "$(( ${best##* } / 1024 ))" "$tasks"
done

# One 1 GB all-reduce in `dtsim collective` on SimGrid, whole process (issue #4's speed goals:
# 512 GPUs under 0.05 s, 16,384 under 2 s).
printf "\n%-44s %8s %10s %10s\n" collective gpus wall_s peak_MB
for case in "ring 512" "ring 16384" "tree 16384" "halving-doubling 16384"; do
  set -- $case
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$bin" collective --op all_reduce --algorithm "$1" --gpus "$2" \
    -b 1G -e 1G --format json > /dev/null
  read -r wall rss < "$tmp/time"
  printf "%-44s %8s %10s %10d\n" "all_reduce $1" "$2" "$wall" "$(( rss / 1024 ))"
done
