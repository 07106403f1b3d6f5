#!/usr/bin/env bash
# One command on a machine with an NVIDIA GPU (issue 29), about 7 minutes on an H100:
#   1. the GPU, its clocks and driver (nvidia-smi), sampled every 0.5 s throughout;
#   2. dtsim with its CUDA plugin: a full build (-DDTSIM_CUDA=ON) where dtsim's dependencies are
#      installed, else the .gpu/ that scripts/gpu_pack.sh made elsewhere, with only the plugin
#      (sim/profile/cuda_timing.cu) compiled here by nvcc;
#   3. `dtsim profile --device cuda` for the kernels of the scenarios in scenarios/gpu_check/
#      (GPT-2 XL, Llama 3 8B at TP 1 (4 layers) and one TP-8 rank, ResNet-50);
#   4. scripts/gpu_train.py: plain GEMMs, SDPA flash attention and the launch overhead, then the
#      same models trained for real in PyTorch (eager, then torch.compile as time allows).
# Every part has its own timeout inside an overall budget (GPU_CHECK_BUDGET_S, default 400 s), and
# what is done is packed into the output folder after each part, so a failure or a kill keeps the
# rest. Output (3 files): gpu_check.tar.gz (everything), results.json, summary.txt.
#   scripts/gpu_check.sh [OUTPUT_DIR]     (default: $OUT, else out/gpu_check)
# GPU_CHECK_ONLY="micro gpt2-xl-compile ..." runs only the parts named (the names in the log's
# "start" lines: micro, profile-<scenario>, <model>-eager, <model>-compile), e.g. for a second try.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUTDIR=${1:-${OUT:-out/gpu_check}}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
BUDGET=${GPU_CHECK_BUDGET_S:-400}
RESERVE=15 # seconds kept for the summary and the packing
START=$(date +%s)
W=$(mktemp -d /tmp/gpu_check.XXXXXX)
mkdir -p "$W/logs" "$W/tables" "$W/train" "$W/env"
touch "$W/steps.tsv" "$W/logs/gpu_check.log" "$W/summary.txt" "$W/results.json"
export DTSIM_HOME=$ROOT PYTHONUNBUFFERED=1

elapsed() { echo $(($(date +%s) - START)); }
left() { echo $((BUDGET - $(elapsed))); }
log() { echo "[$(date -u +%H:%M:%S) +$(elapsed)s] $*" | tee -a "$W/logs/gpu_check.log"; }
# name rc seconds note -> steps.tsv
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$W/steps.tsv"; }

# Pack what exists now into the output folder (atomically: a kill between two packs keeps the last).
pack() {
  cp "$W/logs/gpu_check.log" "$W/summary.txt" 2>/dev/null || true
  python3 - "$W" > "$W/results.json.tmp" 2>> "$W/logs/gpu_check.log" <<'EOF' && mv "$W/results.json.tmp" "$W/results.json"
import json, os, sys, glob
w = sys.argv[1]
out = {"schema": "dtsim gpu_check 1", "steps": [], "train": {}, "tables": {}, "env": {}}
if os.path.exists(f"{w}/steps.tsv"):
    for line in open(f"{w}/steps.tsv"):
        n, rc, s, note = (line.rstrip("\n").split("\t") + ["", "", "", ""])[:4]
        out["steps"].append({"name": n, "rc": rc, "seconds": s, "note": note})
for f in sorted(glob.glob(f"{w}/train/*.json")):
    if f.endswith("results.json"):
        continue
    try:
        d = json.load(open(f))
        out["train"][d.get("part", os.path.basename(f)[:-5])] = d
    except Exception as e:
        out["train"][os.path.basename(f)] = {"status": "unreadable", "error": repr(e)}
for f in sorted(glob.glob(f"{w}/tables/*.json")):
    try:
        d = json.load(open(f))
        out["tables"][os.path.basename(f)] = {"provenance": d.get("provenance"), "gemms": len(d.get("gemm", [])),
                                              "convs": len(d.get("conv", []))}
    except Exception as e:
        out["tables"][os.path.basename(f)] = {"error": repr(e)}
for f in sorted(glob.glob(f"{w}/env/*.txt")):
    out["env"][os.path.basename(f)[:-4]] = open(f, errors="replace").read()[-20000:]
json.dump(out, sys.stdout, indent=1)
EOF
  tar -C "$W" -czf "$OUTDIR/.gpu_check.tar.gz.tmp" logs tables train env steps.tsv results.json 2>/dev/null
  [[ -s $OUTDIR/.gpu_check.tar.gz.tmp ]] && mv "$OUTDIR/.gpu_check.tar.gz.tmp" "$OUTDIR/gpu_check.tar.gz"
  [[ -s $W/results.json ]] && cp "$W/results.json" "$OUTDIR/.results.json.tmp" && mv "$OUTDIR/.results.json.tmp" "$OUTDIR/results.json"
  cp "$W/summary.txt" "$OUTDIR/.summary.txt.tmp" 2>/dev/null && mv "$OUTDIR/.summary.txt.tmp" "$OUTDIR/summary.txt"
  rm -f "$OUTDIR"/.*.tmp
}

