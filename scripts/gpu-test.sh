#!/usr/bin/env bash
# For the GPU machine: builds tetra with the CUDA backend for the local GPU, runs every test
# (GPU tests included), and prints a summary table last.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
log=${OUT:-/tmp}/gpu-test.log
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTETRA_CUDA=ON >/dev/null &&
  ninja -C build-gpu >"$log" 2>&1 || { tail -50 "$log"; echo "build failed"; exit 1; }
ctest --test-dir build-gpu --output-on-failure -j 8 -LE slow | tee -a "$log"
ctest --test-dir build-gpu --output-on-failure -L slow | tee -a "$log"
echo
echo "== summary =="
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
printf '%-60s %s\n' "test" "result"
grep -E "Test +#[0-9]+: " "$log" | sed -E 's/.*Test +#[0-9]+: ([^ ]+) \.+ *([A-Za-z*]+).*/\1 \2/' |
  awk '{printf "%-60s %s\n", $1, $2}'
grep -E "tests passed" "$log" | tail -2
