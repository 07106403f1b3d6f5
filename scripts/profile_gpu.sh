#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and the CUDA toolkit: build with cuBLAS and write the kernel
# table of a model for that GPU, to check in under hardware_profiles/kernel_tables/.
#   scripts/profile_gpu.sh [model preset] [dtype]     (defaults: gpt2 bf16)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-gpt2}
dtype=${2:-bf16}
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DDTSIM_CUDA=ON -DDTSIM_BUILD_TESTS=OFF
cmake --build build-cuda -j "$(nproc)" --target dtsim
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' A-Z' '-a-z' | tr -cd 'a-z0-9-')
out=hardware_profiles/kernel_tables/${gpu}-${model}-${dtype}.json
build-cuda/dtsim profile --device cuda --model "$model" --dtype "$dtype" --micro-batch 8 -o "$out"
echo "name it in the device profile as \"kernel_table\": \"kernel_tables/$(basename "$out")\""
