#!/usr/bin/env bash
# Builds tetra and runs every test: the unit and CLI tests through ctest, then the same
# tests once more under AddressSanitizer + UndefinedBehaviorSanitizer (CPU code only; the
# sanitizers do not instrument device code and CI has no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# ctest runs $jobs tests at once: one OpenMP thread each. With a thread per core in every test
# process, libgomp's spinning waits made parallel runs crawl (18 CPU forward tests on 2 cores:
# 157 s at -j2, 1.5 s with one thread each).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
./scripts/build.sh
ctest --test-dir build --output-on-failure -j "$jobs"
# GPU tests skip without a device; show why.
ctest --test-dir build -L gpu -V 2>/dev/null | grep -E "skipped:" | sed 's/^[0-9]*: */  /' || true

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTETRA_CUDA=OFF -DTETRA_SANITIZE=ON >/dev/null
ninja -C build-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" -LE slow
echo "all tests passed"
