#!/usr/bin/env bash
# Headless Chromium check of `dtsim serve` (issue 16 item 5), not part of ctest: it needs Debian's
# `chromium`. Loads the page twice with strategy A's pipeline schedule set to 1F1B and then interleaved 1F1B,
# checks that the bubble the page shows changes, and takes a screenshot.
#   scripts/serve_check.sh [build dir, default build] [screenshot, default docs/serve.png]
set -euo pipefail
build=${1:-build}
shot=${2:-docs/serve.png}
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "serve_check: no chromium (apt-get install chromium)"; exit 77; }
work=$(mktemp -d)
"$build/dtsim" serve --port 0 > "$work/serve.out" &
server=$!
trap 'kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do grep -q http "$work/serve.out" && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*' "$work/serve.out")
common="nodes=1&tensor=2&pipeline=4&gbs=64&model=llama-3-8b&B.nodes=1&B.tensor=2&B.pipeline=4&B.gbs=64&B.model=llama-3-8b&B.recompute=full"
chrome() { "$browser" --headless --no-sandbox --disable-gpu --virtual-time-budget=20000 "$@" 2> /dev/null; }
bubble() { chrome --dump-dom "${url}?schedule=$1&$common" | grep -o 'id="panelA"[^>]*data-bubble="[^"]*"' | grep -o '[0-9.e-]*"$' | tr -d '"'; }
one=$(bubble 1f1b)
interleaved=$(bubble interleaved-1f1b)
echo "page's bubble with 1F1B: ${one:-none} s; with interleaved 1F1B: ${interleaved:-none} s"
[ -n "$one" ] && [ -n "$interleaved" ] || { echo "serve_check: FAIL: the page showed no result"; exit 1; }
[ "$one" != "$interleaved" ] || { echo "serve_check: FAIL: the bubble did not change with the schedule"; exit 1; }
mkdir -p "$(dirname "$shot")"
chrome --screenshot="$shot" --window-size=1400,1150 --hide-scrollbars "${url}?schedule=interleaved-1f1b&$common"
echo "serve_check: ok; screenshot in $shot"
