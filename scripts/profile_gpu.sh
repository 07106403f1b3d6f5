#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and the CUDA toolkit: build with cuBLAS and write the kernel
# table of a model for that GPU, to check in under hardware_profiles/kernel_tables/.
#   scripts/profile_gpu.sh [model preset] [dtype] [micro-batch]     (defaults: gpt2 bf16 8)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-gpt2}
dtype=${2:-bf16}
micro_batch=${3:-8}
# Fail here, before a build, rather than after it.
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "profile_gpu.sh: no NVIDIA GPU (nvidia-smi fails)" >&2
  exit 2
fi
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DDTSIM_CUDA=ON -DDTSIM_BUILD_TESTS=OFF
cmake --build build-cuda -j "$(nproc)" --target dtsim
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' A-Z' '-a-z' | tr -cd 'a-z0-9-')
# One table per model and dtype: it lists that model's shapes.
out=hardware_profiles/kernel_tables/${gpu}-${model}-${dtype}.json
build-cuda/dtsim profile --device cuda --model "$model" --dtype "$dtype" --micro-batch "$micro_batch" -o "$out"
echo "name it in the device profile as \"kernel_table\": \"kernel_tables/$(basename "$out")\""
