#!/usr/bin/env bash
# For the GPU machine: a decode step's kernel timeline. Builds tetra and the CUPTI tracer
# (bench/kernel_trace.cpp) in build-gpu/, runs `tetra bench --synthetic` once with the tracer
# injected and once without (the tracer's cost on the step time is the difference), and prints
# tools/kernel_timeline.py's tables for the traced graph launches: the median step of each batch.
# Output under $OUT (or /tmp/tetra-trace): trace.csv.gz, traced.log, plain.log, timeline.txt.
# TETRA_TRACE_BIN=DIR: a build tools/pack_gpu_build.sh packed (DIR=.gpu_carry/bin/NAME): nothing is
#   built here.
# Usage: tools/trace_decode.sh [bench arguments...]
#   (default: --synthetic v4-flash --layers 20 --batch 1 32 --context 4096 --steps 3)
# TETRA_TRACE_SEQUENCE (60): how many of a step's first kernels to list in end order.
# TETRA_TRACE_EAGER_GAP_US: time the last run of kernels launched outside graphs instead (what
#   follows the last idle gap of that many us): a prefill, e.g. with TETRA_TRACE_EAGER_GAP_US=1000
#   tools/trace_decode.sh --synthetic v4-flash --layers 20 --prefill 8192
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
out=${OUT:-/tmp/tetra-trace}
mkdir -p "$out"
[ -d .gpu_carry/deps/usr ] && export CMAKE_PREFIX_PATH=$PWD/.gpu_carry/deps/usr
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--synthetic v4-flash --layers 20 --batch 1 32 --context 4096 --steps 3)
build=$PWD/build-gpu
if [ -n "${TETRA_TRACE_BIN:-}" ]; then
  . tools/unpack_gpu_build.sh
  build=/tmp/tetra-trace-bin
  unpack_gpu_build "$TETRA_TRACE_BIN" "$build" || exit 1
  [ -f "$build/bench/libtetra_kernel_trace.so" ] || { echo "$TETRA_TRACE_BIN has no packed kernel tracer"; exit 1; }
else
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTETRA_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${TETRA_CUDA_ARCHS:-90a}" >"$out/build.log" 2>&1 &&
    ninja -C build-gpu tetra tetra_kernel_trace >>"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
fi
tracer=$build/bench/libtetra_kernel_trace.so
CUDA_INJECTION64_PATH=$tracer TETRA_KERNEL_TRACE=$out/trace.csv "$build/src/tetra" bench "${args[@]}" \
  >"$out/traced.log" 2>&1 || { tail -30 "$out/traced.log"; exit 1; }
"$build/src/tetra" bench "${args[@]}" >"$out/plain.log" 2>&1 || { tail -30 "$out/plain.log"; exit 1; }
echo "== times, traced then plain"
grep -A1 -E "^(decode|prefill):" "$out/traced.log" "$out/plain.log" | grep -v "^--"
timeline=(--sequence "${TETRA_TRACE_SEQUENCE:-60}")
[ -n "${TETRA_TRACE_EAGER_GAP_US:-}" ] && timeline+=(--eager-gap-us "$TETRA_TRACE_EAGER_GAP_US")
python3 tools/kernel_timeline.py "$out/trace.csv" "${timeline[@]}" | tee "$out/timeline.txt"
gzip -f "$out/trace.csv"
