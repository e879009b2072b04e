#!/usr/bin/env bash
# For the GPU machine: Nsight Compute's view of one decode linear kernel launch per format (the
# first launch of the M-token shape of one layer in tetra_cuda_linear_bench): DRAM and SM
# throughput, which pipes issue, where the warps wait, occupancy. Answers whether a format is
# memory-, issue- or latency-bound at that shape (docs/cuda.md, Speed).
# Usage: tools/profile_linear.sh [LAYER (attn.wq_b)] [M (1)] [FORMAT... (bf16 fp8_block nvfp4)]
# Settings: BENCH (build-gpu/bench/tetra_cuda_linear_bench).
set -uo pipefail
layer=${1:-attn.wq_b} m=${2:-1}
shift 2 2>/dev/null || shift $#
formats=("$@")
[ ${#formats[@]} -gt 0 ] || formats=(bf16 fp8_block nvfp4)
bench=${BENCH:-build-gpu/bench/tetra_cuda_linear_bench}
for f in "${formats[@]}"; do
  echo "== $layer, $f, M = $m"
  ncu --kernel-name regex:linear_mma_kernel --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section WarpStateStats --section Occupancy --section LaunchStats --print-summary none \
    "$bench" --layer "$layer" --format "$f" --tokens "$m" --iterations 1 2>&1 | grep -vE '^(==PROF==|  *-{5,})' | cut -c1-160
done
