#!/usr/bin/env bash
# Fuzzes with libFuzzer for SECONDS (default 60) one of two harnesses:
#   scripts/fuzz.sh [scenario] [SECONDS]  the scenario loader and the memory plan
#   scripts/fuzz.sh serve [SECONDS]       `dtsim serve`'s request handler (headers and body, no sockets)
# Builds build-fuzz/ with clang (ASan + UBSan + libFuzzer coverage in every library), seeds the
# corpus with every file of scenarios/ (as request bodies for serve), and keeps what it learns in
# build-fuzz/corpus/ (build-fuzz/corpus-serve/) across runs. Inputs that crash, trip a sanitizer or
# escape as anything but an input error land in build-fuzz/findings/; replay one with:
# build-fuzz/tests/fuzz/dtsim_scenario_fuzzer FILE (or dtsim_serve_fuzzer FILE)
# DTSIM_FUZZ_JOBS=N runs N independent processes (one per core) and prints the inputs tried.
set -euo pipefail
cd "$(dirname "$0")/.."
harness=scenario
case "${1:-}" in scenario | serve) harness="$1"; shift ;; esac
seconds="${1:-60}"

# Debian 12: clang 14 and its runtime libraries (libFuzzer and the sanitizers are in
# libclang-rt-14-dev; OpenMP for clang in libomp-14-dev), beside what setup.sh installs.
source scripts/packages.sh
install_packages clang libclang-rt-14-dev libomp-14-dev "${dtsim_packages[@]}"

launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DDTSIM_FUZZ=ON \
  -DDTSIM_BUILD_TESTS=OFF -DDTSIM_CUDA=OFF "${launcher[@]}" > /dev/null
cmake --build build-fuzz -j "$(nproc)" --target "dtsim_${harness}_fuzzer"

# Seeds: every scenario as it is in the tree; a dictionary of the keys and words they use.
mkdir -p build-fuzz/seeds build-fuzz/corpus build-fuzz/findings
find scenarios -name '*.json' | while read -r f; do cp "$f" "build-fuzz/seeds/$(echo "$f" | tr / _)"; done
{
  grep -rhoE '"[A-Za-z0-9_.-]+"' scenarios models/presets hardware_profiles/clusters | sort -u
  printf '"%s"\n' '{' '}' '[' ']' ':' ',' 'null' 'true' 'false' '-0' '1e400' '-1e400' '1e-300' '0.5' '65536'
} > build-fuzz/scenario.dict

corpus=build-fuzz/corpus seeds=build-fuzz/seeds
if [ "$harness" = serve ]; then
  # Requests as the harness reads them: "METHOD TARGET", headers, an empty line, the body.
  corpus=build-fuzz/corpus-serve seeds=build-fuzz/seeds-serve
  mkdir -p "$corpus" "$seeds"
  for f in build-fuzz/seeds/*; do
    printf 'POST /api/run\nHost: localhost:8080\nOrigin: http://localhost:8080\n\n' | cat - "$f" > "$seeds/$(basename "$f")"
  done
  printf 'POST /api/run\nHost: 127.0.0.1:8080\n\n{"extends": "gpt2-dp8-a100", "name": "x"}' > "$seeds/extends-name"
  printf 'POST /api/run\nHost: localhost:8080\n\n{"extends": "../base/dgx-a100.json"}' > "$seeds/extends-path"
  printf 'GET /?a=b\nHost: [::1]:8080\nOrigin: http://evil.example\n\n' > "$seeds/get"
  printf '"%s"\n' 'POST /api/run' 'GET /' 'Host: ' 'Origin: ' 'localhost:8080' 'http://' '"extends"' >> build-fuzz/scenario.dict
fi

options=(-dict=build-fuzz/scenario.dict -max_total_time="$seconds" -max_len=16384 -timeout=30 -rss_limit_mb=4096
  -artifact_prefix=build-fuzz/findings/ -print_final_stats=1)
jobs=${DTSIM_FUZZ_JOBS:-1}
if [ "$jobs" -le 1 ]; then
  exec "build-fuzz/tests/fuzz/dtsim_${harness}_fuzzer" "$corpus" "$seeds" "${options[@]}" "${@:2}"
fi
# DTSIM_FUZZ_JOBS=N: N independent processes, each with its own corpus and -seed (no shared
# folder to contend on), logs in build-fuzz/logs/; prints the inputs tried and the peak RSS.
mkdir -p build-fuzz/logs
for i in $(seq 1 "$jobs"); do
  mkdir -p "$corpus-$i"
  "build-fuzz/tests/fuzz/dtsim_${harness}_fuzzer" "$corpus-$i" "$seeds" "${options[@]}" -seed=$((1000 + i)) "${@:2}" \
    > "build-fuzz/logs/$harness-$i.log" 2>&1 &
done
wait
cat build-fuzz/logs/"$harness"-*.log | awk '/number_of_executed_units/ {n += $2} /peak_rss_mb/ && $2 > m {m = $2}
  END {printf "%d processes: %d inputs, peak RSS %d MB\n", '"$jobs"', n, m}'
ls build-fuzz/findings