# run NAME MAX_SECONDS MIN_SECONDS command...: under a timeout that also respects the budget;
# skipped when less than MIN_SECONDS remain. Output to logs/NAME.log (and its tail to the console).
run() {
  local name=$1 max=$2 min=$3
  shift 3
  if [[ -n ${GPU_CHECK_ONLY:-} && $name != plugin-nvcc && $name != dtsim-build && " $GPU_CHECK_ONLY " != *" $name "* ]]; then
    record "$name" skipped 0 "not in GPU_CHECK_ONLY"
    return 0
  fi
  local t=$(($(left) - RESERVE))
  ((t > max)) && t=$max
  if ((t < min)); then
    log "skip $name: $((t < 0 ? 0 : t)) s left of the budget, it needs $min"
    record "$name" skipped 0 "budget: ${t}s left, needs ${min}s"
    return 0
  fi
  log "start $name (timeout ${t}s)"
  local s=$(date +%s) rc=0
  timeout -k 5 "$t" "$@" > "$W/logs/$name.log" 2>&1 || rc=$?
  local d=$(($(date +%s) - s)) note=""
  ((rc == 124 || rc == 137)) && note="timed out after ${t}s"
  tail -n 6 "$W/logs/$name.log" | sed 's/^/    /' | tee -a "$W/logs/gpu_check.log"
  log "end $name: rc $rc in ${d}s $note"
  record "$name" "$rc" "$d" "$note"
  pack
  return 0
}

trap 'log "interrupted"; kill "${SMI_PID:-}" 2>/dev/null; pack; exit 130' INT TERM
log "gpu_check: output $OUTDIR, budget ${BUDGET}s, work $W"

# --- 1. The machine -----------------------------------------------------------------------------
{
  date -u +%Y-%m-%dT%H:%M:%SZ; uname -a; nproc; free -g | head -2
  cat /etc/os-release 2>/dev/null | head -4; ldd --version 2>&1 | head -1
  git -C "$ROOT" rev-parse HEAD 2>/dev/null; cat .gpu/commit .gpu/needs 2>/dev/null
} > "$W/env/machine.txt" 2>&1
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L > "$W/env/gpus.txt" 2>&1; then
  log "no NVIDIA GPU (nvidia-smi fails): nothing to measure"
  record nvidia-smi 1 0 "no GPU"
  pack
  exit 2
fi
nvidia-smi > "$W/env/nvidia-smi.txt" 2>&1
nvidia-smi -q > "$W/env/nvidia-smi-q.txt" 2>&1
nvidia-smi -q -d CLOCK,PERFORMANCE,POWER,TEMPERATURE > "$W/env/clocks-start.txt" 2>&1
# A field this driver does not know fails the whole query: then the fields every driver has.
query=name,driver_version,pstate,persistence_mode,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,clocks.applications.graphics,power.draw,power.limit,temperature.gpu,memory.total,memory.used,compute_mode,mig.mode.current
nvidia-smi --query-gpu=$query --format=csv > "$W/env/gpu-query.txt" 2>&1 ||
  nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.draw,power.limit,temperature.gpu,memory.total \
    --format=csv > "$W/env/gpu-query.txt" 2>&1
