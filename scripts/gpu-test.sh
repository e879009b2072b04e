#!/usr/bin/env bash
# For the GPU machine: builds tetra with the CUDA backend for the local GPU (sm_90a unless
# TETRA_CUDA_ARCHS says otherwise), runs the GPU tests (verbose: they print their measured
# numbers), then every other test unless TETRA_GPU_ONLY=1, the benchmarks, compute-sanitizer's memcheck
# over the GPU op tests and one whole CUDA forward, and prints a summary table last.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
log=${OUT:-/tmp}/gpu-test.log
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTETRA_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${TETRA_CUDA_ARCHS:-90a}" >"$log" 2>&1 &&
  ninja -C build-gpu >>"$log" 2>&1 || { tail -50 "$log"; echo "build failed"; exit 1; }
ctest --test-dir build-gpu --output-on-failure -L gpu -V >>"$log" 2>&1
grep -E "^[0-9]+: (f32|bf16|tetra logits|device:)|FAILED|Failure|Expected|Which is|rel|Skipped" "$log" | grep -v "^--" | head -80
if [ "${TETRA_GPU_ONLY:-0}" != 1 ]; then
  ctest --test-dir build-gpu --output-on-failure -j 8 -LE "slow|gpu" | tee -a "$log"
  ctest --test-dir build-gpu --output-on-failure -L slow | tee -a "$log"
fi
echo "== benchmarks" | tee -a "$log"
build-gpu/bench/tetra_cuda_linear_bench 2>&1 | tee -a "$log"
sanitizer=none
if command -v compute-sanitizer >/dev/null; then
  d=tests/data/golden/dense
  compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/tests/cuda_ops_test >>"$log" 2>&1
  ops=$?
  compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/src/tetra logits --model $d \
    --tokens-file $d/tokens.json --prefill 9 --out /tmp/sanitized.f32 --device cuda >>"$log" 2>&1
  logits=$?
  compute-sanitizer --tool racecheck --error-exitcode 9 build-gpu/tests/cuda_ops_test \
    --gtest_filter='*Hyper*:*Routing*:*Indexer*:*Cache*:*NormRope*' >>"$log" 2>&1
  sanitizer="memcheck exit: cuda_ops_test $ops, tetra logits --device cuda $logits; racecheck exit: $?"
fi
echo
echo "== summary =="
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
printf '%-60s %s\n' "test" "result"
grep -E "Test +#[0-9]+: " "$log" | sed -E 's/.*Test +#[0-9]+: ([^ ]+) \.+ *([A-Za-z*]+).*/\1 \2/' |
  awk '{printf "%-60s %s\n", $1, $2}'
grep -E "tests passed" "$log" | tail -3
grep -E "(ERROR|RACECHECK) SUMMARY" "$log" | tail -3
echo "compute-sanitizer: $sanitizer"
