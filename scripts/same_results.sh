#!/usr/bin/env bash
# Runs every scenario in scenarios/ with two dtsim binaries and compares their result.json byte
# for byte (a change meant to keep results must say "differ 0, exit codes differ 0").
# Usage: [OLD_TREE=DIR] scripts/same_results.sh OLD_DTSIM NEW_DTSIM [SCENARIO_DIR]
# OLD_TREE: a checkout of the old binary's commit (git worktree add --detach DIR COMMIT). The old
# binary then reads its own presets and profiles (DTSIM_HOME) and its own copy of each scenario;
# without it, profiles that gained keys since would make the old binary refuse them. Scenarios
# the old tree lacks are listed as NEW.
# IGNORE_KEYS="a b": top-level keys of result.json left out of the comparison, for a change that
# adds a key on purpose (e.g. IGNORE_KEYS=range when the old binary has no ranges).
# (--allow-outside: an old binary built in another checkout takes this one's scenarios/ as outside.)
set -u
old=$1 new=$2 dir=${3:-scenarios}
tree=${OLD_TREE:-}
ignore=${IGNORE_KEYS:-}
# Same bytes, or (with IGNORE_KEYS) the same JSON once those keys are dropped from both.
same_json() {
  if [ -z "$ignore" ]; then cmp -s "$1" "$2"; return; fi
  python3 - "$1" "$2" $ignore <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for k in sys.argv[3:]:
    a.pop(k, None); b.pop(k, None)
sys.exit(0 if a == b else 1)
PY
}
work=$(mktemp -d)
same=0 differ=0 failed=0
while IFS= read -r f; do
  name=$(echo "$f" | tr '/' '_')
  if [ -n "$tree" ]; then
    [ -f "$tree/$f" ] || { echo "NEW $f"; continue; }
    DTSIM_HOME="$tree" "$old" run --allow-outside "$tree/$f" -o "$work/old/$name" >/dev/null 2>&1; a=$?
  else
    "$old" run --allow-outside "$f" -o "$work/old/$name" >/dev/null 2>&1; a=$?
  fi
  "$new" run --allow-outside "$f" -o "$work/new/$name" >/dev/null 2>&1; b=$?
  if [ $a -ne $b ]; then echo "EXIT $f: $a vs $b"; failed=$((failed + 1)); continue; fi
  [ -f "$work/old/$name/result.json" ] || { same=$((same + 1)); continue; }  # refused by both alike
  if same_json "$work/old/$name/result.json" "$work/new/$name/result.json"; then same=$((same + 1))
  else echo "DIFFERS $f"; differ=$((differ + 1)); fi
done < <(find "$dir" -name '*.json' | sort)
echo "same $same, differ $differ, exit codes differ $failed"
rm -rf "$work"
[ $differ -eq 0 ] && [ $failed -eq 0 ]