# Clocks, power and utilisation every 0.5 s for the whole run: which clocks each part ran at.
sample=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,memory.used
nvidia-smi --query-gpu=$sample,clocks_event_reasons.active --format=csv >/dev/null 2>&1 && sample=$sample,clocks_event_reasons.active
nvidia-smi --query-gpu=$sample --format=csv -lms 500 > "$W/logs/clocks.csv" 2>&1 &
SMI_PID=$!
log "$(head -2 "$W/env/gpu-query.txt" | tail -1)"

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=$(command -v nvcc || true)
[[ -z $NVCC && -x $CUDA_HOME/bin/nvcc ]] && NVCC=$CUDA_HOME/bin/nvcc
[[ -z $NVCC ]] && NVCC=$(ls -d /usr/local/cuda*/bin/nvcc 2>/dev/null | tail -1)
PY=$(command -v python3 || command -v python || true)
{
  echo "nvcc: ${NVCC:-none}"; [[ -n $NVCC ]] && "$NVCC" --version
  g++ --version 2>&1 | head -1; cmake --version 2>&1 | head -1
  echo "python: ${PY:-none}"
  # One interpreter (torch's first import is slow), each module on its own.
  [[ -n $PY ]] && "$PY" -c '
import sys
print(sys.version)
for m in ("torch", "torchvision", "triton", "numpy"):
    try:
        mod = __import__(m)
        extra = f" cuda {mod.version.cuda} cudnn {mod.backends.cudnn.version()}" if m == "torch" else ""
        print(m, mod.__version__ + extra)
    except Exception as e:
        print(m, "missing:", repr(e)[:200])
'
} > "$W/env/toolchain.txt" 2>&1
log "toolchain: $(grep -E 'release|^torch' "$W/env/toolchain.txt" | tr '\n' ' ')"

# cuBLAS for the plugin: the toolkit's, else the one PyTorch's wheels bring.
CUBLAS_DIR="" CUBLAS_INC=""
for d in "$CUDA_HOME/lib64" "$CUDA_HOME/targets/x86_64-linux/lib" /usr/lib/x86_64-linux-gnu; do
  if ls "$d"/libcublas.so* >/dev/null 2>&1; then CUBLAS_DIR=$d; break; fi
done
[[ -f $CUDA_HOME/include/cublas_v2.h ]] && CUBLAS_INC=$CUDA_HOME/include
if [[ -z $CUBLAS_DIR || -z $CUBLAS_INC ]] && [[ -n $PY ]]; then
  site=$("$PY" -c 'import nvidia, os; print(os.pathsep.join(nvidia.__path__))' 2>/dev/null | tr ':' ' ')
  for s in $site; do
    l=$(ls -d "$s"/*/lib/libcublas.so* "$s"/cublas/lib/libcublas.so* 2>/dev/null | head -1)
    [[ -z $CUBLAS_DIR && -n $l ]] && CUBLAS_DIR=$(dirname "$l")
    i=$(ls -d "$s"/*/include/cublas_v2.h "$s"/cublas/include/cublas_v2.h 2>/dev/null | head -1)
    [[ -z $CUBLAS_INC && -n $i ]] && CUBLAS_INC=$(dirname "$i")
  done
fi
log "cuBLAS: lib ${CUBLAS_DIR:-not found}, headers ${CUBLAS_INC:-not found}"
# Nothing is added to this shell's LD_LIBRARY_PATH: PyTorch must load its own cuBLAS and
# libraries, not the toolkit's or .gpu/'s. dtsim gets its own through a wrapper.

