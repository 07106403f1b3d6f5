#!/usr/bin/env bash
# Issue 28 item 4, for real: a single-node Slurm on this machine (scripts/slurm/local_cluster.sh)
# runs a sweep as a 4-task job array (scripts/slurm/sweep_array.sbatch), `dtsim merge` joins the
# parts, and the merged text, CSV and JSON must equal the sweep run whole, byte for byte.
# The daemons are stopped however the test ends; every wait is bounded and says what it waited for.
#   slurm_sweep.sh DTSIM SOURCE_DIR
# Exit 77 (ctest: skipped) only when not root: slurmd must run jobs as their user. CI runs as root.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: a local Slurm needs root (CI runs this as root)"
  exit 77
fi
dtsim=$(realpath "$1")
src=$(realpath "$2")
work=$(mktemp -d "${TMPDIR:-/tmp}/dtsim-slurm.XXXXXX")
cluster=$work/cluster

cleanup() {
  local rc=$?
  "$src/scripts/slurm/local_cluster.sh" stop "$cluster" || rc=1
  if [ $rc -ne 0 ]; then
    echo "--- failed; the logs:" >&2
    for f in "$cluster"/*.log "$work"/*.out; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }; done
  fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

"$src/scripts/slurm/local_cluster.sh" start "$cluster" --owner $$
export SLURM_CONF=$cluster/slurm.conf DTSIM=$dtsim

# A sweep over four clusters (1,248 candidates), the best 5 confirmed by the replay.
cd "$src"
sweep=(scenarios/gpt2-dp8-a100.json --gpus 8,16 --devices a100-sxm-80gb,h100-sxm-80gb --confirm 5)
jid=$(sbatch --parsable --array=1-4 --chdir="$src" --output="$work/task-%a.out" \
  scripts/slurm/sweep_array.sbatch "$work/parts" "${sweep[@]}") || fail "sbatch refused the array"
jid=${jid%%;*}

# Bounded: a task that never starts or never ends fails the test with the queue as it stood.
wait_s=${DTSIM_SLURM_JOB_WAIT_S:-240}
deadline=$((SECONDS + wait_s))
while [ -n "$(squeue -h -j "$jid" -o %i 2> /dev/null)" ]; do
  [ $SECONDS -lt $deadline ] || fail "the array's 4 tasks had not finished after ${wait_s} s: $(squeue -j "$jid" 2>&1)"
  sleep 1
done
states=$(scontrol show job "$jid" | grep -o 'JobState=[A-Z_]*' | sort | uniq -c | tr -s ' ')
[ "$(scontrol show job "$jid" | grep -c 'JobState=COMPLETED')" -eq 4 ] || fail "not every task completed:$states"
parts=("$work"/parts/part-*-of-4.json)
[ ${#parts[@]} -eq 4 ] || fail "expected 4 parts, found ${#parts[@]}: ${parts[*]}"

for format in text csv json; do
  "$dtsim" sweep "${sweep[@]}" --format "$format" > "$work/whole.$format"
  "$dtsim" merge "${parts[@]}" --format "$format" > "$work/merged.$format"
  cmp "$work/whole.$format" "$work/merged.$format" || fail "merged $format differs from the whole sweep's"
  echo "$format: merged parts of 4 Slurm array tasks == the whole sweep ($(wc -c < "$work/whole.$format") bytes)"
done
