#!/usr/bin/env bash
# Here, on a machine with dtsim's dependencies: build dtsim (Release, no tests) and put it in .gpu/
# with the shared libraries a bare Ubuntu 24.04 lacks, for scripts/gpu_check.sh on a GPU machine
# that has the CUDA toolkit and PyTorch but not SimGrid, fmt, Boost... (issue 29).
#   scripts/gpu_pack.sh    -> .gpu/dtsim; .gpu/lib.tar.xz: lib/*.so*, lib/fallback/ (libstdc++, libgcc_s);
#                             .gpu/prebuilt/libdtsim_cuda.so when this machine has nvcc and cuBLAS
# .gpu/ is ignored by git (.gitignore); carry it to the GPU machine with the working tree.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${DTSIM_PACK_BUILD:-build}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDTSIM_BUILD_TESTS=OFF "${launcher[@]}" >/dev/null
cmake --build "$build" -j "${DTSIM_PACK_JOBS:-2}" --target dtsim

rm -rf .gpu
mkdir -p .gpu/lib/fallback .gpu/prebuilt
cp "$build/dtsim" .gpu/dtsim
strip --strip-unneeded .gpu/dtsim
# The SimGrid replay, loaded beside dtsim on its first SimGrid run; SimGrid's libraries are its.
cp "$build/libdtsim_simgrid.so" .gpu/
strip --strip-unneeded .gpu/libdtsim_simgrid.so

# What every Ubuntu has (glibc, the C++ runtime): not packed. libstdc++ and libgcc_s go to
# lib/fallback, used only if the GPU machine's own are older than the ones dtsim was built with.
base='^(libc|libm|libstdc\+\+|libgcc_s|ld-linux-x86-64|libpthread|libdl|librt|linux-vdso)\.so'
closure() { ldd "$1" | awk '/=>/ && $3 ~ /^\// {print $3}'; }
for lib in $(closure "$build/dtsim") $(closure "$build/libdtsim_simgrid.so"); do
  name=$(basename "$lib")
  if [[ $name =~ $base ]]; then
    [[ $name == libstdc++* || $name == libgcc_s* ]] && cp -L "$lib" .gpu/lib/fallback/"$name"
    continue
  fi
  cp -L "$lib" .gpu/lib/"$name"
done
# The CUDA plugin, when this machine builds one (nvcc and cuBLAS found): a fallback for
# gpu_check.sh should nvcc fail there. cuBLAS itself is not packed (hundreds of MB): it comes from
# the GPU machine's toolkit or PyTorch's wheels.
if [[ -f $build/libdtsim_cuda.so ]]; then
  cp "$build/libdtsim_cuda.so" .gpu/prebuilt/
  strip --strip-unneeded .gpu/prebuilt/libdtsim_cuda.so
fi
chmod -R u+w .gpu
strip --strip-unneeded .gpu/lib/*.so* .gpu/lib/fallback/*.so* 2>/dev/null || true
git rev-parse HEAD > .gpu/commit 2>/dev/null || true
{ git status --porcelain --untracked-files=no | grep -q . && echo "dirty"; } >> .gpu/commit 2>/dev/null || true
glibc=$(objdump -T .gpu/dtsim .gpu/lib/*.so* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
cxx=$(objdump -T .gpu/dtsim .gpu/lib/*.so* 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -1)
echo "needs $glibc, $cxx" > .gpu/needs

# It must run with nothing but its own libraries and the base system.
check() {  # the folder holding dtsim and lib/
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$1/lib" DTSIM_HOME="$PWD" "$1/dtsim" --version
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$1/lib" DTSIM_HOME="$PWD" "$1/dtsim" memory scenarios/gpu_check/gpt2-xl-1gpu.json >/dev/null
  local missing
  missing=$(env -i LD_LIBRARY_PATH="$1/lib" ldd "$1/dtsim" | grep 'not found' || true)
  [[ -z $missing ]] || { echo "gpu_pack.sh: unresolved libraries: $missing" >&2; exit 1; }
}
check "$PWD/.gpu"
# SimGrid brings ns-3, GSL and gfortran (42 MB): the libraries travel as one xz archive (about
# 11 MB), which gpu_check.sh unpacks (tar, else Python's tarfile).
ls -la .gpu/lib .gpu/lib/fallback .gpu/prebuilt
tar -C .gpu -cJf .gpu/lib.tar.xz lib
rm -rf .gpu/lib
tmp=$(mktemp -d)
cp .gpu/dtsim "$tmp/" && tar -C "$tmp" -xJf .gpu/lib.tar.xz && check "$tmp"
rm -rf "$tmp"
ls -la .gpu
echo "$(cat .gpu/needs); .gpu/ is $(du -sh .gpu | cut -f1) ($(du -sb .gpu | cut -f1) bytes)"
size=$(du -sb .gpu | cut -f1)
if (( size > 40 * 1024 * 1024 )); then
  echo "gpu_pack.sh: .gpu/ is over 40 MiB" >&2
  exit 1
fi