# --- 2. dtsim and its CUDA plugin ---------------------------------------------------------------
DTSIM=""
build_plugin() {  # nvcc: the plugin beside .gpu/dtsim, as CMake's CUDA build makes it
  local lib=$CUBLAS_DIR
  [[ -n $NVCC ]] || { echo "no nvcc"; return 1; }
  [[ -n $lib ]] || { echo "no libcublas"; return 1; }
  local link=-lcublas
  [[ -e $lib/libcublas.so ]] || link=-l:$(basename "$(ls "$lib"/libcublas.so.* | head -1)")
  "$NVCC" -O3 -std=c++17 -I"$ROOT" ${CUBLAS_INC:+-I"$CUBLAS_INC"} \
    -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
    -shared -Xcompiler -fPIC,-fvisibility=hidden,-Wall -cudart static \
    sim/profile/cuda_timing.cu -o .gpu/libdtsim_cuda.so.new -L"$lib" "$link" -Xlinker -rpath,"$lib" &&
    mv .gpu/libdtsim_cuda.so.new .gpu/libdtsim_cuda.so
}
if [[ -x .gpu/dtsim ]]; then
  if [[ ! -d .gpu/lib && -f .gpu/lib.tar.xz ]]; then
    tar -C .gpu -xJf .gpu/lib.tar.xz 2>> "$W/logs/gpu_check.log" ||
      "$PY" -c 'import tarfile; tarfile.open(".gpu/lib.tar.xz").extractall(".gpu")' 2>> "$W/logs/gpu_check.log" ||
      log "cannot unpack .gpu/lib.tar.xz"
  fi
  wrapper() {  # $W/dtsim: .gpu/dtsim with its libraries (and cuBLAS for the plugin) on the loader's path
    printf '#!/usr/bin/env bash\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
      "$1" "$ROOT/.gpu/dtsim" > "$W/dtsim"
    chmod +x "$W/dtsim"
  }
  wrapper "$ROOT/.gpu/lib${CUBLAS_DIR:+:$CUBLAS_DIR}"
  if ! "$W/dtsim" --version > "$W/logs/dtsim-version.log" 2>&1; then
    # An older C++ runtime than the one dtsim was built with: the packed one.
    wrapper "$ROOT/.gpu/lib:$ROOT/.gpu/lib/fallback${CUBLAS_DIR:+:$CUBLAS_DIR}"
    "$W/dtsim" --version >> "$W/logs/dtsim-version.log" 2>&1 || log "dtsim from .gpu/ does not start: $(tail -2 "$W/logs/dtsim-version.log")"
  fi
  "$W/dtsim" --version >/dev/null 2>&1 && DTSIM=$W/dtsim
  rm -f .gpu/libdtsim_cuda.so
  export -f build_plugin
  export ROOT NVCC CUBLAS_DIR CUBLAS_INC
  run plugin-nvcc 150 20 bash -c build_plugin
  if [[ ! -f .gpu/libdtsim_cuda.so && -f .gpu/prebuilt/libdtsim_cuda.so ]]; then
    log "the plugin did not build here: the one gpu_pack.sh built is used"
    cp .gpu/prebuilt/libdtsim_cuda.so .gpu/libdtsim_cuda.so
  fi
elif pkg-config --exists simgrid 2>/dev/null; then
  full_build() {
    cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DDTSIM_CUDA=ON -DDTSIM_BUILD_TESTS=OFF -G Ninja 2>/dev/null ||
      cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DDTSIM_CUDA=ON -DDTSIM_BUILD_TESTS=OFF
    cmake --build build-cuda -j "$(nproc)" --target dtsim
  }
  export -f full_build
  run dtsim-build 300 60 bash -c full_build
  [[ -x build-cuda/dtsim ]] && DTSIM=$ROOT/build-cuda/dtsim
else
  log "no .gpu/dtsim (scripts/gpu_pack.sh) and no SimGrid to build one: dtsim's part is skipped"
fi

# --- 3. PyTorch: micro-benchmarks first (short), then dtsim's tables, then the training runs ------
if [[ -n $PY ]]; then
  run micro 90 20 "$PY" scripts/gpu_train.py --part micro --out "$W/train"  # the first import of torch is slow
fi

