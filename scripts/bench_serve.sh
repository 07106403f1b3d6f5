#!/usr/bin/env bash
# `dtsim serve` under load (issue 28 item 2: at least 300 analytical answers a second on this
# 2-core machine): answers per second with 1 and 8 clients posting the explorer's kind of request
# (GPT-2 on 8 A100s, pipeline 4, analytical), each over a fresh connection, and the server's CPU
# time per answer (its children's included). Every answer must be 200; others are counted.
#   scripts/bench_serve.sh [DTSIM_BINARY] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/dtsim}
seconds=${2:-5}
tmp=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
g++ -O2 -std=c++20 -pthread -I. scripts/serve_load.cpp -o "$tmp/serve_load"
cat > "$tmp/body.json" <<'JSON'
{"schema_version": 1, "name": "serve-bench", "model": {"preset": "gpt2"},
 "hardware": {"device": "a100-sxm-80gb"}, "cluster": {"preset": "dgx-a100", "nodes": 1},
 "parallelism": {"data": 2, "pipeline": 4, "micro_batch_size": 2, "pipeline_schedule": "gpipe"},
 "training": {"global_batch_size": 32, "steps": 1000}, "simulation": {"backend": "analytical"}}
JSON
# --jobs 8: an older server ran every request as a child and refused past --jobs.
"$bin" serve --port 0 --jobs 8 > "$tmp/serve.out" &
server=$!
for _ in $(seq 100); do grep -q http "$tmp/serve.out" 2>/dev/null && break; sleep 0.05; done
port=$(sed -n 's/.*:\([0-9]*\)\/$/\1/p' "$tmp/serve.out")
# CPU seconds of the server and its reaped children (utime stime cutime cstime).
cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15 + $16 + $17) / hz}' "/proc/$server/stat"; }
"$tmp/serve_load" "$port" 1 1 "$tmp/body.json" > /dev/null  # warm: the first request reads the shipped files
printf "%-44s %8s %10s %8s %12s\n" "dtsim serve, POST /api/run (analytical)" clients answers/s non-200 cpu_ms/answer
for clients in 1 8; do
  before=$(cpu)
  read -r ok rate other wall < <("$tmp/serve_load" "$port" "$clients" "$seconds" "$tmp/body.json")
  after=$(cpu)
  printf "%-44s %8s %10s %8s %12s\n" "$bin" "$clients" "$rate" "$other" \
    "$(awk "BEGIN{printf \"%.2f\", 1000 * ($after - $before) / ($ok > 0 ? $ok : 1)}")"
done
