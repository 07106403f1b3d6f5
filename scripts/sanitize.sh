#!/usr/bin/env bash
# Builds the whole test suite with AddressSanitizer and UndefinedBehaviorSanitizer into
# build-asan/ (gcc's, from build-essential) and runs it; any report fails the test that made it.
# The CPU kernel test is left out: it compares two timings, which the sanitizers slow unevenly.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/packages.sh
install_packages "${dtsim_packages[@]}"

launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O1: sanitized code at a fraction of -O2's compile time, and still fast enough to test.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DDTSIM_SANITIZE=ON \
  -DDTSIM_CUDA=OFF "${launcher[@]}" > /dev/null
cmake --build build-asan -j "$(nproc)"
cd build-asan
# intercept_tls_get_addr=0: up to gcc 13, the sanitizer runtime takes a dynamic TLS block (SimGrid's,
# in the dlopen'ed libdtsim_simgrid.so) that happens to start 16 bytes past a page for one with an
# old glibc header, reads the two words before it as its range ("DTLS 7 at 0x85bc-0x20000096be"),
# and LeakSanitizer's tracer dies of signal 11 scanning it at exit (google/sanitizers#1322): which
# test it hits depends on addresses. Leaks are still found: the DTV and its blocks are heap chunks
# reached from the thread's static TLS, which LeakSanitizer scans either way.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:intercept_tls_get_addr=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# The system tests (label "system": a browser, a local Slurm) drive the same binary from outside;
# the Release run of scripts/test.sh runs them, and here they would only repeat it slower.
ctest --output-on-failure -j "$(nproc)" -E '^CpuProfile\.' -LE system