PROFILE_SCENARIOS="gpt2-xl-1gpu llama3-8b-tp1-4layers-1gpu llama3-8b-tp8-slice-1gpu resnet50-1gpu"
if [[ -n $DTSIM ]]; then
  "$DTSIM" list devices > "$W/logs/dtsim-devices.log" 2>&1 || true
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' A-Z' '-a-z' | tr -cd 'a-z0-9-')
  for s in $PROFILE_SCENARIOS; do
    run "profile-$s" 75 15 "$DTSIM" profile --device cuda --dtype bf16 --scenario "scenarios/gpu_check/$s.json" \
      -o "$W/tables/$gpu-$s-bf16.json"
  done
fi

if [[ -n $PY ]]; then
  for m in gpt2-xl llama3-8b-tp1 llama3-8b-tp8 resnet50; do
    run "$m-eager" 80 25 "$PY" scripts/gpu_train.py --part "$m-eager" --out "$W/train"
  done
  # torch.compile: 30-90 s to compile each; GPT-2 XL and the TP-8 rank first, the rest if time is left.
  run gpt2-xl-compile 150 70 "$PY" scripts/gpu_train.py --part gpt2-xl-compile --out "$W/train"
  run llama3-8b-tp8-compile 150 70 "$PY" scripts/gpu_train.py --part llama3-8b-tp8-compile --out "$W/train"
  run llama3-8b-tp1-compile 120 60 "$PY" scripts/gpu_train.py --part llama3-8b-tp1-compile --out "$W/train"
  run resnet50-compile 120 60 "$PY" scripts/gpu_train.py --part resnet50-compile --out "$W/train"
fi

# --- 4. Summary -----------------------------------------------------------------------------------
nvidia-smi -q -d CLOCK,PERFORMANCE,POWER,TEMPERATURE > "$W/env/clocks-end.txt" 2>&1
kill "$SMI_PID" 2>/dev/null
{
  echo
  echo "== dtsim kernel tables"
  for f in "$W"/tables/*.json; do
    [[ -f $f ]] || continue
    "$PY" - "$f" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
p = d.get("provenance", {})
g = max(d.get("gemm", []), key=lambda e: 2 * e["batch"] * e["m"] * e["n"] * e["k"] / e["seconds"], default=None)
best = f", best GEMM {2 * g['batch'] * g['m'] * g['n'] * g['k'] / g['seconds'] / 1e12:.0f} TFLOP/s at {g['batch']}x{g['m']}x{g['n']}x{g['k']}" if g else ""
print(f"{sys.argv[1].split('/')[-1]}: {len(d.get('gemm', []))} GEMMs, {len(d.get('conv', []))} convs, "
      f"launch {p.get('launch_latency_us', 0):.2f} us, SM clock {p.get('sm_clock_mhz')} MHz{best}")
EOF
  done
  echo "== clocks during the run (nvidia-smi every 0.5 s)"
  "$PY" - "$W/logs/clocks.csv" <<'EOF'
import csv, statistics, sys
try:
    rows = list(csv.reader(open(sys.argv[1])))
    head = [h.strip() for h in rows[0]]
    for col in ("clocks.current.sm [MHz]", "clocks.current.memory [MHz]", "power.draw [W]", "temperature.gpu"):
        if col in head:
            i = head.index(col)
            v = []
            for r in rows[1:]:
                try:
                    v.append(float(r[i].split()[0]))
                except (IndexError, ValueError):
                    pass
            if v:
                print(f"{col}: min {min(v):.0f}, median {statistics.median(v):.0f}, max {max(v):.0f} ({len(v)} samples)")
except Exception as e:
    print(f"no clock samples: {e!r}")
EOF
  echo "== PyTorch"
  [[ -n $PY ]] && "$PY" scripts/gpu_train.py --summary "$W/train"
  echo "== steps"
  column -t -s $'\t' "$W/steps.tsv" 2>/dev/null || cat "$W/steps.tsv"
  echo "total $(elapsed) s"
} 2>&1 | tee -a "$W/logs/gpu_check.log"
pack
echo "wrote: $(ls "$OUTDIR" | tr '\n' ' ')"
